#!/usr/bin/env bash
# A/B on the GPU machine for docs/decisions/0058: Gemm (transB, bias) + Relu, M = K = N = 4096, FP16,
# built with the Relu in the cuBLASLt epilogue (default) and with it as its own layer
# (--disable-pass fuse_gemm_activation); CUDA-graph latency and per-layer profiles of both.
# Run from the repo root there with .gpu-carry (scripts/gpu_carry.sh): OUT=$OUT scripts/gpu_gemm_relu_ab.sh
set -uo pipefail
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. "$(dirname "$0")/gpu_env.sh"  # C, PY, LD_LIBRARY_PATH
M=${M:-4096}; K=${K:-4096}; N=${N:-4096}
mkdir -p models
$PY - "$M" "$K" "$N" models/gemm_relu.onnx <<'PYEOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
m, k, n, path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(0)
w = numpy_helper.from_array((rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32), "w")
b = numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "b")
g = helper.make_graph(
    [helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="fc", transB=1),
     helper.make_node("Relu", ["h"], ["y"], name="relu")],
    "gemm_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], [w, b])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
PYEOF
$C/kiln build models/gemm_relu.onnx --device gpu --fp16 -o "$OUT/fused.plan" 2>&1 | tail -n 3
$C/kiln build models/gemm_relu.onnx --device gpu --fp16 --disable-pass fuse_gemm_activation -o "$OUT/unfused.plan" 2>&1 | tail -n 3
for v in fused unfused; do
  $C/kiln bench "$OUT/$v.plan" --cuda-graph --warmup 50 --iterations 500 --json "$OUT/$v.json" | tee "$OUT/$v.txt"
  $C/kiln bench "$OUT/$v.plan" --dump-profile "$OUT/${v}_profile.json" | tail -n 8 | tee -a "$OUT/$v.txt"
done
