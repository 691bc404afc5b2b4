#!/usr/bin/env bash
# Dynamic batch on the GPU machine: one ResNet-101 FP16 plan with a 1..256 batch profile (opt 64)
# benchmarked at batch 1, 8, 64 and 256 (`kiln bench --shapes ... --cuda-graph`, GPU compute
# median) beside plans built for each fixed batch, in one run. Shapes other than opt are lowered
# on first use with each layer's first candidate tactic (not tuned).
#   OUT=$OUT scripts/gpu_dynamic_batch.sh           (carry .gpu-carry; models/resnet101.onnx is exported if missing)
set -uo pipefail
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. "$(dirname "$0")/gpu_env.sh"  # C, PY, LD_LIBRARY_PATH
mkdir -p models /tmp/dyn
[ -f models/resnet101.onnx ] || $PY scripts/export_models.py --model resnet101 -o models/resnet101.onnx \
    --photos-npz $C/calib_photos.npz 2>&1 | tail -n 1
$C/kiln build models/resnet101.onnx -o /tmp/dyn/dyn.plan --device gpu --fp16 --min-shapes input:1x3x224x224 \
  --opt-shapes input:64x3x224x224 --max-shapes input:256x3x224x224 > /tmp/dyn/dyn_build.txt 2>&1 || tail -n 5 /tmp/dyn/dyn_build.txt
for b in 1 8 64 256; do
  $C/kiln build models/resnet101.onnx -o /tmp/dyn/fixed$b.plan --device gpu --fp16 --shapes input:${b}x3x224x224 \
    > /tmp/dyn/fixed_build$b.txt 2>&1 || tail -n 5 /tmp/dyn/fixed_build$b.txt
  for kind in fixed dyn; do
    plan=/tmp/dyn/$kind.plan; [ $kind = fixed ] && plan=/tmp/dyn/fixed$b.plan
    $C/kiln bench $plan --shapes input:${b}x3x224x224 --cuda-graph --iterations 200 --json /tmp/dyn/$kind$b.json \
      > /tmp/dyn/$kind$b.txt 2>&1 || { echo "bench failed: $kind $b"; tail -n 3 /tmp/dyn/$kind$b.txt; }
  done
done
$PY - <<'PYEOF' | tee "$OUT/dynamic_batch.txt"
import json, os
rows = []
for b in (1, 8, 64, 256):
    r = {"batch": b}
    for kind in ("fixed", "dyn"):
        p = f"/tmp/dyn/{kind}{b}.json"
        if os.path.exists(p):
            j = json.load(open(p))
            r[kind + "_ms"] = round(j["gpu_compute_ms"]["median"], 4)
    if "fixed_ms" in r and "dyn_ms" in r:
        r["dyn_speed_vs_fixed"] = round(r["fixed_ms"] / r["dyn_ms"], 3)
    rows.append(r)
    print(json.dumps(r))
PYEOF
