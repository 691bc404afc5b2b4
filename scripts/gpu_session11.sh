#!/usr/bin/env bash
# Session 11's GPU checks in one call (carry .gpu-carry from scripts/gpu_carry.sh plus the micro
# benchmarks built here: .gpu-carry/conv8_bench, .gpu-carry/fa_new, .gpu-carry/fa_old, .gpu-carry/bw_bench):
#   run(command="KILN_STEPS='tests micro resnet hf' scripts/gpu_session11.sh", carry=[".gpu-carry"])
# Steps (KILN_STEPS):
#   tests   kiln_tests on the filter KILN_TEST_FILTER (default: the 8-bit conv, QuantConv and attention
#           tests and the op table's CUDA rows) -> $OUT/gpu_tests.txt
#   micro   the micro benchmarks that were carried (conv8 at batch 256 and 1; flash attention new
#           vs old; bandwidth) -> $OUT/micro_*.jsonl
#   resnet  scripts/gpu_quant.sh's ResNet step (KILN_QUANT_* as there; default ResNet-50, batch 256
#           and 1, FP16 / INT8 QuantConv / FP8 QuantConv)
#   bert    BERT-base batch 32 x 128, FP16 vs 8-bit plans: scripts/gpu_session12.sh's bert step
#           -> $OUT/bert_quant.jsonl
#   hf      transformers exports, per-layer profiles and the batch-32 bench vs torch.compile
#           (gpu_session9.sh's step)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. scripts/gpu_env.sh
STEPS=${KILN_STEPS:-tests micro resnet hf}
if has tests; then
  stamp "== GPU tests"
  F=${KILN_TEST_FILTER:-'GpuConv8*:GpuQuantConv*:OpTable/OpTableCuda.*Quant*:OpTable/OpTableCuda.*Attention*:OpTable/OpTableCuda.*TransformerBlock*:OpTable/OpTableCuda.*DecoderBlock*:GpuTransformer*:GpuFlashAttention*:FlashAttentionFragments*:*HfExports*:TransformerPasses*:GpuAttention*:GpuModel*'}
  $C/kiln_tests --gtest_filter="$F" > "$OUT/gpu_tests.txt" 2>&1
  echo "rc=$?" >> "$OUT/gpu_tests.txt"
  grep -E "^\[  (PASSED|FAILED) |^\[  SKIPPED \] [0-9]|tests ran|rc=" "$OUT/gpu_tests.txt" | head -30
  grep -E "Failure|error:" -A 3 "$OUT/gpu_tests.txt" | head -40
fi
if has micro; then
  for b in 256 1; do
    if [ -x $C/conv8_bench ]; then stamp "== conv8 batch $b"; $C/conv8_bench $b > "$OUT/micro_conv8_b$b.jsonl" 2>&1; grep -E "resnet50|error" "$OUT/micro_conv8_b$b.jsonl"; fi
  done
  [ -x $C/conv8_bench ] && grep -E '"s(1_3x3|3_1x1_256_1024|4_3x3_512")' "$OUT/micro_conv8_b256.jsonl" | head -12
  if [ -x $C/fa_new ]; then
    stamp "== flash attention old vs new"
    [ -x $C/fa_old ] && $C/fa_old old > "$OUT/micro_flash_old.jsonl" 2>&1; echo "old rc=$?"
    $C/fa_new > "$OUT/micro_flash_new.jsonl" 2>&1; echo "new rc=$?"
    for f in "$OUT"/micro_flash_*.jsonl; do echo "-- $f"; cut -c1-220 "$f" | head -30; done
  fi
  if [ -x $C/bw_bench ]; then stamp "== bandwidth"; $C/bw_bench > "$OUT/micro_bw.jsonl" 2>&1; cut -c1-200 "$OUT/micro_bw.jsonl" | head -40; fi
fi
if has resnet; then
  KILN_QUANT_STEPS=resnet KILN_QUANT_RESNETS=${KILN_QUANT_RESNETS:-resnet50} KILN_QUANT_BATCHES=${KILN_QUANT_BATCHES:-256 1} \
    KILN_QUANT_CONFIGS=${KILN_QUANT_CONFIGS:-fp16 int8qc fp8qc} OUT=$OUT scripts/gpu_quant.sh
fi
if has bert; then  # session 12's step: the same configs plus FP8 with per-tensor weight scales
  KILN_STEPS=bert OUT=$OUT T0=$T0 scripts/gpu_session12.sh
fi
if has hf; then KILN_STEPS=hf OUT=$OUT scripts/gpu_session9.sh; fi
stamp "done"
