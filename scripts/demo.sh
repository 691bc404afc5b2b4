#!/usr/bin/env bash
# Kiln end to end (the README's demo command): set up, build Kiln, export ResNet-101 to ONNX, compile
# it to a plan with a dynamic batch profile (1/1/8), classify a real photo, check the result against
# PyTorch (and ONNX Runtime), time it, then read rendered text with a real trained PaddleOCR model.
# Fails fast: any disagreement with the references exits non-zero.
#
#   scripts/demo.sh [--skip-setup] [--skip-build] [--skip-ocr]
# Environment: KILN_PYTHON (default /usr/bin/python3: Debian's torch), KILN_DEVICE (default auto:
# the GPU when there is one), KILN_BIN (default build/kiln).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

SKIP_SETUP=0 SKIP_BUILD=0 SKIP_OCR=0
for arg in "$@"; do
  case "$arg" in
    --skip-setup) SKIP_SETUP=1 ;;
    --skip-build) SKIP_BUILD=1 ;;
    --skip-ocr) SKIP_OCR=1 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

PY="${KILN_PYTHON:-/usr/bin/python3}"
DEVICE="${KILN_DEVICE:-auto}"
KILN="${KILN_BIN:-$ROOT/build/kiln}"
MODEL=models/resnet101.onnx
WORK=build/demo
SHAPE=3x224x224
STEPS=8
step_no=0
T_START=$SECONDS
T_STEP=$SECONDS

step() {
  step_no=$((step_no + 1))
  [ "$step_no" -gt 1 ] && echo "     (step took $((SECONDS - T_STEP)) s)"
  T_STEP=$SECONDS
  echo
  echo "==== [$step_no/$STEPS] $* ===="
}
trap 'rc=$?; [ $rc -ne 0 ] && echo && echo "==== demo FAILED in step $step_no (exit $rc) ===="' EXIT

step "Set-up: Debian packages and npm assets (OCR models, onnxruntime-node)"
if [ "$SKIP_SETUP" = 0 ]; then
  scripts/setup.sh
else
  echo "skipped (--skip-setup)"
fi
scripts/fetch_npm_assets.sh

step "Build Kiln (Release, CUDA=AUTO)"
if [ "$SKIP_BUILD" = 0 ]; then
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=true
  mkdir -p "$WORK"
  if ! cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WITH_CUDA="${KILN_WITH_CUDA:-AUTO}" \
      > "$WORK/cmake.log" 2>&1; then
    cat "$WORK/cmake.log"
    exit 1
  fi
  grep -E "kiln:|Build files" "$WORK/cmake.log"
  ninja -C build -j"$(nproc)" kiln_cli
else
  echo "skipped (--skip-build)"
fi
[ -x "$KILN" ] || { echo "no Kiln binary at $KILN"; exit 1; }
mkdir -p "$WORK" models

step "Export ResNet-101 (torchvision, random weights, calibrated BatchNorm) and prepare a photo"
"$PY" scripts/prepare_image.py --images chelsea -o "$WORK/photo.npy"
"$PY" scripts/export_models.py --model resnet101 -o "$MODEL" \
  --reference-input "$WORK/photo.npy" --reference-output "$WORK/photo_torch.npy"

step "kiln build: ONNX -> plan (batch profile min 1, opt 1, max 8; device $DEVICE)"
time_build=$SECONDS
"$KILN" build "$MODEL" -o "$WORK/resnet101.plan" \
  --min-shapes "input:1x$SHAPE" --opt-shapes "input:1x$SHAPE" --max-shapes "input:8x$SHAPE" \
  --device "$DEVICE"
echo "plan: $WORK/resnet101.plan ($(du -h "$WORK/resnet101.plan" | cut -f1)), built in $((SECONDS - time_build)) s"

step "kiln run: classify the photo"
rm -rf "$WORK/out"
"$KILN" run "$WORK/resnet101.plan" --input "input=$WORK/photo.npy" --output-dir "$WORK/out"

step "Verify: Kiln vs PyTorch (max |Δ| <= 1e-3 x max |y|, identical top-5), cross-check ONNX Runtime"
"$PY" scripts/verify_outputs.py "$WORK/out/logits.npy" "$WORK/photo_torch.npy" --label "kiln vs pytorch"
node scripts/ort_run.js "$MODEL" --input "input=$WORK/photo.npy" --output-dir "$WORK/ort"
"$PY" scripts/verify_outputs.py "$WORK/out/logits.npy" "$WORK/ort/logits.npy" --label "kiln vs onnxruntime" \
  --no-names | tail -n 1

step "kiln bench: latency at batch 1, with ONNX Runtime (CPU) measured alongside"
uptime
"$KILN" bench "$WORK/resnet101.plan" --iterations 20 --json "$WORK/bench.json"
node scripts/ort_run.js "$MODEL" --input "input=$WORK/photo.npy" --output-dir "$WORK/ort" --iterations 11 | tail -n 1

step "OCR with real trained weights (PaddleOCR PP-OCRv4 recognition) on Kiln"
if [ "$SKIP_OCR" = 0 ]; then
  "$PY" scripts/ocr_demo.py --kiln "$KILN" --device "$DEVICE" --work "$WORK/ocr"
else
  echo "skipped (--skip-ocr)"
fi

echo "     (step took $((SECONDS - T_STEP)) s)"
echo
echo "==== demo passed in $((SECONDS - T_START)) s ===="
