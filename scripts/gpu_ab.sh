#!/usr/bin/env bash
# A/B on the GPU machine: the cuDNN graph-API conv tactic off vs on (--tactic-sources -cudnn_graph vs all), FP16 ResNet-101.
# Run from the repo root there with .gpu-carry (scripts/gpu_carry.sh): OUT=$OUT scripts/gpu_ab.sh
set -uo pipefail
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. "$(dirname "$0")/gpu_env.sh"  # C, PY, LD_LIBRARY_PATH
$C/kiln_tests --gtest_filter='Gpu*' 2>&1 | tail -n 30 | tee "$OUT/gpu_tests.txt"
mkdir -p models
$PY scripts/export_models.py --model resnet101 -o models/resnet101.onnx --photos-npz $C/calib_photos.npz 2>&1 | tail -n 2
$C/kiln_gpu_bench models/resnet101.onnx --tactic-sources -cudnn_graph --batch 1,64,256 --precision fp16 --iters 100 | tee "$OUT/kiln_graph0.jsonl"
$C/kiln_gpu_bench models/resnet101.onnx --batch 1,64,256 --precision fp16 --iters 100 | tee "$OUT/kiln_graph1.jsonl"
$C/kiln_gpu_bench models/resnet101.onnx --batch 256 --precision fp16 --iters 10 --profile 1 | grep '^#' | head -60 | tee "$OUT/profile256.txt"
