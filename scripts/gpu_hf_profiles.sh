#!/usr/bin/env bash
# Per-layer profiles of the transformers exports on the GPU machine (carry .gpu-carry):
#   run(command="KILN_PROFILE_MODELS=gpt2,bert scripts/gpu_hf_profiles.sh", carry=[".gpu-carry"])
# Each model (TorchScript exporter, scripts/export_hf.py --export-only) is built with
# `kiln build --device gpu --fp16` at batch KILN_PROFILE_BATCH (default 32) x 128 (ViT: 224 x 224) and
# run with `kiln run --cuda-graph --dump-profile` (CUDA-event medians per layer, layers timed one by
# one) -> $OUT/profile_hf_<model>_b<batch>.json, and a per-op summary with the slowest layers ->
# $OUT/profile_hf_summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. scripts/gpu_env.sh
W=/tmp/hfprof; mkdir -p $W
B=${KILN_PROFILE_BATCH:-32}
for m in $(echo "${KILN_PROFILE_MODELS:-gpt2,bert,vit}" | tr , ' '); do
  "$PY" scripts/export_hf.py none --models "$m" --exporters torchscript --export-only --out $W/hf > /dev/null 2>&1
  onnx=$W/hf/$m/$m.torchscript.onnx
  if [ "$m" = vit ]; then shapes="pixel_values:${B}x3x224x224"; else shapes="input_ids:${B}x128,attention_mask:${B}x128"; fi
  "$C/kiln" build "$onnx" -o $W/$m.plan --device gpu --fp16 --tuning-shapes 0 --shapes "$shapes" > $W/$m.build.txt 2>&1 ||
    { echo "$m: build failed"; tail -5 $W/$m.build.txt; continue; }
  "$C/kiln" run $W/$m.plan --cuda-graph --dump-profile "$OUT/profile_hf_${m}_b$B.json" > $W/$m.run.txt 2>&1 ||
    { echo "$m: run failed"; tail -5 $W/$m.run.txt; }
done
"$PY" scripts/profile_summary.py --top 8 "$OUT"/profile_hf_*_b$B.json | tee "$OUT/profile_hf_summary.txt"
