#!/usr/bin/env bash
# Issue 10 on the GPU machine (carry .gpu-carry from scripts/gpu_carry.sh, with KILN_BASE_BIN for ab):
#   scripts/gpu_issue10.sh tests     GPU tests (kiln_tests Gpu*), then the dynamic-batch run
#                                    (scripts/gpu_dynamic_batch.sh: one 1..256 engine vs fixed plans,
#                                    shape switching with scripts/dyn_switch.py)
#   scripts/gpu_issue10.sh verify    GPU tests + op table CUDA rows, conformance CPU vs GPU, dynamic shapes
#   scripts/gpu_issue10.sh all       verify, then the A/B (KILN_AB_MODELS, KILN_AB_ITERS as gpu_product_ab.sh)
#   scripts/gpu_issue10.sh ab        product-path A/B against the previous main (scripts/gpu_product_ab.sh):
#                                    speed, plan bytes, load time and phases
# Results under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. "$(dirname "$0")/gpu_env.sh"  # C, PY, LD_LIBRARY_PATH
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
case "${1:-tests}" in
  tests)
    stamp "== GPU tests"
    $C/kiln_tests --gtest_filter="${KILN_GTEST_FILTER:-Gpu*:*Gpu*}" > "$OUT/gpu_tests.txt" 2>&1
    echo "rc=$?" >> "$OUT/gpu_tests.txt"
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|^rc=|Failure|plan .* bytes with packed" "$OUT/gpu_tests.txt" | head -40
    stamp "== dynamic batch"
    OUT=$OUT scripts/gpu_dynamic_batch.sh
    ;;
  verify)
    stamp "== GPU tests and the op table's CUDA rows"
    $C/kiln_tests --gtest_filter="${KILN_GTEST_FILTER:-Gpu*:*Gpu*:OpTable/OpTableCuda.*:CudaPlan*}" > "$OUT/gpu_tests.txt" 2>&1
    echo "rc=$?" >> "$OUT/gpu_tests.txt"
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|^rc=|max abs error" "$OUT/gpu_tests.txt" | head -40
    stamp "== conformance, CPU and GPU"
    OUT=$OUT scripts/gpu_conformance.sh
    stamp "== dynamic shapes (${KILN_DYN_R101:-1} = R101 too)"
    OUT=$OUT scripts/gpu_dynamic_batch.sh
    ;;
  all)
    "$0" verify
    stamp "== product-path A/B"
    OUT=$OUT scripts/gpu_product_ab.sh
    ;;
  ab)
    stamp "== product-path A/B"
    OUT=$OUT scripts/gpu_product_ab.sh
    stamp "== plan load, three times in one process (R101 FP16 batch 64, this tree)"
    [ -f /tmp/ab/r101_fp16_b64.new.plan ] && PYTHONPATH=$PWD/$C/python $PY scripts/load_twice.py /tmp/ab/r101_fp16_b64.new.plan 2>&1 | tee "$OUT/load_twice.txt"
    ;;
esac
stamp "done"
