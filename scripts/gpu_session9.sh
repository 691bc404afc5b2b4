#!/usr/bin/env bash
# Session 9's GPU checks in one call (carry .gpu-carry from scripts/gpu_carry.sh, plus
# .gpu-carry/onnxdata.tar.xz = Debian's ONNX backend test data for the `conf` step):
#   run(command="KILN_STEPS='tests conf' scripts/gpu_session9.sh", carry=[".gpu-carry"])
# Steps (KILN_STEPS, default all):
#   tests  the GPU tests and the op table's CUDA rows -> $OUT/gpu_tests.txt
#   conf   scripts/gpu_conformance.sh on node / pytorch-converted / pytorch-operator / simple
#          -> $OUT/conf_<set>/conformance_summary.txt
#   hf     scripts/gpu_hf_profiles.sh + scripts/export_hf.py --bench 32 (gpt2, bert, vit)
#   llm    scripts/gpu_profile_session8.sh (Llama-1B-shaped decode profile, bench-llm)
#   greedy scripts/gpu_llm_vs_hf.sh (greedy agreement with transformers, gpt2 + llama1b)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. scripts/gpu_env.sh
STEPS=${KILN_STEPS:-tests conf hf llm greedy}
if has tests; then
  stamp "== tests"
  $C/kiln_tests --gtest_filter="${KILN_GTEST_FILTER:-OpTable/OpTableCuda.*:Gpu*:*Gpu*:*PagedAttention*:CudaPlan*:FlashAttentionFragments*:*Rope*:*RmsNorm*:AssignLayouts*}" \
    > "$OUT/gpu_tests.txt" 2>&1
  echo "rc=$?" >> "$OUT/gpu_tests.txt"
  grep -E "^\[  (PASSED|FAILED) |^\[==========\]|^rc=|SKIPPED \] [0-9]" "$OUT/gpu_tests.txt" | head -6
  grep -E "^\[  FAILED  \]" "$OUT/gpu_tests.txt" | head -30
fi
if has conf; then
  stamp "== conformance"
  D=/tmp/onnxdata; mkdir -p $D
  [ -f .gpu-carry/onnxdata.tar ] && tar -C $D -xf .gpu-carry/onnxdata.tar
  for s in node pytorch-converted pytorch-operator simple; do
    [ -d $D/data/$s ] || continue
    echo "-- $s"
    mkdir -p "$OUT/conf_$s"
    OUT="$OUT/conf_$s" KILN_CONFORMANCE_JOBS=16 timeout 200 scripts/gpu_conformance.sh $D/data/$s 2>&1 | head -12
  done
fi
if has hf; then
  stamp "== transformers exports: profiles and bench"
  KILN_PROFILE_MODELS=${KILN_HF_PROFILE_MODELS:-gpt2,bert,vit} scripts/gpu_hf_profiles.sh > "$OUT/hf_profiles.txt" 2>&1
  grep -E "summed" "$OUT/hf_profiles.txt"
  "$PY" scripts/export_hf.py "$C/kiln" --out /tmp/hf2 --json "$OUT/hf_bench.json" --models gpt2,bert,vit --exporters torchscript \
    --bench 32 --bench-models gpt2,bert,vit > "$OUT/hf_bench.txt" 2>&1
  grep "^\[" "$OUT/hf_bench.txt" | cut -c1-400
fi
if has llm; then
  stamp "== LLM decode profile"
  scripts/gpu_profile_session8.sh > "$OUT/llm_profile.txt" 2>&1
  grep -v "^    " "$OUT/llm_profile.txt" | tail -30
fi
if has greedy; then
  stamp "== LLM greedy vs transformers"
  KILN_LLM_MODELS=${KILN_LLM_MODELS:-gpt2,llama1b} scripts/gpu_llm_vs_hf.sh > "$OUT/llm_greedy.txt" 2>&1
  tail -20 "$OUT/llm_greedy.txt"
fi
stamp "done"
