#!/usr/bin/env bash
# GPU soak (issue 15), for the GPU machine (binaries from scripts/gpu_carry.sh in .gpu-carry/):
# a CUDA plan driven for DURATION seconds by N threads, each with its own execution context on its
# own stream (`kiln bench --streams N`, once with CUDA graphs and once without), while the
# process's device memory is sampled every 10 s; outputs before and after must be bit-identical,
# and a CUDA-graph replay must match its capture bit for bit (`kiln run --cuda-graph`).
# Usage: scripts/soak_gpu.sh MODEL.onnx SHAPES [DURATION_S=600] [STREAMS=4]
#   e.g. scripts/soak_gpu.sh .gpu-carry/models/resnet101.onnx input:8x3x224x224
set -uo pipefail
MODEL=$1 SHAPES=$2 DUR=${3:-600} STREAMS=${4:-4}
K=${KILN:-.gpu-carry/kiln}
[ -x "$K" ] || K=build/kiln
. "$(dirname "$0")/gpu_env.sh"  # C, PY, LD_LIBRARY_PATH
W=${OUT:-/tmp}/kiln-soak-gpu
rm -rf "$W" && mkdir -p "$W"
$K build "$MODEL" -o "$W/soak.plan" --device gpu --fp16 --shapes "$SHAPES" > "$W/build.log" 2>&1 || { tail "$W/build.log"; exit 1; }
$K run "$W/soak.plan" --cuda-graph --output-dir "$W/before" > "$W/run_before.log" 2>&1 || { tail "$W/run_before.log"; exit 1; }
fail=0
for graph in "" "--cuda-graph"; do
  half=$((DUR / 2))
  echo "== bench --streams $STREAMS $graph for $half s"
  $K bench "$W/soak.plan" --streams "$STREAMS" $graph --duration "$half" > "$W/bench$graph.log" 2>&1 &
  PID=$!
  : > "$W/mem$graph.txt"
  while kill -0 "$PID" 2>/dev/null; do
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
      awk -F', ' -v p="$PID" '$1 == p {print $2}' >> "$W/mem$graph.txt"
    sleep 10
  done
  wait "$PID" || { tail "$W/bench$graph.log"; fail=1; }
  tail -4 "$W/bench$graph.log"
  echo "device memory MiB (every 10 s): $(tr '\n' ' ' < "$W/mem$graph.txt")"
  first=$(sed -n 2p "$W/mem$graph.txt"); last=$(tail -1 "$W/mem$graph.txt")
  if [ -n "$first" ] && [ -n "$last" ] && [ "$last" -gt $((first + 16)) ]; then echo "!! device memory grew"; fail=1; fi
done
$K run "$W/soak.plan" --cuda-graph --output-dir "$W/after" > "$W/run_after.log" 2>&1 || fail=1
for f in "$W"/before/*.npy; do
  cmp -s "$f" "$W/after/$(basename "$f")" || { echo "!! $(basename "$f") differs after the soak"; fail=1; }
done
[ $fail = 0 ] && echo "== GPU soak passed: outputs bit-identical, device memory flat"
exit $fail
