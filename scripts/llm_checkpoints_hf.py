#!/usr/bin/env python3
"""src/llm's checkpoint reader against transformers' own save_pretrained output (issue 13).

Needs torch and transformers (the GPU machine's venv has both; no GPU is used):

    python3 scripts/llm_checkpoints_hf.py KILN_LLM_INSPECT [OUT_DIR]

For GPT-2, Llama (3.1-style llama3 RoPE scaling, tied and untied), Mistral and Qwen2 it builds a
tiny random-initialized model (seeded), saves it with save_pretrained (safetensors; one model in
shards with model.safetensors.index.json), runs `kiln_llm_inspect DIR --json --sums` and checks
that Kiln sees the architecture and sizes transformers wrote and every tensor of the state dict
(a tied lm_head is not stored) with the same dtype, shape, sum and sum of |x| as the in-memory
parameters. Then it damages the files — a shard removed, a shard truncated — and checks that Kiln
refuses them naming the file. Exit status 0 when everything agrees.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
import transformers
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, MistralConfig,
                          MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM)

DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def models():
    yield "gpt2", GPT2LMHeadModel(GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=64, vocab_size=300)), torch.float32, None
    llama31 = LlamaConfig(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=8,
                          num_key_value_heads=2, vocab_size=320, max_position_embeddings=256, rope_theta=500000.0,
                          rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                        "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
                          bos_token_id=1, eos_token_id=[2, 3], tie_word_embeddings=False)
    yield "llama31", LlamaForCausalLM(llama31), torch.bfloat16, "40KB"  # sharded
    llama32 = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=32, vocab_size=256, tie_word_embeddings=True)
    yield "llama32_tied", LlamaForCausalLM(llama32), torch.float16, None
    yield "mistral", MistralForCausalLM(MistralConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                                      num_attention_heads=4, num_key_value_heads=1, vocab_size=200,
                                                      sliding_window=32)), torch.bfloat16, None
    yield "qwen2", Qwen2ForCausalLM(Qwen2Config(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                                num_attention_heads=4, num_key_value_heads=2, vocab_size=250,
                                                tie_word_embeddings=True)), torch.bfloat16, "30KB"


def inspect(tool, d):
    r = subprocess.run([tool, d, "--json", "--sums"], capture_output=True, text=True)
    return r.returncode, (json.loads(r.stdout) if r.returncode == 0 else r.stderr.strip())


def check(tool, name, model, dtype, shard, root):
    d = os.path.join(root, name)
    model = model.to(dtype)
    kwargs = {"safe_serialization": True}
    if shard:
        kwargs["max_shard_size"] = shard
    model.save_pretrained(d, **kwargs)
    rc, out = inspect(tool, d)
    if rc != 0:
        return [f"{name}: Kiln refused transformers' checkpoint: {out}"]
    errors = []
    cfg = model.config
    want_layers = getattr(cfg, "num_hidden_layers", getattr(cfg, "n_layer", None))
    if out["config"]["num_layers"] != want_layers:
        errors.append(f"{name}: {out['config']['num_layers']} layers, transformers says {want_layers}")
    kiln = {t["name"]: t for t in out["tensors"]}
    sd = model.state_dict()
    tied = bool(getattr(cfg, "tie_word_embeddings", False))
    for key, v in sd.items():
        if key not in kiln:
            if tied and key == "lm_head.weight":
                continue
            errors.append(f"{name}: {key} missing in Kiln's view")
            continue
        k = kiln[key]
        if k["dtype"] != DTYPES[v.dtype] or k["shape"] != list(v.shape):
            errors.append(f"{name}: {key} {k['dtype']}{k['shape']} vs {DTYPES[v.dtype]}{list(v.shape)}")
        s, a = v.double().sum().item(), v.double().abs().sum().item()
        if abs(k["sum"] - s) > 1e-9 * max(1.0, a) or abs(k["abs_sum"] - a) > 1e-9 * max(1.0, a):
            errors.append(f"{name}: {key} sums {k['sum']}/{k['abs_sum']} vs {s}/{a}")
    files = out["files"]
    print(f"{name}: {out['architecture']}, {len(kiln)} tensors in {len(files)} file(s), "
          f"{'sharded, ' if len(files) > 1 else ''}{len(errors)} mismatches")
    if len(files) > 1:  # damage: a shard missing, then a shard truncated
        damage = []
        victim = files[-1]
        backup = victim + ".bak"
        shutil.move(victim, backup)
        rc, msg = inspect(tool, d)
        if rc == 0 or os.path.basename(victim) not in msg:
            damage.append(f"{name}: missing shard not reported by name: {msg}")
        shutil.copy(backup, victim)
        with open(victim, "r+b") as f:
            f.truncate(os.path.getsize(victim) - 7)
        rc, msg = inspect(tool, d)
        if rc == 0 or victim not in msg:
            damage.append(f"{name}: truncated shard not reported by name: {msg}")
        print(f"  missing / truncated shard: {'refused, naming the file' if not damage else 'NOT refused'}")
        errors += damage
        shutil.move(backup, victim)
    return errors


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    tool = os.path.abspath(sys.argv[1])
    root = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="kiln_hf_ckpt_")
    os.makedirs(root, exist_ok=True)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, checkpoints in {root}")
    torch.manual_seed(0)
    errors = []
    for name, model, dtype, shard in models():
        errors += check(tool, name, model, dtype, shard, root)
    for e in errors:
        print("MISMATCH", e)
    print("all checkpoints agree" if not errors else f"{len(errors)} mismatches")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
