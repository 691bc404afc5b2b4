#!/usr/bin/env bash
# GPU checks of the Python package, for the GPU machine (repo root there, .gpu-carry/ from
# scripts/gpu_carry.sh, which builds kiln/_kiln for the venv's Python 3.12):
#   1. import kiln with /opt/torch/.venv/bin/python; tests/python/test_gpu.py (the zero-copy CUDA
#      path); the whole pytest suite when pytest is there;
#   2. the examples on ResNet-101 (TensorRT style FP16, Pythonic FP16, torch streams + graphs);
#   3. the TensorRT-style script's output against `kiln run` of the same plan, bit for bit;
#   4. the host overhead of engine(torch_cuda_tensor) over the C++ graph launch (py_overhead.py),
#      beside `kiln bench --cuda-graph` of the same plan.
# Results: $OUT/python_results.tgz (logs + JSON) and the console.
#   run(command="scripts/gpu_python.sh", carry=[".gpu-carry"])
set -uo pipefail
OUT=${OUT:-/tmp/kiln-out}
mkdir -p "$OUT"
R=/tmp/kiln-py-results
M=/tmp/kiln-py-models
rm -rf "$R" && mkdir -p "$R" "$M"
pack() { tar czf "$OUT/python_results.tgz" -C "$R" . ; }
. "$(dirname "$0")/gpu_env.sh"  # C, PY, LD_LIBRARY_PATH
export PYTHONPATH=$PWD/$C/python

stamp "== import"
$PY -c "import torch, kiln; print('kiln', kiln.__version__, 'cuda', kiln._kiln.cuda_available(), 'torch', torch.__version__)" 2>&1 | tee "$R/import.txt"
stamp "== zero-copy CUDA path (tests/python/test_gpu.py)"
$PY tests/python/test_gpu.py 2>&1 | tee "$R/test_gpu.txt"
if $PY -c "import pytest" 2>/dev/null; then
  stamp "== pytest (tests/python)"
  KILN_CLI=$PWD/$C/kiln KILN_SOURCE_DIR=$PWD $PY -m pytest -q -p no:cacheprovider tests/python 2>&1 | tail -n 30 | tee "$R/pytest.txt"
fi
pack

stamp "== (a) TensorRT-style ResNet-101 FP16 (writes the plan and its input/output)"
$PY examples/trt_resnet101.py --onnx $M/resnet101.onnx --plan $M/trt_fp16.plan --save-io $M/io 2>&1 | tee "$R/example_trt.txt"
pack
stamp "== (b) Pythonic"
$PY examples/pythonic_resnet101.py $M/resnet101.onnx 2>&1 | tee "$R/example_pythonic.txt"
stamp "== (c) torch streams"
$PY examples/torch_streams.py --onnx $M/resnet101.onnx 2>&1 | tee "$R/example_torch_streams.txt"
pack

stamp "== bit-exact: kiln.trt output vs kiln run of the same plan"
$C/kiln run $M/trt_fp16.plan --input input=$M/io/input.npy --output-dir $M/cli > "$R/kiln_run.txt" 2>&1
$PY - "$M" <<'PY' 2>&1 | tee "$R/bit_exact.txt"
import sys, numpy as np
m = sys.argv[1]
a, b = np.load(f"{m}/io/logits.npy"), np.load(f"{m}/cli/logits.npy")
same = a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
print(f"kiln.trt {a.dtype}{list(a.shape)} vs kiln run {b.dtype}{list(b.shape)}: bit-exact {same}, "
      f"max |d| {float(np.abs(a.astype(np.float64) - b).max()):.3g}")
PY
pack

stamp "== overhead: engine(torch_cuda_tensor) vs the C++ graph launch, ResNet-101 FP16 batch 1"
$PY scripts/py_overhead.py $M/trt_fp16.plan "$R/python_overhead.json" 2>&1 | tee "$R/python_overhead.txt"
$C/kiln bench $M/trt_fp16.plan --cuda-graph --iterations 1000 --json "$R/bench_cuda_graph.json" > "$R/bench_cuda_graph.txt" 2>&1
grep -iE "latency|enqueue|compute" "$R/bench_cuda_graph.txt" | head -n 12
pack
stamp "done: $OUT/python_results.tgz"
