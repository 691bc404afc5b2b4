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
#   bert    BERT-base (scripts/export_models.py) batch 32 x 128: FP16 vs INT8 vs FP8 plans (random-token
#           calibration), kiln bench --cuda-graph and the last hidden state's cosine vs FP16
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
if has bert; then
  stamp "== BERT-base INT8 / FP8 vs FP16"
  mkdir -p models /tmp/qb
  [ -f models/bert_base.onnx ] || $PY scripts/export_models.py --model bert_base -o models/bert_base.onnx 2>&1 | tail -n 1
  $PY -c "
import numpy as np; r = np.random.default_rng(0)
np.savez('/tmp/qb/calib.npz', input_ids=r.integers(0, 30522, (32, 128)).astype(np.int64), attention_mask=np.ones((32, 128), np.int64))
np.save('/tmp/qb/ids.npy', r.integers(0, 30522, (32, 128)).astype(np.int64)); np.save('/tmp/qb/mask.npy', np.ones((32, 128), np.int64))"
  : > "$OUT/bert_quant.jsonl"
  for cfg in "fp16:--fp16" "int8:--fp16 --int8 --calib /tmp/qb/calib.npz" "fp8:--fp16 --fp8 --calib /tmp/qb/calib.npz"; do
    tag=bert_${cfg%%:*}; flags=${cfg#*:}
    if ! $C/kiln build models/bert_base.onnx -o /tmp/qb/$tag.plan --device gpu $flags --shapes input_ids:32x128,attention_mask:32x128 \
        > /tmp/qb/$tag.build.txt 2>&1; then echo "$tag build failed"; tail -n 5 /tmp/qb/$tag.build.txt; continue; fi
    grep -E "quantization:" /tmp/qb/$tag.build.txt | sed "s/^/$tag /"
    $C/kiln inspect /tmp/qb/$tag.plan 2>/dev/null | grep -oE "quant_linear [a-z0-9]+ [a-z.]+( fused-scale)? " | sort | uniq -c
    $C/kiln bench /tmp/qb/$tag.plan --cuda-graph --iterations 200 --json /tmp/qb/$tag.json --dump-profile /tmp/qb/prof_$tag.json > /dev/null 2>&1
    $C/kiln run /tmp/qb/$tag.plan --input input_ids=/tmp/qb/ids.npy --input attention_mask=/tmp/qb/mask.npy --output-dir /tmp/qb/out_$tag > /dev/null 2>&1
    $PY - "$tag" /tmp/qb/$tag.json <<'PYEOF' | tee -a "$OUT/bert_quant.jsonl"
import glob, json, sys, numpy as np
tag, jp = sys.argv[1:3]
ms = json.load(open(jp))["gpu_compute_ms"]["median"]
d = {"config": tag, "batch": 32, "seq": 128, "gpu_median_ms": ms}
ref, got = glob.glob("/tmp/qb/out_bert_fp16/*.npy"), glob.glob(f"/tmp/qb/out_{tag}/*.npy")
if ref and got:
    y, r = np.load(sorted(got)[0]).astype(np.float64), np.load(sorted(ref)[0]).astype(np.float64)
    d["cosine_vs_fp16"] = round(float((y * r).sum() / np.linalg.norm(y) / np.linalg.norm(r)), 6)
print(json.dumps(d))
PYEOF
  done
  cp /tmp/qb/prof_*.json "$OUT/" 2>/dev/null
fi
if has hf; then KILN_STEPS=hf OUT=$OUT scripts/gpu_session9.sh; fi
stamp "done"
