#!/usr/bin/env python3
"""Current Hugging Face exports through Kiln's GPU builder (issue 11 item 1).

Needs torch, numpy and transformers (the GPU machine's venv; no network: models are random-initialized from
their configs with transformers' own init, seeded). For each model below and each exporter of the installed
torch — the TorchScript-based `torch.onnx.export(..., dynamo=False)` (opset 17) and the dynamo-based
`torch.onnx.export(..., dynamo=True)` (opset 18; needs onnxscript) — it

  1. exports the model with dynamic batch and sequence dims,
  2. runs `kiln build MODEL.onnx --device gpu --fp16` (the opt/max shapes given below),
  3. runs the plan (`kiln run --input ... --output-dir`) on fixed seeded inputs and compares its first output
     with the PyTorch FP32 output: cosine similarity and max |diff| / max |ref|.

    python3 scripts/export_hf.py KILN [--out DIR] [--json REPORT.json] [--models bert,gpt2,...]
                                      [--exporters torchscript,dynamo] [--device gpu|cpu] [--build-flags "..."]

Models (transformers classes, default configs unless noted): bert (BertModel, bert-base), roberta
(RobertaModel, roberta-base), gpt2 (GPT2LMHeadModel, 124M), llama (LlamaForCausalLM, Llama-3.2-1B-shaped
widths with 4 layers: hidden 2048, 32 heads, 8 kv heads, SwiGLU 8192, RoPE llama3), qwen2 (Qwen2ForCausalLM,
0.5B-shaped widths with 4 layers, q/k/v biases), t5 (T5ForConditionalGeneration, t5-small: encoder-decoder with
relative position buckets), vit (ViTModel, ViT-B/16 224). Batch 2, sequence 128 (ViT: 224x224 images).
A build failure is reported with Kiln's error text (the unsupported ops, named); nothing is hidden.
Exit status 0 when every case exported, built and matched (cosine >= 0.999), 1 otherwise. --tiny --export-only
makes test-size exports only (with their inputs and PyTorch outputs), to keep as test data.
"""
import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import transformers

B, S = 2, 128
COS_MIN = 0.999


TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=128,
            max_position_embeddings=160)


def make_tiny(name):
    """The same classes at test size (hidden 32, 2 layers, 2 heads, vocab 128): exports small enough to keep as
    test data (tests/data/hf_tiny)."""
    torch.manual_seed(0)
    t = transformers
    if name == "bert":
        return t.BertModel(t.BertConfig(**TINY)), "text_mask_type"
    if name == "roberta":
        return t.RobertaModel(t.RobertaConfig(**TINY)), "text_mask"
    if name == "gpt2":
        return t.GPT2LMHeadModel(t.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=128, n_positions=160)), "text_mask"
    if name == "llama":
        return t.LlamaForCausalLM(t.LlamaConfig(**dict(TINY, num_attention_heads=4, num_key_value_heads=2))), "text_mask"
    if name == "qwen2":
        return t.Qwen2ForCausalLM(t.Qwen2Config(**dict(TINY, num_attention_heads=4, num_key_value_heads=2))), "text_mask"
    if name == "t5":
        return t.T5ForConditionalGeneration(t.T5Config(d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2,
                                                       vocab_size=128)), "seq2seq"
    if name == "vit":
        return t.ViTModel(t.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, image_size=32, patch_size=8)), "image"
    raise SystemExit(f"unknown model {name}")


def make(name):
    torch.manual_seed(0)
    t = transformers
    if name == "bert":
        return t.BertModel(t.BertConfig()), "text_mask_type"
    if name == "roberta":
        return t.RobertaModel(t.RobertaConfig()), "text_mask"
    if name == "gpt2":
        return t.GPT2LMHeadModel(t.GPT2Config()), "text_mask"
    if name == "llama":
        cfg = t.LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=4, num_attention_heads=32,
                            num_key_value_heads=8, vocab_size=32000, max_position_embeddings=4096)
        return t.LlamaForCausalLM(cfg), "text_mask"
    if name == "qwen2":
        cfg = t.Qwen2Config(hidden_size=896, intermediate_size=4864, num_hidden_layers=4, num_attention_heads=14,
                            num_key_value_heads=2, vocab_size=32000, max_position_embeddings=4096)
        return t.Qwen2ForCausalLM(cfg), "text_mask"
    if name == "t5":
        cfg = t.T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128)
        return t.T5ForConditionalGeneration(cfg), "seq2seq"
    if name == "vit":
        return t.ViTModel(t.ViTConfig()), "image"
    raise SystemExit(f"unknown model {name}")


class Wrap(torch.nn.Module):
    """Returns the first output tensor only (no caches, no dicts) so every exporter sees one output."""

    def __init__(self, m, kind):
        super().__init__()
        self.m, self.kind = m, kind

    def forward(self, x0, x1=None, x2=None):
        xs = (x0, x1, x2)
        if self.kind == "text_mask_type":
            out = self.m(input_ids=xs[0], attention_mask=xs[1], token_type_ids=xs[2])
        elif self.kind == "text_mask":
            out = self.m(input_ids=xs[0], attention_mask=xs[1], use_cache=False)
        elif self.kind == "seq2seq":
            out = self.m(input_ids=xs[0], attention_mask=xs[1], decoder_input_ids=xs[2], use_cache=False)
        else:
            out = self.m(pixel_values=xs[0])
        return out[0]


def inputs(kind, vocab, image=224):
    g = torch.Generator().manual_seed(1)
    if kind == "image":
        return {"pixel_values": torch.randn(B, 3, image, image, generator=g)}
    ids = torch.randint(0, vocab, (B, S), generator=g)
    mask = torch.ones(B, S, dtype=torch.int64)
    mask[1, S - 17:] = 0  # the second sequence is padded: the mask matters
    if kind == "text_mask_type":
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros(B, S, dtype=torch.int64)}
    if kind == "seq2seq":
        return {"input_ids": ids, "attention_mask": mask,
                "decoder_input_ids": torch.randint(0, vocab, (B, 32), generator=g)}
    return {"input_ids": ids, "attention_mask": mask}


def export(model, kind, feeds, path, exporter):
    names = list(feeds)
    args = tuple(feeds.values())
    if exporter == "torchscript":
        dyn = {n: ({0: "batch"} if kind == "image" else {0: "batch", 1: ("dec" if n == "decoder_input_ids" else "seq")})
               for n in names}
        dyn["out"] = {0: "batch"}
        torch.onnx.export(model, args, path, input_names=names, output_names=["out"], opset_version=17,
                          dynamic_axes=dyn, dynamo=False)
    else:
        bd = torch.export.Dim("batch", min=1, max=64)
        sd = torch.export.Dim("seq", min=2, max=512)
        dd = torch.export.Dim("dec", min=2, max=512)
        shapes = tuple(({0: bd} if kind == "image" else {0: bd, 1: (dd if n == "decoder_input_ids" else sd)})
                       for n in names) + (None,) * (3 - len(names))
        args = args + (None,) * (3 - len(names))
        torch.onnx.export(model, args, path, input_names=names, output_names=["out"], dynamo=True,
                          dynamic_shapes=shapes, external_data=False)


def shapes_arg(feeds, scale, batch=None):
    parts = []
    for n, v in feeds.items():
        dims = list(v.shape)
        if batch is not None:
            dims[0] = batch
        elif scale != 1:
            dims[0] = dims[0] * scale
        parts.append(n + ":" + "x".join(str(d) for d in dims))
    return ",".join(parts)


def bench(a, w, kind, vocab, plan, feeds):
    """Kiln's plan (`kiln bench --cuda-graph`, GPU compute median) beside PyTorch FP16 on the same module at
    batch a.bench: eager, one CUDA graph of the eager ops, torch.compile(mode="reduce-overhead"); CUDA-event
    medians (bench/peers/cuda_timing.py)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "peers"))
    from cuda_timing import time_graph, time_replays
    out = {"batch": a.bench}
    shapes = shapes_arg(feeds, 1, batch=a.bench)
    rc, text, _ = run([a.kiln, "bench", plan, "--cuda-graph", "--shapes", shapes, "--iterations", "200", "--json",
                       plan + ".bench.json"])
    if rc == 0:
        out["kiln_ms"] = round(json.load(open(plan + ".bench.json"))["gpu_compute_ms"]["median"], 4)
    else:
        out["kiln_error"] = text[-400:]
    m = copy.deepcopy(w).half().cuda().eval()
    big = {n: torch.cat([v] * (a.bench // v.shape[0] + 1))[: a.bench] for n, v in inputs(kind, vocab).items()}
    xs = [v.cuda().half() if v.is_floating_point() else v.cuda() for v in big.values()]
    with torch.no_grad():
        out["torch_eager_ms"] = round(time_replays(lambda: m(*xs), 50), 4)
        out["torch_cuda_graph_ms"] = round(time_graph(lambda: m(*xs), 50), 4)
        try:
            t0 = time.time()
            c = torch.compile(m, mode="reduce-overhead")
            for _ in range(3):
                c(*xs)
            out["compile_s"] = round(time.time() - t0, 1)
            out["torch_compile_ms"] = round(time_replays(lambda: c(*xs), 50), 4)
        except Exception as e:  # the peer's failure is reported, not hidden
            out["torch_compile_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    del m
    torch.cuda.empty_cache()
    return out


def run(cmd, timeout=900):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, (p.stdout + p.stderr), time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kiln")
    ap.add_argument("--out")
    ap.add_argument("--json")
    ap.add_argument("--models", default="bert,roberta,gpt2,llama,qwen2,t5,vit")
    ap.add_argument("--exporters", default="torchscript,dynamo")
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--build-flags", default="--tuning-shapes 0", help="extra `kiln build` flags (one string)")
    ap.add_argument("--tiny", action="store_true", help="test-size configs (hidden 32, 2 layers, vocab 128; ViT 32x32 images)")
    ap.add_argument("--export-only", action="store_true", help="export (and save inputs + PyTorch outputs) only")
    ap.add_argument("--bench-models", default="bert,gpt2,vit", help="the models --bench times")
    ap.add_argument("--bench", type=int, default=0, metavar="BATCH",
                    help="also time the TorchScript export's plan (`kiln bench --cuda-graph`, FP16) at this batch beside "
                         "PyTorch FP16 eager, CUDA graph and torch.compile(mode='reduce-overhead') on the same model")
    a = ap.parse_args()
    root = a.out or tempfile.mkdtemp(prefix="kiln_hf_")
    os.makedirs(root, exist_ok=True)
    report = {"torch": torch.__version__, "transformers": transformers.__version__, "device": a.device, "cases": []}
    ok_all = True
    for name in a.models.split(","):
        model, kind = make_tiny(name) if a.tiny else make(name)
        model.eval()
        vocab = getattr(model.config, "vocab_size", 1000)
        feeds = inputs(kind, vocab, 32 if a.tiny else 224)
        w = Wrap(model, kind).eval()
        with torch.no_grad():
            ref = w(*feeds.values()).float().numpy()
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        for n, v in feeds.items():
            np.save(os.path.join(d, n + ".npy"), v.numpy())
        np.save(os.path.join(d, "reference_out.npy"), ref)
        for ex in a.exporters.split(","):
            case = {"model": name, "exporter": ex}
            path = os.path.join(d, f"{name}.{ex}.onnx")
            t0 = time.time()
            try:
                with torch.no_grad():
                    export(w, kind, feeds, path, ex)
                case["export_s"] = round(time.time() - t0, 1)
            except Exception as e:  # an exporter that cannot export is the exporter's limit, not Kiln's
                msg = str(e)
                case["export_error"] = f"{type(e).__name__}: {msg[:300]} ... {msg[-1200:]}"
                report["cases"].append(case)
                ok_all = False
                print(f"[{name}/{ex}] export failed: {case['export_error'][-900:]}", flush=True)
                continue
            if a.export_only:
                report["cases"].append(case)
                continue
            plan = path + ".plan"
            build = [a.kiln, "build", path, "-o", plan, "--device", a.device]
            if a.device == "gpu":
                build.append("--fp16")
            do_bench = a.bench and ex == "torchscript" and name in a.bench_models.split(",")
            if do_bench:
                big = shapes_arg(feeds, 1, batch=a.bench)
                build += ["--min-shapes", shapes_arg(feeds, 1, batch=1), "--opt-shapes", big, "--max-shapes", big]
            else:
                build += ["--min-shapes", shapes_arg(feeds, 1), "--opt-shapes", shapes_arg(feeds, 1),
                          "--max-shapes", shapes_arg(feeds, 4)]
            build += a.build_flags.split()
            rc, out, secs = run(build)
            case["build_s"] = round(secs, 1)
            if rc != 0:
                lines = out.strip().splitlines()
                case["build_error"] = "\n".join(lines[:30] + (["..."] + lines[-5:] if len(lines) > 35 else lines[30:]))
                ok_all = False
                report["cases"].append(case)
                print(f"[{name}/{ex}] build failed:\n{case['build_error'][:1500]}", flush=True)
                continue
            od = os.path.join(d, f"out.{ex}")
            cmd = [a.kiln, "run", plan, "--output-dir", od]
            for n in feeds:
                cmd += ["--input", f"{n}={os.path.join(d, n + '.npy')}"]
            rc, out, secs = run(cmd)
            if rc != 0:
                case["run_error"] = out.strip()[-1500:]
                ok_all = False
                report["cases"].append(case)
                print(f"[{name}/{ex}] run failed:\n{case['run_error'][-600:]}", flush=True)
                continue
            files = sorted(f for f in os.listdir(od) if f.endswith(".npy"))
            got = np.load(os.path.join(od, files[0])).astype(np.float64).ravel()
            want = ref.astype(np.float64).ravel()
            if got.size != want.size:
                case["compare_error"] = f"output size {got.size} vs reference {want.size}"
                ok_all = False
            else:
                cos = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want) + 1e-30))
                rel = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-30))
                case.update(cosine=round(cos, 6), max_rel=float(f"{rel:.3g}"), passed=cos >= COS_MIN)
                ok_all &= cos >= COS_MIN
            if do_bench:
                case["bench"] = bench(a, w, kind, vocab, plan, feeds)
            report["cases"].append(case)
            print(f"[{name}/{ex}] {json.dumps(case)}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
