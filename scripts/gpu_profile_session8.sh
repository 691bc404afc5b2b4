#!/usr/bin/env bash
# Per-layer profiles on the GPU machine (carry .gpu-carry): where a Llama-1B-shaped decode step (T = 1,
# batch row 0 of a max-batch-8 engine; the KV pool address is null, so PagedAttention writes and reads
# nothing: its own time is GpuPagedAttentionBench's) and the transformers GPT-2 export at 32 x 128
# spend their time. `kiln run --dump-profile` (medians, CUDA events per layer) -> $OUT/profile_*.json and
# a per-op summary; then `kiln bench-llm` of that engine at batch 1 and 8.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. scripts/gpu_env.sh
W=/tmp/prof; mkdir -p $W
"$PY" scripts/llm_hf_peer.py make $W --models llama1b > /dev/null 2>&1
"$C/kiln" build-llm $W/llama1b -o $W/e --device gpu --dtype fp16 --max-batch 8 --max-seq-len 512 --max-num-tokens 16 | tail -1
"$PY" - $W <<'PYEOF'
import json, sys, numpy as np
w = sys.argv[1]
info = json.load(open(f"{w}/e/kiln_llm.json"))
R, MB = info["max_batch"], info["max_blocks_per_seq"]
L = json.load(open(f"{w}/llama1b/config.json"))["num_hidden_layers"]
np.save(f"{w}/input_ids.npy", np.array([42], np.int64)); np.save(f"{w}/position_ids.npy", np.array([200], np.int64))
np.save(f"{w}/token_seq.npy", np.array([0], np.int32)); np.save(f"{w}/block_table.npy", np.zeros((R, MB), np.int32))
np.save(f"{w}/kv_pools.npy", np.zeros((L, 2), np.int64)); np.save(f"{w}/logit_rows.npy", np.zeros(R, np.int64))
PYEOF
IN=""; for n in input_ids position_ids token_seq block_table kv_pools logit_rows; do IN="$IN --input $n=$W/$n.npy"; done
"$C/kiln" run $W/e/model.plan $IN --cuda-graph --dump-profile $OUT/profile_llama1b_decode.json > $W/p1.txt 2>&1; tail -3 $W/p1.txt
"$PY" scripts/export_hf.py none --models gpt2 --exporters torchscript --export-only --out $W/hf > /dev/null 2>&1
"$C/kiln" build $W/hf/gpt2/gpt2.torchscript.onnx -o $W/g.plan --device gpu --fp16 --tuning-shapes 0 \
  --shapes input_ids:32x128,attention_mask:32x128 > /dev/null 2>&1
"$C/kiln" run $W/g.plan --cuda-graph --dump-profile $OUT/profile_hf_gpt2_b32.json > $W/p2.txt 2>&1; tail -3 $W/p2.txt
"$PY" scripts/profile_summary.py --top 6 $OUT/profile_llama1b_decode.json $OUT/profile_hf_gpt2_b32.json | tee $OUT/profile_summary.txt
# The decode speed of the same engine (max batch 8; 16 tokens per step, so TTFT here is a chunked prefill).
"$C/kiln" bench-llm $W/e --batch 1,8 --input-len 128 --output-len 128 --cuda-graph --json $OUT/bench_llama1b_b1_b8.json 2>&1 | tail -3
