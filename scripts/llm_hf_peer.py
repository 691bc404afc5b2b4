#!/usr/bin/env python3
"""transformers as the LLM peer and reference on the GPU machine (issue 13 acceptance).

Needs torch (CUDA), numpy and transformers (the GPU machine's venv; no network: checkpoints are random-initialized
with transformers' own init, seeded, and saved with save_pretrained in float16).

    python3 llm_hf_peer.py make DIR --models gpt2,llama1b,qwen05b[,llama8b]
    python3 llm_hf_peer.py reference CKPT --prompts prompts.json --new-tokens 64 --out REF.json [--logits-dir D]
    python3 llm_hf_peer.py bench CKPT --batch 1,8,64 --input-len 128 --output-len 128 [--compile] --out BENCH.json

make: GPT-2 124M (GPT2Config defaults), a Llama-3.2-1B-shaped Llama (hidden 2048, 16 layers, 32 heads, 8 kv heads,
  SwiGLU 8192, vocab 128256, tied embeddings, llama3 RoPE scaling), a Qwen2-0.5B-shaped Qwen2 (hidden 896, 24 layers,
  14 heads, 2 kv heads, 4864, vocab 151936, tied, q/k/v biases) and optionally a Llama-3.1-8B-shaped Llama (hidden
  4096, 32 layers, 32/8 heads, 14336, vocab 128256, untied). Weights are transformers' own init (initializer_range
  0.02, seeded), initialized on the GPU and saved in float16; eos is disabled in their generation config.
reference: for each prompt (token ids), the FP32 model's logits at the last prompt position (.npy per prompt) and the
  FP16 model's greedy generate of N tokens with eos disabled (ids), as JSON.
bench: transformers generate with a static KV cache (cache_implementation="static"), FP16, eos disabled,
  min_new_tokens = max_new_tokens = output-len; optionally forward compiled with torch.compile(mode="reduce-overhead",
  fullgraph=True), which transformers applies to the decoding forward itself when the cache is static (its
  generation_config.compile_config; --compile off sets disable_compile). Time to first token =
  generate(max_new_tokens=1); time per output token = (total - TTFT) / (output-len - 1); CUDA-synchronized wall
  clock, median of 3 after a warm-up. Peak memory from torch.cuda.max_memory_allocated.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import transformers as t


def llama3_rope(theta=500000.0):
    return {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192}


def config(name):
    if name == "gpt2":
        return t.GPT2Config(), t.GPT2LMHeadModel
    if name == "llama1b":
        kw = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                  num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True, max_position_embeddings=131072,
                  rms_norm_eps=1e-5, head_dim=64)
    elif name == "llama8b":
        kw = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                  num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False, max_position_embeddings=131072,
                  rms_norm_eps=1e-5)
    elif name == "qwen05b":
        return t.Qwen2Config(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                             num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True,
                             max_position_embeddings=32768, rope_theta=1000000.0), t.Qwen2ForCausalLM
    else:
        raise SystemExit(f"unknown model {name}")
    try:
        return t.LlamaConfig(rope_theta=500000.0, rope_scaling=llama3_rope(), **kw), t.LlamaForCausalLM
    except TypeError:
        return t.LlamaConfig(rope_parameters=dict(llama3_rope(), rope_theta=500000.0), **kw), t.LlamaForCausalLM


def cmd_make(a):
    for name in a.models.split(","):
        d = os.path.join(a.dir, name)
        if os.path.exists(os.path.join(d, "config.json")):
            continue
        torch.manual_seed(0)
        cfg, cls = config(name)
        t0 = time.time()
        with torch.device("cuda"):
            m = cls(cfg)
        m = m.half()
        m.generation_config.eos_token_id = None
        m.save_pretrained(d, safe_serialization=True)
        n = sum(p.numel() for p in m.parameters())
        print(f"[make] {name}: {n / 1e6:.0f}M parameters, {time.time() - t0:.1f} s -> {d}", flush=True)
        del m
        torch.cuda.empty_cache()


def load(ckpt, dtype):
    m = t.AutoModelForCausalLM.from_pretrained(ckpt, torch_dtype=dtype).cuda().eval()
    m.generation_config.eos_token_id = None
    m.generation_config.pad_token_id = 0
    return m


def cmd_reference(a):
    """Per prompt: the FP32 model's last-position logits (ref_i.npy) and greedy tokens, and the FP16 model's greedy
    tokens with, per generated step, the margin between its top-2 logits and the largest |logit| (so a difference
    with Kiln can be told apart from a near tie that FP16 rounding breaks either way)."""
    prompts = json.load(open(a.prompts))
    out = {"prompts": [{"prompt": p} for p in prompts]}
    os.makedirs(a.logits_dir, exist_ok=True)
    m32 = load(a.ckpt, torch.float32)
    with torch.no_grad():
        for i, p in enumerate(prompts):
            ids = torch.tensor([p], device="cuda")
            logits = m32(ids).logits[0, -1].float().cpu().numpy()
            np.save(os.path.join(a.logits_dir, f"ref_{i}.npy"), logits)
            g = m32.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=a.new_tokens,
                             min_new_tokens=a.new_tokens)
            out["prompts"][i]["greedy_fp32"] = g[0, len(p):].tolist()
    del m32
    torch.cuda.empty_cache()
    m16 = load(a.ckpt, torch.float16)
    with torch.no_grad():
        for i, p in enumerate(prompts):
            ids = torch.tensor([p], device="cuda")
            g = m16.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=a.new_tokens,
                             min_new_tokens=a.new_tokens, output_scores=True, return_dict_in_generate=True)
            margins, scales = [], []
            for sc in g.scores:
                top = torch.topk(sc[0].float(), 2).values
                margins.append(float(top[0] - top[1]))
                scales.append(float(sc[0].float().abs().max()))
            out["prompts"][i].update(greedy_fp16=g.sequences[0, len(p):].tolist(), fp16_top2_margin=margins,
                                     fp16_logit_scale=scales)
    json.dump(out, open(a.out, "w"))


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def cmd_bench(a):
    m = load(a.ckpt, torch.float16)
    m.generation_config.cache_implementation = "static"
    # transformers compiles the decoding forward itself when the cache is static (generation_config.compile_config:
    # torch.compile(fullgraph=True, mode="reduce-overhead")); wrapping forward by hand breaks its CUDA graphs
    # ("accessing tensor output of CUDAGraphs that has been overwritten"). disable_compile gives the eager peer.
    m.generation_config.disable_compile = not a.compile
    res = {"peer": "transformers " + t.__version__ + (" static cache + its torch.compile (reduce-overhead)" if a.compile
                                                     else " static cache, eager"),
           "torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "runs": []}
    g = torch.Generator().manual_seed(0)
    vocab = m.config.vocab_size
    for b in [int(x) for x in a.batch.split(",")]:
        ids = torch.randint(100, vocab - 1, (b, a.input_len), generator=g).cuda()
        mask = torch.ones_like(ids)
        torch.cuda.reset_peak_memory_stats()

        def gen(n):
            with torch.no_grad():
                m.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=n, min_new_tokens=n)

        t0 = time.time()
        gen(a.output_len)  # warm-up (compiles)
        gen(1)
        warm = time.time() - t0
        ttft = sorted(timed(lambda: gen(1)) for _ in range(3))[1]
        total = sorted(timed(lambda: gen(a.output_len)) for _ in range(3))[1]
        tpot = (total - ttft) / max(a.output_len - 1, 1)
        r = {"batch": b, "input_len": a.input_len, "output_len": a.output_len, "ttft_ms": round(ttft, 3),
             "tpot_ms": round(tpot, 4), "total_ms": round(total, 2),
             "output_tokens_per_s": round(b * a.output_len / (total / 1e3), 1),
             "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2), "warmup_s": round(warm, 1)}
        res["runs"].append(r)
        print(f"[peer] {os.path.basename(a.ckpt)} {json.dumps(r)}", flush=True)
        if time.time() - t0 > a.max_seconds:
            print(f"[peer] stopping after batch {b}: over {a.max_seconds} s", flush=True)
            break
    json.dump(res, open(a.out, "w"), indent=1)


def cmd_bound(a):
    """The decode bound of a checkpoint: a step reads every weight once, at the device's copy rate (a 2 GiB
    D2D copy, median of 10; read + write bytes / s)."""
    nbytes = sum(os.path.getsize(os.path.join(a.ckpt, f)) for f in os.listdir(a.ckpt) if f.endswith(".safetensors"))
    x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(10):
        s.record()
        y.copy_(x)
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    bw = 2 * x.numel() / (sorted(ts)[len(ts) // 2] / 1e3)
    print(json.dumps({"bound": "decode step reads every weight once", "weight_bytes": nbytes, "copy_bw_GBps": round(bw / 1e9, 1),
                      "tpot_bound_ms": round(nbytes / bw * 1e3, 3), "gpu": torch.cuda.get_device_name()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("make")
    p.add_argument("dir")
    p.add_argument("--models", default="gpt2,llama1b,qwen05b")
    p = sub.add_parser("reference")
    p.add_argument("ckpt")
    p.add_argument("--prompts", required=True)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--out", required=True)
    p.add_argument("--logits-dir", required=True)
    p = sub.add_parser("bench")
    p.add_argument("ckpt")
    p.add_argument("--batch", default="1,8,64")
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--max-seconds", type=float, default=240)
    p.add_argument("--out", required=True)
    p = sub.add_parser("bound")
    p.add_argument("ckpt")
    a = ap.parse_args()
    {"make": cmd_make, "reference": cmd_reference, "bench": cmd_bench, "bound": cmd_bound}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
