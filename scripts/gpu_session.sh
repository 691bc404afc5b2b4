#!/usr/bin/env bash
# One command for the GPU machine (run from the repo root there, with .gpu-carry/ from
# scripts/gpu_carry.sh): GPU tests (also under compute-sanitizer memcheck / racecheck), a
# ResNet-101 export with the machine's torch, the CLI on a CUDA plan (build, inspect, run,
# compare, bench with --cuda-graph / --streams 4 / --dump-profile), FP16-vs-FP32 top-1 agreement
# on 100 photo crops, and the benchmark beside the PyTorch peers.
# Results go to $OUT (the device tool brings them back). KILN_SANITIZER=0 skips the sanitizers.
set -uo pipefail
OUT=${OUT:-/tmp/kiln-out}
mkdir -p "$OUT"
C=.gpu-carry
CUDNN=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
export LD_LIBRARY_PATH=$PWD/$C/lib:$CUDNN:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
PY=/opt/torch/.venv/bin/python
[ -x "$PY" ] || PY=python3
BATCHES=${KILN_BENCH_BATCHES:-1,8,64,256}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
echo "== GPU tests"
$C/kiln_tests --gtest_filter='Gpu*:CudaPlan*' 2>&1 | tail -n 25 | tee "$OUT/gpu_tests.txt"

# compute-sanitizer: memcheck (out-of-bounds / misaligned accesses, leaks) on every GPU test;
# racecheck (shared-memory hazards; much slower) on the small-model tests. Each under a time limit.
SAN=/usr/local/cuda/bin/compute-sanitizer
[ -x "$SAN" ] || SAN=$(command -v compute-sanitizer || true)
if [ "${KILN_SANITIZER:-1}" = 0 ]; then
  echo "== compute-sanitizer skipped (KILN_SANITIZER=0)"
elif [ -z "$SAN" ]; then
  echo "== compute-sanitizer not found (neither /usr/local/cuda/bin nor PATH)" | tee "$OUT/sanitizer_missing.txt"
else
  for spec in "memcheck:240:Gpu*:CudaPlan*" "racecheck:180:GpuModel.*:GpuRuntime.EnqueueDoesNotAllocate*"; do
    tool=${spec%%:*}; rest=${spec#*:}; limit=${rest%%:*}; filter=${rest#*:}
    echo "== compute-sanitizer --tool $tool ($filter, limit ${limit}s)"
    log=/tmp/sanitizer_$tool.log
    timeout "$limit" "$SAN" --tool "$tool" --print-limit 50 --log-file "$log" \
      $C/kiln_tests --gtest_filter="$filter" > /tmp/sanitizer_${tool}_tests.txt 2>&1
    rc=$?
    {
      echo "compute-sanitizer --tool $tool, filter '$filter', exit code $rc$([ $rc = 124 ] && echo ' (TIMED OUT after '"$limit"' s)')"
      grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]' /tmp/sanitizer_${tool}_tests.txt
      grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY' "$log"
      echo "-- first reports:"
      grep -v '^========= *$' "$log" | head -n 40
    } 2>&1 | tee "$OUT/sanitizer_$tool.txt"
  done
fi

echo "== export ResNet-101 (random weights, BatchNorm calibrated on the carried photos)"
mkdir -p models
$PY scripts/export_models.py --model resnet101 -o models/resnet101.onnx --photos-npz $C/calib_photos.npz 2>&1 | tail -n 3

echo "== kiln CLI on a CUDA plan"
{
  $C/kiln build models/resnet101.onnx -o /tmp/r101_fp16.plan --device gpu --fp16 --shapes input:1x3x224x224
  $C/kiln inspect /tmp/r101_fp16.plan | head -n 30
  $PY -c "import numpy as np; np.save('/tmp/x.npy', np.random.RandomState(0).randn(1,3,224,224).astype(np.float32))"
  $C/kiln run /tmp/r101_fp16.plan --input input=/tmp/x.npy --output-dir /tmp/out
  $C/kiln compare /tmp/r101_fp16.plan models/resnet101.onnx --input input=/tmp/x.npy --atol 0.05 --rtol 0.05
  $C/kiln build models/resnet101.onnx -o /tmp/r101_fp32.plan --device gpu --no-tf32 --min-shapes input:1x3x224x224 \
    --opt-shapes input:4x3x224x224 --max-shapes input:8x3x224x224
  $C/kiln compare /tmp/r101_fp32.plan models/resnet101.onnx --input input=/tmp/x.npy --atol 1e-4 --rtol 1e-3
  $C/kiln bench /tmp/r101_fp16.plan --iterations 200
  $C/kiln run /tmp/r101_fp16.plan --input input=/tmp/x.npy --cuda-graph | tail -n 2
} 2>&1 | tee "$OUT/cli.txt"

echo "== ViT-B/16 on the CUDA path (LayerNorm, Gelu, batched MatMul, Transpose, Gather; issue 4)"
{
  $PY scripts/export_models.py --model vit_b_16 -o models/vit_b_16.onnx 2>&1 | tail -n 2
  $C/kiln build models/vit_b_16.onnx -o /tmp/vit_fp32.plan --device gpu --no-tf32 --shapes input:1x3x224x224
  $C/kiln compare /tmp/vit_fp32.plan models/vit_b_16.onnx --input input=/tmp/x.npy --atol 1e-3 --rtol 1e-3
  $C/kiln build models/vit_b_16.onnx -o /tmp/vit_fp16.plan --device gpu --fp16 --shapes input:1x3x224x224
  $C/kiln compare /tmp/vit_fp16.plan models/vit_b_16.onnx --input input=/tmp/x.npy --atol 0.05 --rtol 0.05
  $C/kiln bench /tmp/vit_fp16.plan --iterations 100
} 2>&1 | tee "$OUT/vit.txt"

echo "== kiln bench: CUDA graph, 4 streams, per-layer profile (FP16, batch 1)"
{
  $C/kiln bench /tmp/r101_fp16.plan --cuda-graph --iterations 400 --json "$OUT/bench_fp16_b1_graph.json"
  $C/kiln bench /tmp/r101_fp16.plan --cuda-graph --streams 4 --iterations 800 --json "$OUT/bench_fp16_b1_streams4.json"
  $C/kiln bench /tmp/r101_fp16.plan --streams 4 --iterations 400 --dump-profile "$OUT/profile_fp16_b1.json" \
    > /tmp/bench_profile.txt 2>&1
  head -n 45 /tmp/bench_profile.txt
} 2>&1 | tee "$OUT/bench_streams.txt"

echo "== top-1 agreement with FP32 (no TF32) on 100 photo crops"
$PY scripts/photo_inputs.py --photos-npz $C/calib_photos.npz -n 100 -o /tmp/photos100.npy
$C/kiln_gpu_bench models/resnet101.onnx --agreement /tmp/photos100.npy --precision fp16,bf16 \
  --json-out "$OUT/agreement.json"

echo "== benchmark: Kiln"
$C/kiln_gpu_bench models/resnet101.onnx --batch "$BATCHES" --precision fp32,tf32,fp16,bf16 | tee "$OUT/kiln.jsonl"
echo "== per-layer profile (FP16, batch 1 and 64)"
$C/kiln_gpu_bench models/resnet101.onnx --batch 1,64 --precision fp16 --iters 20 --profile 1 | grep '^#' | tee "$OUT/profile.txt"
echo "== benchmark: PyTorch peers"
$PY bench/peers/resnet101_peers.py --batch "$BATCHES" --compile-batch 1,64 --photos-npz $C/calib_photos.npz 2>&1 | grep '^{' | tee "$OUT/peers.jsonl"
