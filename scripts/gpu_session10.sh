#!/usr/bin/env bash
# Session 10's GPU checks in one call (carry .gpu-carry from scripts/gpu_carry.sh; for `dyn`,
# .gpu-carry/base/python = the previous main's Python package, for the before/after switch):
#   run(command="KILN_STEPS='tests dyn hf' scripts/gpu_session10.sh", carry=[".gpu-carry"])
# Steps (KILN_STEPS, default all):
#   tests  the GPU tests and the op table's CUDA rows -> $OUT/gpu_tests.txt (gpu_session9.sh)
#   dyn    one ResNet-101 FP16 plan with a batch profile 1..256 (opt 64): `kiln bench --verbose`
#          at batch 8 (the set-up steps of a new shape, [load] lines) and scripts/dyn_switch.py
#          (first call per visit and GPU medians while one engine switches shapes), with this
#          tree's package and, when carried, the previous main's -> $OUT/dyn_*.txt|json
#   hf     transformers exports, profiles and batch-32 bench (gpu_session9.sh's step)
#   conf   ONNX backend node tests on the GPU (gpu_session9.sh's step)
#   llm / greedy  gpu_session9.sh's LLM steps
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. scripts/gpu_env.sh
STEPS=${KILN_STEPS:-tests dyn hf conf}
if has tests; then KILN_STEPS=tests OUT=$OUT scripts/gpu_session9.sh; fi
if has dyn; then
  stamp "== dynamic batch: shape switches"
  mkdir -p models /tmp/dyn
  [ -f models/resnet101.onnx ] || $PY scripts/export_models.py --model resnet101 -o models/resnet101.onnx --calib noise 2>&1 | tail -n 1
  $C/kiln build models/resnet101.onnx -o /tmp/dyn/dyn.plan --device gpu --fp16 --min-shapes input:1x3x224x224 \
    --opt-shapes input:64x3x224x224 --max-shapes input:256x3x224x224 > /tmp/dyn/dyn_build.txt 2>&1 || tail -n 5 /tmp/dyn/dyn_build.txt
  stamp "built"
  for b in 8 1; do
    $C/kiln bench /tmp/dyn/dyn.plan --shapes input:${b}x3x224x224 --cuda-graph --iterations 50 --verbose \
      > "$OUT/dyn_bench_verbose_b$b.txt" 2>&1
    grep -E "\[load\]|Shape setup|median" "$OUT/dyn_bench_verbose_b$b.txt" | tail -n 24
  done
  for pkg in new base; do
    pp=$PWD/$C/python; [ $pkg = base ] && pp=$PWD/$C/base/python
    [ -d "$pp/kiln" ] || continue
    echo "-- dyn_switch ($pkg)"
    PYTHONPATH=$pp $PY scripts/dyn_switch.py /tmp/dyn/dyn.plan --order 1,8,64,256,8,1,256,64,16,32 \
      --json "$OUT/dyn_switch_$pkg.json" > "$OUT/dyn_switch_$pkg.txt" 2>&1
    cat "$OUT/dyn_switch_$pkg.txt" | cut -c1-200
  done
fi
for s in hf conf llm greedy; do
  if has $s; then KILN_STEPS=$s OUT=$OUT scripts/gpu_session9.sh; fi
done
stamp "done"
