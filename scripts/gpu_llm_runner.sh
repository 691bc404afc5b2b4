#!/usr/bin/env bash
# On the GPU machine (after scripts/gpu_carry.sh here, which carries kiln, kiln_tests and
# kiln_llm_generate side by side):
#   run(command="scripts/gpu_llm_runner.sh", carry=[".gpu-carry"])
# The LLM runner on CUDA plans (docs/decisions/0060):
#   1. the GPU tests of LlmRunner and PagedAttention, and the CPU runner/CLI tests;
#   2. checkpoints saved by transformers (scripts/llm_reference_hf.py --keep: tiny GPT-2, Llama 3.1,
#      tied Llama BF16, Mistral, Qwen2 F16, and GPT-2 124M) built by `kiln build-llm --device gpu`
#      in fp32 and fp16; `kiln generate` greedy tokens vs kiln_llm_generate's CPU reference on the
#      checkpoint (where they first differ, if they do);
#   3. `kiln bench-llm` of the GPT-2 124M fp16 engine at batch 1, 8, 64 (128 in / 128 out), with
#      and without CUDA graphs, as JSON under $OUT;
#   4. FP8 projections (`--quant fp8`, decision 0059 addendum): each checkpoint built fp16 with
#      --quant fp8 --calib-ids (256 ids; checkpoints whose projections are not multiples of 16 are
#      refused, and say so), greedy tokens vs the CPU reference (float), and bench-llm of the
#      GPT-2 124M fp8 engine as JSON under $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
. "$(dirname "$0")/gpu_env.sh"  # C, PY, LD_LIBRARY_PATH
O=${OUT:-.}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

"$C/kiln_tests" --gtest_filter='GpuLlmRunner*:GpuSampling*:LlmSampling*:GpuLlmStep*:*PagedAttention*:*Rope*:LlmRunner*:LlmCli*:LlmStepGraphFp8*:KvBlock*:KvPool*' 2>&1 | tail -40

"$PY" scripts/llm_reference_hf.py "$C/kiln_llm_generate" --out "$W/ckpt" --keep --gpt2-124m \
  --json "$O/llm_reference_hf.json" --new-tokens 32 | tail -12

PROMPT=5,17,42,7,99,3,11,64
for d in "$W"/ckpt/*/; do
  name=$(basename "$d")
  ref=$("$C/kiln_llm_generate" "$d" --prompt-ids "$PROMPT" --max-new-tokens 32 --ignore-eos --json 2>/dev/null)
  L=$("$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); print(min(256, c.get("n_positions") or c.get("max_position_embeddings") or 256))' "$d/config.json")
  for dtype in fp32 fp16; do
    e="$W/engine_${name}_$dtype"
    "$C/kiln" build-llm "$d" -o "$e" --device gpu --dtype "$dtype" --max-batch 64 --max-seq-len "$L" --max-num-tokens 512 \
      --timing-cache "$W/timing.json" | tail -1
    got=$("$C/kiln" generate "$e" --prompt-ids "$PROMPT" --max-new-tokens 32 --ignore-eos --json)
    "$PY" - "$name" "$dtype" "$ref" "$got" <<'PYEOF'
import json, sys
name, dtype, ref, got = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])["tokens"], json.loads(sys.argv[4])
toks = got["tokens"]
first = next((i for i, (a, b) in enumerate(zip(ref, toks)) if a != b), None)
state = "identical" if first is None and len(ref) == len(toks) else f"first differ at token {first}"
print(f"{name:20s} {dtype}: {len(toks)} tokens {state} vs the CPU reference; TTFT {got['ttft_ms']:.2f} ms, "
      f"decode {got['decode_tokens_per_s']:.0f} tokens/s")
PYEOF
  done
done

CALIB=$("$PY" -c 'print(",".join(str((i * 7919 + 13) % 1000) for i in range(256)))')
for d in "$W"/ckpt/*/; do
  name=$(basename "$d")
  ref=$("$C/kiln_llm_generate" "$d" --prompt-ids "$PROMPT" --max-new-tokens 32 --ignore-eos --json 2>/dev/null)
  L=$("$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); print(min(256, c.get("n_positions") or c.get("max_position_embeddings") or 256))' "$d/config.json")
  V=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$d/config.json")
  ids=$("$PY" -c 'import sys; print(",".join(str(int(i) % int(sys.argv[2])) for i in sys.argv[1].split(",")))' "$CALIB" "$V")
  e="$W/engine_${name}_fp8"
  if ! "$C/kiln" build-llm "$d" -o "$e" --device gpu --dtype fp16 --quant fp8 --calib-ids "$ids" --max-batch 64 \
      --max-seq-len "$L" --max-num-tokens 512 --timing-cache "$W/timing.json" 2>&1 | tail -2; then
    echo "$name fp8: build refused (above)"; continue
  fi
  [ -f "$e/model.plan" ] || { echo "$name fp8: no engine"; continue; }
  got=$("$C/kiln" generate "$e" --prompt-ids "$PROMPT" --max-new-tokens 32 --ignore-eos --json)
  "$PY" - "$name" "fp16+fp8" "$ref" "$got" <<'PYEOF'
import json, sys
name, dtype, ref, got = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])["tokens"], json.loads(sys.argv[4])
toks = got["tokens"]
first = next((i for i, (a, b) in enumerate(zip(ref, toks)) if a != b), None)
state = "identical" if first is None and len(ref) == len(toks) else f"first differ at token {first}"
print(f"{name:20s} {dtype}: {len(toks)} tokens {state} vs the CPU reference (float); TTFT {got['ttft_ms']:.2f} ms, "
      f"decode {got['decode_tokens_per_s']:.0f} tokens/s")
PYEOF
done
[ -f "$W/engine_gpt2_124m_fp8/model.plan" ] && "$C/kiln" bench-llm "$W/engine_gpt2_124m_fp8" --batch 1,8,64 --input-len 128 \
  --output-len 128 --json "$O/bench_llm_gpt2_124m_fp8.json"

e="$W/engine_gpt2_124m_fp16"
"$C/kiln" bench-llm "$e" --batch 1,8,64 --input-len 128 --output-len 128 --json "$O/bench_llm_gpt2_124m_fp16.json"
"$C/kiln" bench-llm "$e" --batch 1,8,64 --input-len 128 --output-len 128 --cuda-graph \
  --json "$O/bench_llm_gpt2_124m_fp16_cuda_graph.json"
