#!/usr/bin/env bash
# One command for the GPU machine (run from the repo root there, with .gpu-carry/ from
# scripts/gpu_carry.sh): GPU tests (also under compute-sanitizer memcheck / racecheck), a
# ResNet-101 export with the machine's torch, the CLI on a CUDA plan (build, inspect, run,
# compare, bench with --cuda-graph / --streams 4 / --dump-profile), FP16-vs-FP32 top-1 agreement
# on 100 photo crops, and the benchmark beside the PyTorch peers.
# Results: every log and JSON lands in $OUT/results.tgz (re-packed after each section, so a run
# stopped at its time limit still returns what finished; the device tool returns at most 8 files)
# and the console. KILN_SANITIZER=0 skips the sanitizers; KILN_SECTIONS picks sections
# (default: tests,sanitizer,cli,transformers,streams,agreement,bench,peers; also: layerprec).
set -uo pipefail
OUT=${OUT:-/tmp/kiln-out}
mkdir -p "$OUT"
R=/tmp/kiln-results
rm -rf "$R" && mkdir -p "$R"
SECTIONS=",${KILN_SECTIONS:-tests,sanitizer,cli,transformers,streams,agreement,bench,peers},"
want() { [[ "$SECTIONS" == *",$1,"* ]]; }
pack() { tar czf "$OUT/results.tgz" -C "$R" . ; }
T0=$(date +%s)
. "$(dirname "$0")/gpu_env.sh"  # C, PY, LD_LIBRARY_PATH
BATCHES=${KILN_BENCH_BATCHES:-1,8,64,256}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$R/gpu.txt"
if want tests; then
  stamp "== GPU tests"
  # OpTable/OpTableCuda.*: every op-table row (tests/op_table/) built for cuda in fp32 / fp16 / bf16
  # through the product path, against the CPU reference (docs/decisions/0036-op-test-table.md).
  $C/kiln_tests --gtest_filter='Gpu*:CudaPlan*:OpTable/OpTableCuda.*' > "$R/gpu_tests.txt" 2>&1
  grep -E '^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|^[^[].*(Failure|Which is|Expected|actual)' "$R/gpu_tests.txt" | head -n 80
  pack
fi

# compute-sanitizer: memcheck (out-of-bounds / misaligned accesses, leaks) on the Gpu* tests (and on
# the op table's CUDA rows when asked, see below); racecheck (shared-memory hazards; much slower) on
# the op-table rows of the block-reduction kernels. Each under a time limit.
SAN=/usr/local/cuda/bin/compute-sanitizer
[ -x "$SAN" ] || SAN=$(command -v compute-sanitizer || true)
if ! want sanitizer || [ "${KILN_SANITIZER:-1}" = 0 ]; then
  echo "== compute-sanitizer skipped (KILN_SANITIZER=0)"
elif [ -z "$SAN" ]; then
  echo "== compute-sanitizer not found (neither /usr/local/cuda/bin nor PATH)" | tee "$R/sanitizer_missing.txt"
else
  # name:tool:limit:filter. memcheck_optable (every op-table row on CUDA under memcheck; several
  # minutes) runs only when named: KILN_SANITIZER_TOOLS=memcheck,memcheck_optable,racecheck.
  for spec in "memcheck:memcheck:${KILN_MEMCHECK_S:-240}:Gpu*:CudaPlan*" \
      "memcheck_optable:memcheck:${KILN_MEMCHECK_OPTABLE_S:-420}:${KILN_MEMCHECK_OPTABLE_FILTER:-OpTable/OpTableCuda.*}" \
      "racecheck:racecheck:${KILN_RACECHECK_S:-150}:${KILN_RACECHECK_FILTER:-OpTable/OpTableCuda.*/LayerNormalization_*:OpTable/OpTableCuda.*/Reduce*:OpTable/OpTableCuda.*/Gelu_*:OpTable/OpTableCuda.*/FusedPointwise_*:OpTable/OpTableCuda.*/RMSNormalization_*:OpTable/OpTableCuda.*/Attention_chunked*}"; do
    name=${spec%%:*}; rest=${spec#*:}; tool=${rest%%:*}; rest=${rest#*:}; limit=${rest%%:*}; filter=${rest#*:}
    [[ ",${KILN_SANITIZER_TOOLS:-memcheck,racecheck}," == *",$name,"* ]] || continue
    stamp "== compute-sanitizer --tool $tool ($filter, limit ${limit}s)"
    log=/tmp/sanitizer_$name.log
    timeout "$limit" "$SAN" --tool "$tool" --print-limit 50 --log-file "$log" \
      $C/kiln_tests --gtest_filter="$filter" > /tmp/sanitizer_${name}_tests.txt 2>&1
    rc=$?
    {
      echo "compute-sanitizer --tool $tool, filter '$filter', exit code $rc$([ $rc = 124 ] && echo ' (TIMED OUT after '"$limit"' s)')"
      grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]' /tmp/sanitizer_${name}_tests.txt
      grep -E -A4 'Failure$' /tmp/sanitizer_${name}_tests.txt | head -n 40
      grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY' "$log"
      echo "-- first reports:"
      grep -v '^========= *$' "$log" | head -n 40
    } 2>&1 | tee "$R/sanitizer_$name.txt"
    pack
  done
fi

stamp "== export ResNet-101 (random weights, BatchNorm calibrated on the carried photos)"
mkdir -p models
$PY scripts/export_models.py --model resnet101 -o models/resnet101.onnx --photos-npz $C/calib_photos.npz 2>&1 | tail -n 3
$PY -c "import numpy as np; np.save('/tmp/x.npy', np.random.RandomState(0).randn(1,3,224,224).astype(np.float32))"

if want cli; then
stamp "== kiln CLI on a CUDA plan (cold build, warm-timing-cache rebuild, load, run, compare)"
{
  rm -f /tmp/tc.json
  s0=$(date +%s.%N)
  $C/kiln build models/resnet101.onnx -o /tmp/r101_fp16.plan --device gpu --fp16 --shapes input:1x3x224x224 \
    --timing-cache /tmp/tc.json
  s1=$(date +%s.%N)
  $C/kiln build models/resnet101.onnx -o /tmp/r101_fp16_warm.plan --device gpu --fp16 --shapes input:1x3x224x224 \
    --timing-cache /tmp/tc.json
  s2=$(date +%s.%N)
  awk -v a="$s0" -v b="$s1" -v c="$s2" 'BEGIN { printf "BUILD_WALL_S cold=%.1f warm_timing_cache=%.1f\n", b - a, c - b }'
  cmp /tmp/r101_fp16.plan /tmp/r101_fp16_warm.plan && echo "warm rebuild: identical plan bytes"
  $C/kiln inspect /tmp/r101_fp16.plan | head -n 30
  $PY -c "import numpy as np; np.save('/tmp/x.npy', np.random.RandomState(0).randn(1,3,224,224).astype(np.float32))"
  $C/kiln run /tmp/r101_fp16.plan --input input=/tmp/x.npy --output-dir /tmp/out
  # FP16 vs the FP32 CPU reference: the target is cosine >= 0.9999 (printed); logits reach ~9, so
  # the element tolerance is 2% of that.
  $C/kiln compare /tmp/r101_fp16.plan models/resnet101.onnx --input input=/tmp/x.npy --atol 0.2 --rtol 0.05
  $C/kiln build models/resnet101.onnx -o /tmp/r101_fp32.plan --device gpu --no-tf32 --min-shapes input:1x3x224x224 \
    --opt-shapes input:4x3x224x224 --max-shapes input:8x3x224x224
  $C/kiln compare /tmp/r101_fp32.plan models/resnet101.onnx --input input=/tmp/x.npy --atol 1e-4 --rtol 1e-3
  for i in 1 2 3; do $C/kiln bench /tmp/r101_fp16.plan --iterations 50 | head -n 2; done
  $C/kiln bench /tmp/r101_fp32.plan --iterations 20 | head -n 2
  $C/kiln run /tmp/r101_fp16.plan --input input=/tmp/x.npy --cuda-graph | tail -n 2
  $C/kiln build models/resnet101.onnx -o /tmp/r101_tf32_b256.plan --device gpu --shapes input:256x3x224x224 | tail -n 3
  $C/kiln inspect /tmp/r101_tf32_b256.plan | grep -i fallback | head -n 5
} > "$R/cli.txt" 2>&1
grep -E "BUILD_WALL|identical|Plan load|Tactics:|PASS|FAIL|rror|fallback" "$R/cli.txt" | head -n 40
pack
fi

if want transformers; then
stamp "== ViT-B/16 on the CUDA path (fused Attention, LayerNorm, GELU)"
{
  $PY scripts/export_models.py --model vit_b_16 -o models/vit_b_16.onnx 2>&1 | tail -n 2
  $C/kiln build models/vit_b_16.onnx -o /tmp/vit_fp32.plan --device gpu --no-tf32 --shapes input:1x3x224x224
  $C/kiln compare /tmp/vit_fp32.plan models/vit_b_16.onnx --input input=/tmp/x.npy --atol 1e-3 --rtol 1e-3
  $C/kiln build models/vit_b_16.onnx -o /tmp/vit_fp16.plan --device gpu --fp16 --shapes input:1x3x224x224
  $C/kiln compare /tmp/vit_fp16.plan models/vit_b_16.onnx --input input=/tmp/x.npy --atol 0.05 --rtol 0.05
  $C/kiln bench /tmp/vit_fp16.plan --iterations 100
  $C/kiln build models/vit_b_16.onnx -o /tmp/vit_bf16.plan --device gpu --bf16 --shapes input:1x3x224x224 | tail -n 4
  $C/kiln compare /tmp/vit_bf16.plan models/vit_b_16.onnx --input input=/tmp/x.npy --atol 0.1 --rtol 0.1
  $C/kiln inspect /tmp/vit_bf16.plan | grep -ciE "fallback" | sed "s/^/ViT BF16 layers with a fallback: /"
  # ViT-B/16's optimized graph holds 12 fused Attention layers (CUDA tactic since session 3).
  $C/kiln inspect /tmp/vit_fp16.plan | grep -cE "\(Attention\)" | sed "s/^/Attention layers: /"
  $C/kiln inspect /tmp/vit_fp16.plan | grep -E "\(Attention\)" | head -n 2
  $C/kiln bench /tmp/vit_fp16.plan --iterations 200 --cuda-graph | grep -E "Latency|Throughput|load"
  # BERT-base and GPT-2 (int64 input_ids [+ attention_mask]: staged as-is, runtime-index Gather,
  # Cast of the mask). compare generates ids over the embedding table's rows and a 0/1 mask.
  for m in bert_base gpt2; do
    shapes=input_ids:2x128
    [ $m = bert_base ] && shapes=$shapes,attention_mask:2x128
    $PY scripts/export_models.py --model $m -o models/$m.onnx 2>&1 | tail -n 1
    $C/kiln build models/$m.onnx -o /tmp/${m}_fp32.plan --device gpu --no-tf32 --shapes $shapes | tail -n 2
    $C/kiln compare /tmp/${m}_fp32.plan models/$m.onnx --atol 1e-3 --rtol 1e-3
    $C/kiln build models/$m.onnx -o /tmp/${m}_fp16.plan --device gpu --fp16 --shapes $shapes | tail -n 2
    $C/kiln compare /tmp/${m}_fp16.plan models/$m.onnx --atol 0.05 --rtol 0.05
    $C/kiln inspect /tmp/${m}_fp16.plan | grep -E "\(Gather\)|\(Cast\)" | head -n 3
    $C/kiln bench /tmp/${m}_fp16.plan --iterations 200 --cuda-graph | grep -E "Latency|Throughput|load"
  done
} > "$R/transformers.txt" 2>&1
grep -E "PASS|FAIL|rror|Latency|Attention layers|Plan load|Gather" "$R/transformers.txt" | head -n 60
pack
fi

if want streams; then
stamp "== kiln bench: CUDA graph, 4 streams, per-layer profile (FP16, batch 1)"
{
  $C/kiln bench /tmp/r101_fp16.plan --cuda-graph --iterations 400 --json "$R/bench_fp16_b1_graph.json"
  $C/kiln bench /tmp/r101_fp16.plan --cuda-graph --streams 4 --iterations 800 --json "$R/bench_fp16_b1_streams4.json"
  $C/kiln bench /tmp/r101_fp16.plan --streams 4 --iterations 400 --dump-profile "$R/profile_fp16_b1.json" \
    > /tmp/bench_profile.txt 2>&1
  head -n 45 /tmp/bench_profile.txt
  # Auxiliary streams A/B (FP16, batch 1, CUDA graph): ResNet-101 (4 downsample branches) and
  # GoogLeNet (Inception: 4 branches per block), --max-aux-streams 0 vs the builder's choice.
  $PY scripts/export_models.py --model googlenet -o models/googlenet.onnx 2>&1 | tail -n 1
  for m in resnet101 googlenet; do
    for aux in 0 -1; do
      $C/kiln build models/$m.onnx -o /tmp/${m}_aux.plan --device gpu --fp16 --shapes input:1x3x224x224 \
        --max-aux-streams $aux > /tmp/aux_build.txt 2>&1 || { echo "AUX build failed: $m $aux"; tail -n 5 /tmp/aux_build.txt; }
      echo "AUX $m max-aux-streams=$aux: $($C/kiln inspect /tmp/${m}_aux.plan | grep -E '^Streams:' | head -n 1)"
      for rep in 1 2; do
        $C/kiln bench /tmp/${m}_aux.plan --cuda-graph --iterations 1000 | grep -A1 "^GPU compute time" | tail -n 1 |
          sed "s/^/AUX $m $aux: GPU compute/"
      done
    done
  done
} > "$R/bench_streams.txt" 2>&1
grep -E "Latency|Throughput|AUX" "$R/bench_streams.txt"
pack
fi

if want agreement; then
stamp "== top-1 agreement with FP32 (no TF32) on 100 photo crops"
$PY scripts/photo_inputs.py --photos-npz $C/calib_photos.npz -n 100 -o /tmp/photos100.npy
$C/kiln_gpu_bench models/resnet101.onnx --agreement /tmp/photos100.npy --precision fp16,bf16 \
  --json-out "$R/agreement.json" 2>&1 | tail -n 4
pack
fi

# Per-layer precision constraints (docs/decisions/0013): accuracy on the 100 photo crops and the
# speed they cost, per spec. KILN_LAYERPREC_SPECS: specs separated by ';'.
if want layerprec; then
stamp "== per-layer precision constraints: agreement and speed"
[ -f /tmp/photos100.npy ] || $PY scripts/photo_inputs.py --photos-npz $C/calib_photos.npz -n 100 -o /tmp/photos100.npy
IFS=';' read -r -a SPECS <<< "${KILN_LAYERPREC_SPECS:-/fc/*:fp32;/layer4/*:fp32,/fc/*:fp32;*/conv3/*:fp32,*/downsample.0/*:fp32,/fc/*:fp32;/layer3/*:fp32,/layer4/*:fp32,/fc/*:fp32;*:fp32}"
for spec in "${SPECS[@]}"; do
  $C/kiln_gpu_bench models/resnet101.onnx --agreement /tmp/photos100.npy --precision fp16,bf16 \
    --layer-precisions "$spec" 2>/dev/null | tail -n 1 | tee -a "$R/layerprec_agreement.jsonl"
  $C/kiln_gpu_bench models/resnet101.onnx --batch 1,64 --precision fp16,bf16 --iters 100 \
    --layer-precisions "$spec" 2>/dev/null | tee -a "$R/layerprec_bench.jsonl"
  pack
done
# The CLI path: a BF16 plan with constraints, inspected.
$C/kiln build models/resnet101.onnx -o /tmp/r101_bf16_mixed.plan --device gpu --bf16 --shapes input:1x3x224x224 \
  --layer-precisions "${SPECS[2]}" > "$R/layerprec_cli.txt" 2>&1
$C/kiln inspect /tmp/r101_bf16_mixed.plan | grep -E "constrained|convert:" | head -n 12 >> "$R/layerprec_cli.txt" 2>&1
$C/kiln compare /tmp/r101_bf16_mixed.plan models/resnet101.onnx --input input=/tmp/x.npy --atol 0.1 --rtol 0.1 \
  >> "$R/layerprec_cli.txt" 2>&1
tail -n 20 "$R/layerprec_cli.txt"
pack
fi

if want bench; then
stamp "== benchmark: Kiln"
$C/kiln_gpu_bench models/resnet101.onnx --batch "$BATCHES" --precision fp32,tf32,fp16,bf16 | tee "$R/kiln.jsonl"
stamp "== per-layer profile (FP16, batch 1 and 64)"
$C/kiln_gpu_bench models/resnet101.onnx --batch 1,64 --precision fp16 --iters 20 --profile 1 | grep '^#' > "$R/profile.txt"
pack
fi

if want peers; then
stamp "== benchmark: PyTorch peers"
[ -f /tmp/photos100.npy ] || $PY scripts/photo_inputs.py --photos-npz $C/calib_photos.npz -n 100 -o /tmp/photos100.npy
$PY bench/peers/resnet101_peers.py --batch "$BATCHES" --compile-batch 1,64 --photos-npz $C/calib_photos.npz \
  --agreement-npy /tmp/photos100.npy 2>&1 | grep '^{' | tee "$R/peers.jsonl"
pack
fi
stamp "== done"
