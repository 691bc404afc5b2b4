#!/usr/bin/env bash
# Issue 11 item 1 on the GPU machine (carry .gpu-carry from scripts/gpu_carry.sh):
#   run(command="scripts/gpu_hf_exports.sh", carry=[".gpu-carry"])
# 1. (KILN_HF_TESTS=1, default) the GPU tests and the op table's CUDA rows (filter KILN_GTEST_FILTER);
# 2. current transformers exports (TorchScript and dynamo exporters) through `kiln build --device gpu --fp16`
#    and `kiln run`, compared with PyTorch FP32 (scripts/export_hf.py; models KILN_HF_MODELS, "none" to skip;
#    KILN_HF_ARGS="--bench 32" also times Kiln beside PyTorch eager / CUDA graph / torch.compile).
# Results under $OUT: gpu_tests.txt, hf_exports.txt, hf_exports.json.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. scripts/gpu_env.sh  # C, PY, LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
if [ "${KILN_HF_TESTS:-1}" = 1 ]; then
  stamp "== GPU tests"
  $C/kiln_tests --gtest_filter="${KILN_GTEST_FILTER:-OpTable/OpTableCuda.*:Gpu*:*Gpu*:CudaPlan*}" > "$OUT/gpu_tests.txt" 2>&1
  echo "rc=$?" >> "$OUT/gpu_tests.txt"
  grep -E "^\[  (PASSED|FAILED) |^\[==========\]|^rc=" "$OUT/gpu_tests.txt" | head -10
  grep -E "^\[  FAILED  \]" "$OUT/gpu_tests.txt" | head -30
fi
if [ "${KILN_HF_MODELS:-}" = none ]; then stamp "done"; exit 0; fi
stamp "== transformers exports"
"$PY" -c "import onnxscript; print('onnxscript', onnxscript.__version__)" 2>&1 | tail -1
"$PY" scripts/export_hf.py "$C/kiln" --out /tmp/hf --json "$OUT/hf_exports.json" \
  --models "${KILN_HF_MODELS:-bert,roberta,gpt2,llama,qwen2,t5,vit}" ${KILN_HF_ARGS:-} > "$OUT/hf_exports.txt" 2>&1
echo "rc=$?" >> "$OUT/hf_exports.txt"
grep -E "^\[|rc=" "$OUT/hf_exports.txt" | cut -c1-400
stamp "done"
