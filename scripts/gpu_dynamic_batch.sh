#!/usr/bin/env bash
# Dynamic batch on the GPU machine: one ResNet-101 FP16 plan with a 1..256 batch profile (opt 64)
# benchmarked at batch 1, 8, 64 and 256 (`kiln bench --shapes ... --cuda-graph`, GPU compute
# median) beside plans built for each fixed batch, in one run. The dynamic plan's tactics are tuned
# at opt and up to --tuning-shapes more batches (min, max, powers of two); other shapes run the
# nearest set's tactics. Then scripts/dyn_switch.py switches one engine between the batches
# (first-call set-up time per visit, median GPU time) to show a switch costs no new lowering.
#   OUT=$OUT scripts/gpu_dynamic_batch.sh           (carry .gpu-carry; models/resnet101.onnx is exported if missing)
set -uo pipefail
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. "$(dirname "$0")/gpu_env.sh"  # C, PY, LD_LIBRARY_PATH
# summarize PREFIX KEY VALUES...: one JSON line per value from /tmp/dyn/PREFIX{fixed,dyn}VALUE.json
# (GPU compute medians, the dynamic engine's first-use set-up ms, and dynamic/fixed speed).
summarize() {
  $PY - "$@" <<'PYEOF'
import json, os, sys
prefix, key = sys.argv[1], sys.argv[2]
for v in sys.argv[3:]:
    r = {key: int(v)}
    for kind in ("fixed", "dyn"):
        p = f"/tmp/dyn/{prefix}{kind}{v}.json"
        if os.path.exists(p):
            j = json.load(open(p))
            r[kind + "_ms"] = round(j["gpu_compute_ms"]["median"], 4)
            if kind == "dyn":
                r["dyn_shape_setup_ms"] = [x["ms"] for x in j.get("shape_setup_ms", [])]
    if "fixed_ms" in r and "dyn_ms" in r:
        r["dyn_speed_vs_fixed"] = round(r["fixed_ms"] / r["dyn_ms"], 3)
    print(json.dumps(r))
PYEOF
}
mkdir -p models /tmp/dyn
[ -f models/resnet101.onnx ] || $PY scripts/export_models.py --model resnet101 -o models/resnet101.onnx \
    --photos-npz $C/calib_photos.npz 2>&1 | tail -n 1
if [ "${KILN_DYN_R101:-1}" = 1 ]; then
T0=$(date +%s)
$C/kiln build models/resnet101.onnx -o /tmp/dyn/dyn.plan --device gpu --fp16 --min-shapes input:1x3x224x224 \
  --opt-shapes input:64x3x224x224 --max-shapes input:256x3x224x224 > /tmp/dyn/dyn_build.txt 2>&1 || tail -n 5 /tmp/dyn/dyn_build.txt
echo "{\"dyn_build_s\": $(( $(date +%s) - T0 )), \"dyn_plan_bytes\": $(stat -c %s /tmp/dyn/dyn.plan 2>/dev/null || echo 0)}" | tee "$OUT/dynamic_build.txt"
$C/kiln inspect /tmp/dyn/dyn.plan | grep -E "Tactics tuned at|Load time" | tee -a "$OUT/dynamic_build.txt"
for b in 1 8 64 256; do
  $C/kiln build models/resnet101.onnx -o /tmp/dyn/fixed$b.plan --device gpu --fp16 --shapes input:${b}x3x224x224 \
    > /tmp/dyn/fixed_build$b.txt 2>&1 || tail -n 5 /tmp/dyn/fixed_build$b.txt
  for kind in fixed dyn; do
    plan=/tmp/dyn/$kind.plan; [ $kind = fixed ] && plan=/tmp/dyn/fixed$b.plan
    $C/kiln bench $plan --shapes input:${b}x3x224x224 --cuda-graph --iterations 200 --json /tmp/dyn/$kind$b.json \
      > /tmp/dyn/$kind$b.txt 2>&1 || { echo "bench failed: $kind $b"; tail -n 3 /tmp/dyn/$kind$b.txt; }
  done
done
summarize "" batch 1 8 64 256 | tee "$OUT/dynamic_batch.txt"
fi
# BERT-base with a sequence profile 16..512 (batch 2), against plans built for each fixed length.
if [ "${KILN_DYN_BERT:-1}" = 1 ]; then
  [ -f models/bert_base.onnx ] || $PY scripts/export_models.py --model bert_base -o models/bert_base.onnx 2>&1 | tail -n 1
  T0=$(date +%s)
  $C/kiln build models/bert_base.onnx -o /tmp/dyn/bert_dyn.plan --device gpu --fp16 \
    --min-shapes input_ids:2x16,attention_mask:2x16 --opt-shapes input_ids:2x128,attention_mask:2x128 \
    --max-shapes input_ids:2x512,attention_mask:2x512 > /tmp/dyn/bert_dyn_build.txt 2>&1 || tail -n 5 /tmp/dyn/bert_dyn_build.txt
  echo "{\"bert_dyn_build_s\": $(( $(date +%s) - T0 ))}" | tee -a "$OUT/dynamic_build.txt"
  for s in 16 128 384 512; do
    shp=input_ids:2x$s,attention_mask:2x$s
    $C/kiln build models/bert_base.onnx -o /tmp/dyn/bert_fixed$s.plan --device gpu --fp16 --shapes $shp \
      > /tmp/dyn/bert_fixed_build$s.txt 2>&1 || tail -n 5 /tmp/dyn/bert_fixed_build$s.txt
    for kind in fixed dyn; do
      plan=/tmp/dyn/bert_$kind.plan; [ $kind = fixed ] && plan=/tmp/dyn/bert_fixed$s.plan
      $C/kiln bench $plan --shapes $shp --cuda-graph --iterations 200 --json /tmp/dyn/bert_$kind$s.json \
        > /tmp/dyn/bert_$kind$s.txt 2>&1 || { echo "bench failed: bert $kind $s"; tail -n 3 /tmp/dyn/bert_$kind$s.txt; }
    done
  done
  summarize bert_ bert_seq 16 128 384 512 | tee -a "$OUT/dynamic_batch.txt"
fi
[ "${KILN_DYN_R101:-1}" = 1 ] && PYTHONPATH=$PWD/$C/python $PY scripts/dyn_switch.py /tmp/dyn/dyn.plan --json "$OUT/dyn_switch.json" 2>&1 | tee "$OUT/dyn_switch.txt"
