#!/usr/bin/env python3
"""Kiln's CPU LLM generation (kiln_llm_generate) against transformers on the same checkpoints (issue 13).

Needs torch, numpy and transformers (the GPU machine's venv has them; no GPU and no network are used):

    python3 scripts/llm_reference_hf.py KILN_LLM_GENERATE [--out DIR] [--json REPORT.json] [--keep]
                                        [--new-tokens 32] [--gpt2-124m] [--llama-1b]

On the GPU machine, after `scripts/gpu_carry.sh` here: run(command="scripts/gpu_llm_reference.sh",
carry=[".gpu-carry"]) (it sources scripts/gpu_env.sh for the carried libraries and the venv's Python).

For tiny random-initialized models made with transformers' own classes and init (seeded; GPT-2, a
Llama-3.1-style Llama with llama3 RoPE scaling and GQA, a tied Llama with an explicit head_dim saved
in BF16, Mistral, and Qwen2 with q/k/v biases saved in F16) it saves each with save_pretrained
(safetensors), then for two seeded prompts per model runs

    kiln_llm_generate DIR --prompt-ids ... --max-new-tokens N --ignore-eos --json --dump-logits L.npy

and compares with the transformers model holding exactly the saved values, in float32:
  * prefill logits [prompt_len, vocab]: cosine similarity and max |Δ| / max |ref| (pass: cosine
    >= 0.99999 and relative error <= 1e-4);
  * N greedy tokens vs model.generate(do_sample=False) with eos disabled (pass: identical; where they
    first differ it reports the reference's top-2 logit margin at that step — a margin below 1e-4 of
    the logits' scale is a near tie that float32 rounding may break either way, reported as such);
  * seeded sampling (temperature 0.8, top-k 40, top-p 0.9) run twice gives the same tokens.
Exit status 0 when everything passes (near ties count as passes and are listed), 1 otherwise,
77 when torch/transformers are missing.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import torch
    import transformers
    from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, MistralConfig,
                              MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM)
except ImportError as e:  # not this machine's job
    print(f"llm_reference_hf.py: needs numpy, torch and transformers ({e}); skipped")
    sys.exit(77)

COS_MIN, REL_MAX, TIE_REL = 0.99999, 1e-4, 1e-4
INIT_RANGE = 0.1  # transformers' own init with a wider std than 0.02, so tiny models' logits are not all near ties


def llama3_config(**kw):
    """LlamaConfig with llama3 RoPE scaling, in whichever spelling this transformers takes."""
    rope = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64}
    try:
        return LlamaConfig(rope_theta=500000.0, rope_scaling=rope, **kw)
    except TypeError:
        return LlamaConfig(rope_parameters=dict(rope, rope_theta=500000.0), **kw)


def cases(args):
    """(name, model class, config, dtype saved)"""
    yield "gpt2", GPT2LMHeadModel, GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=128, vocab_size=300,
                                              initializer_range=INIT_RANGE), torch.float32
    yield "llama31_gqa", LlamaForCausalLM, llama3_config(
        hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
        vocab_size=320, max_position_embeddings=256, tie_word_embeddings=False, bos_token_id=1, eos_token_id=[2, 3],
        initializer_range=INIT_RANGE), torch.float32
    yield "llama32_tied_bf16", LlamaForCausalLM, LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=32, vocab_size=256, tie_word_embeddings=True, initializer_range=INIT_RANGE), torch.bfloat16
    yield "mistral", MistralForCausalLM, MistralConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
        vocab_size=200, sliding_window=4096, initializer_range=INIT_RANGE), torch.float32
    yield "qwen2_f16", Qwen2ForCausalLM, Qwen2Config(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=250, tie_word_embeddings=True, initializer_range=INIT_RANGE), torch.float16
    if args.gpt2_124m:
        yield "gpt2_124m", GPT2LMHeadModel, GPT2Config(), torch.float32
    if args.llama_1b:  # Llama-3.2-1B's shape; Kiln's CPU reference holds it in float32 (~5 GB)
        yield "llama32_1b", LlamaForCausalLM, llama3_config(
            hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
            num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, tie_word_embeddings=True,
            bos_token_id=128000, eos_token_id=[128001, 128008, 128009]), torch.bfloat16


def kiln(tool, d, prompt, new_tokens, extra=(), logits_path=None):
    cmd = [tool, d, "--prompt-ids", ",".join(map(str, prompt)), "--max-new-tokens", str(new_tokens), "--ignore-eos",
           "--json", *extra]
    if logits_path:
        cmd += ["--dump-logits", logits_path]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def compare_logits(got, want):
    a, b = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
    cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    rel = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
    return cos, rel


def first_difference(model, prompt, ours, theirs):
    """Index where the greedy sequences first differ and the reference's top-2 margin there."""
    n = min(len(ours), len(theirs))
    i = next((k for k in range(n) if ours[k] != theirs[k]), n if len(ours) != len(theirs) else None)
    if i is None:
        return None, None
    with torch.no_grad():
        logits = model(torch.tensor([prompt + theirs[:i]])).logits[0, -1].double()
    top2 = torch.topk(logits, 2).values
    return i, float((top2[0] - top2[1]) / logits.abs().max())


def check(tool, name, cls, cfg, dtype, root, args, report):
    d = os.path.join(root, name)
    torch.manual_seed(sum(map(ord, name)))  # seeded per model, the same on every run (unlike hash())
    model = cls(cfg).eval()
    model.to(dtype)
    try:
        model.save_pretrained(d, safe_serialization=True)
    except TypeError:  # transformers versions that always write safetensors and dropped the flag
        model.save_pretrained(d)
    if not any(f.endswith(".safetensors") for f in os.listdir(d)):
        raise RuntimeError(f"save_pretrained wrote no safetensors file in {d}: {sorted(os.listdir(d))}")
    model.to(torch.float32)  # the saved values, computed in float32
    model.generation_config.eos_token_id = None  # generate N tokens, as --ignore-eos does
    model.generation_config.pad_token_id = 0
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(7)
    errors, notes = [], []
    for plen in (5, 17):
        prompt = torch.randint(0, vocab, (plen,), generator=g).tolist()
        tag = f"{name} prompt[{plen}]"
        npy = os.path.join(d, f"logits_{plen}.npy")
        t0 = time.time()
        out = kiln(tool, d, prompt, args.new_tokens, logits_path=npy)
        kiln_s = time.time() - t0
        with torch.no_grad():
            ids = torch.tensor([prompt])
            want = model(ids).logits[0].float().numpy()
            gen = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.new_tokens,
                                 do_sample=False)[0, plen:].tolist()
        cos, rel = compare_logits(np.load(npy), want)
        ours = out["tokens"]
        i, margin = first_difference(model, prompt, ours, gen)
        entry = {"model": name, "prompt_len": plen, "dtype_saved": str(dtype).replace("torch.", ""),
                 "prefill_cosine": cos, "prefill_max_rel_err": rel, "greedy_tokens": len(ours),
                 "greedy_equal": i is None, "first_difference": i, "reference_margin_there": margin,
                 "kiln_prefill_ms": out["prefill_ms"], "kiln_decode_tokens_per_s": out["decode_tokens_per_s"],
                 "kiln_wall_s": kiln_s}
        if len(gen) != args.new_tokens:
            notes.append(f"{tag}: transformers generated {len(gen)} tokens, not {args.new_tokens}")
        if not (cos >= COS_MIN and rel <= REL_MAX):
            errors.append(f"{tag}: prefill logits cosine {cos:.7f}, max rel err {rel:.2e} (want >= {COS_MIN}, <= {REL_MAX})")
        if i is not None:
            msg = (f"{tag}: greedy tokens first differ at {i} (Kiln {ours[i:i + 4]}..., transformers {gen[i:i + 4]}...), "
                   f"reference top-2 margin {margin:.2e} of max |logit|")
            if margin is not None and margin < TIE_REL:
                notes.append(msg + " — a near tie")
                entry["near_tie"] = True
            else:
                errors.append(msg)
        print(f"{tag}: prefill cosine {cos:.8f}, max rel err {rel:.2e}; greedy {len(ours)} tokens "
              f"{'identical' if i is None else f'differ at {i}'}; Kiln prefill {out['prefill_ms']:.1f} ms, "
              f"decode {out['decode_tokens_per_s']:.1f} tok/s")
        report.append(entry)
    # Seeded sampling is reproducible across processes.
    sample = ["--temperature", "0.8", "--top-k", "40", "--top-p", "0.9", "--seed", "7"]
    s1 = kiln(tool, d, [1, 2, 3], args.new_tokens, sample)["tokens"]
    s2 = kiln(tool, d, [1, 2, 3], args.new_tokens, sample)["tokens"]
    if s1 != s2:
        errors.append(f"{name}: seeded sampling differs between runs: {s1} vs {s2}")
    return errors, notes


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("tool", help="path to kiln_llm_generate")
    p.add_argument("--out", help="directory for the checkpoints (default: a temporary one, removed unless --keep)")
    p.add_argument("--json", help="write the per-prompt results here")
    p.add_argument("--keep", action="store_true", help="keep the checkpoints")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--gpt2-124m", action="store_true", help="also GPT-2 124M (default GPT2Config)")
    p.add_argument("--llama-1b", action="store_true", help="also a Llama-3.2-1B-shaped model (slow on the CPU)")
    args = p.parse_args()
    tool = os.path.abspath(args.tool)
    if not os.access(tool, os.X_OK):
        sys.exit(f"llm_reference_hf.py: {tool} is not an executable (build kiln_llm_generate, or scripts/gpu_carry.sh)")
    root = args.out or tempfile.mkdtemp(prefix="kiln_llm_ref_")
    os.makedirs(root, exist_ok=True)
    torch.set_grad_enabled(False)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, numpy {np.__version__}; "
          f"checkpoints in {root}")
    errors, notes, report = [], [], []
    for name, cls, cfg, dtype in cases(args):
        try:
            e, n = check(tool, name, cls, cfg, dtype, root, args, report)
        except Exception as ex:  # one model's failure must not hide the others'
            e, n = [f"{name}: {type(ex).__name__}: {ex}"], []
        errors += e
        notes += n
    for n in notes:
        print("NOTE", n)
    for e in errors:
        print("MISMATCH", e)
    print("all models agree" if not errors else f"{len(errors)} mismatches")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"transformers": transformers.__version__, "torch": torch.__version__, "results": report,
                       "notes": notes, "errors": errors}, f, indent=1)
    if not args.keep and not args.out:
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
