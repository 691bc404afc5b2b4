#!/usr/bin/env bash
# Issue 12 on the GPU machine (carry .gpu-carry from scripts/gpu_carry.sh). Results under $OUT.
#   1. GPU tests + the op table's CUDA rows (QuantLinear int8/fp8 rows among them)
#   2. the OCR model in INT8 on the GPU (calibration cache + inputs rendered on the build machine,
#      scripts/gpu_carry.sh): lines read vs the truth
#   3. QuantLinear speed: an MLP of two 4096 x 4096 linear layers (batch 4096 rows) built FP16, and
#      from its Q/DQ models INT8 and FP8 (`kiln quantize` here), `kiln bench --cuda-graph`
#   3b. resnet: QuantConv speed (docs/decisions/0078): resnet50 / resnet101 (scripts/export_models.py)
#      built FP16 and `--int8 --calib` / `--fp8 --calib` (random calibration npz), each also with
#      --quant-conv (QuantConv layers; off by default), at batch 1 and 256,
#      `kiln bench --cuda-graph`; the layer counts of kiln build's quantization summary; cosine of
#      each 8-bit plan's output vs the FP16 plan's. KILN_QUANT_RESNETS (default "resnet50 resnet101"),
#      KILN_QUANT_BATCHES (default "1 256"), KILN_QUANT_CONFIGS (default "fp16 int8 fp8 int8qc fp8qc").
#   4. the LLM checkpoint reader against transformers' save_pretrained (scripts/llm_checkpoints_hf.py)
#   5. ab: the product-path A/B against the previous main (scripts/gpu_product_ab.sh; KILN_AB_MODELS, ...)
# Steps: KILN_QUANT_STEPS (default "tests ocr mlp resnet llm").
set -uo pipefail
OUT=${OUT:-/tmp/kiln-out}; mkdir -p "$OUT"
. "$(dirname "$0")/gpu_env.sh"  # C, PY, LD_LIBRARY_PATH
STEPS=" ${KILN_QUANT_STEPS:-tests ocr mlp resnet llm} "
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

if [[ "$STEPS" == *" tests "* ]]; then
  stamp "== GPU tests and the op table's CUDA rows"
  $C/kiln_tests --gtest_filter="${KILN_GTEST_FILTER:-Gpu*:*Gpu*:OpTable/OpTableCuda.*:CudaPlan*:TacticSelector*:*Packed*:*Quant*}" \
    > "$OUT/gpu_tests.txt" 2>&1
  echo "rc=$?" >> "$OUT/gpu_tests.txt"
  grep -E "^\[  (PASSED|FAILED) |^\[==========\]|^rc=" "$OUT/gpu_tests.txt" | head -40
  grep -E "^\[  FAILED  \]" "$OUT/gpu_tests.txt" | head -20
fi

if [[ "$STEPS" == *" ocr "* ]] && [ -d $C/ocr ]; then
  stamp "== PP-OCRv4 recognizer, FP32 and INT8 (min-max calibration) on the GPU"
  for dev_prec in "gpu:" "gpu:--fp16"; do
    prec=${dev_prec#gpu:}
    tag=${prec:-fp32}; tag=${tag#--}
    $PY scripts/ocr_demo.py --kiln $C/kiln --device gpu --assets $C/ocr --inputs $C/ocr --build-flags="$prec" \
      --no-ort --work /tmp/ocr_$tag > "$OUT/ocr_$tag.txt" 2>&1
    echo "rc=$?" >> "$OUT/ocr_$tag.txt"
    grep -E "^\[ocr\] (Kiln|INT8)|rc=" "$OUT/ocr_$tag.txt"
  done
  $C/kiln inspect /tmp/ocr_fp32/rec_int8.plan > "$OUT/ocr_int8_inspect.txt" 2>&1
fi

if [[ "$STEPS" == *" mlp "* ]]; then
  stamp "== QuantLinear speed: MLP 4096 -> 4096 -> 4096, 4096 rows"
  mkdir -p /tmp/q
  $PY - <<'PYEOF'
import numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
rng = np.random.default_rng(0)
d = 4096
w1 = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
w2 = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
b1 = (0.01 * rng.standard_normal(d)).astype(np.float32)
b2 = (0.01 * rng.standard_normal(d)).astype(np.float32)
nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], "fc1", transB=1),
         helper.make_node("Relu", ["h"], ["r"], "relu"),
         helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], "fc2", transB=1)]
g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", d])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", d])],
                      [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
m.ir_version = 9
onnx.save(m, "/tmp/q/mlp.onnx")
np.savez("/tmp/q/calib.npz", x=rng.standard_normal((64, d)).astype(np.float32))
np.save("/tmp/q/x.npy", rng.standard_normal((4096, d)).astype(np.float32))
PYEOF
  : > "$OUT/mlp.jsonl"
  $C/kiln quantize /tmp/q/mlp.onnx --calib /tmp/q/calib.npz -o /tmp/q/mlp.int8.onnx > "$OUT/mlp_quantize.txt" 2>&1
  $C/kiln quantize /tmp/q/mlp.onnx --calib /tmp/q/calib.npz -o /tmp/q/mlp.fp8.onnx --format fp8 >> "$OUT/mlp_quantize.txt" 2>&1
  for cfg in "fp16:mlp.onnx:--fp16" "int8_fp16:mlp.int8.onnx:--fp16 --int8" "fp8_fp16:mlp.fp8.onnx:--fp16 --fp8" \
             "bf16:mlp.onnx:--bf16" "int8_bf16:mlp.int8.onnx:--bf16 --int8"; do
    IFS=: read -r tag model flags <<< "$cfg"
    if ! $C/kiln build /tmp/q/$model -o /tmp/q/$tag.plan --device gpu $flags --shapes x:4096x4096 \
        > /tmp/q/$tag.build.txt 2>&1; then
      echo "{\"config\": \"$tag\", \"error\": \"build failed\"}" | tee -a "$OUT/mlp.jsonl"; tail -n 5 /tmp/q/$tag.build.txt; continue
    fi
    $C/kiln inspect /tmp/q/$tag.plan > /tmp/q/inspect_$tag.txt 2>&1
    $C/kiln bench /tmp/q/$tag.plan --cuda-graph --iterations 200 --json /tmp/q/$tag.json > /dev/null 2>&1
    $C/kiln run /tmp/q/$tag.plan --input x=/tmp/q/x.npy --output-dir /tmp/q/out_$tag --dump-profile /tmp/q/profile_$tag.json \
      > /tmp/q/run_$tag.txt 2>&1
    $PY - "$tag" /tmp/q/$tag.json /tmp/q/$tag.plan <<'PYEOF' | tee -a "$OUT/mlp.jsonl"
import json, os, sys
tag, jp, plan = sys.argv[1:4]
j = json.load(open(jp))
ms = j["gpu_compute_ms"]["median"]
print(json.dumps({"config": tag, "gpu_median_ms": ms, "tflops": round(2 * 2 * 4096**3 / ms / 1e9, 1),
                  "plan_bytes": os.path.getsize(plan)}))
PYEOF
  done
  # Accuracy of each 8-bit plan against the FP16 plan's output, and against the CPU reference of
  # its own Q/DQ model on a few rows.
  $PY - <<'PYEOF' | tee "$OUT/mlp_accuracy.txt"
import glob, numpy as np
ref = np.load(glob.glob("/tmp/q/out_fp16/*.npy")[0]).astype(np.float64)
for tag in ("int8_fp16", "fp8_fp16", "bf16", "int8_bf16"):
    f = glob.glob(f"/tmp/q/out_{tag}/*.npy")
    if not f: print(tag, "no output"); continue
    y = np.load(f[0]).astype(np.float64)
    cos = float((y * ref).sum() / np.linalg.norm(y) / np.linalg.norm(ref))
    print(f"{tag}: cosine vs fp16 {cos:.6f}, max |d| / max |ref| {np.abs(y - ref).max() / np.abs(ref).max():.4f}")
PYEOF
  grep -E "QuantLinear|quant_linear" /tmp/q/inspect_int8_fp16.txt /tmp/q/inspect_fp8_fp16.txt | head -8
  for tag in fp16 int8_fp16 fp8_fp16; do echo "-- per-layer profile $tag"; grep -E " ms|%" /tmp/q/run_$tag.txt | head -8; done
  stamp "== the same MLP in PyTorch (peers, same call, same card)"
  $PY bench/peers/mlp_quant_peers.py --iters 200 2>&1 | tee -a "$OUT/mlp.jsonl" | grep -v "^{" | tail -5
fi

if [[ "$STEPS" == *" resnet "* ]]; then
  stamp "== QuantConv speed: ResNet INT8 / FP8 vs FP16 (kiln bench --cuda-graph)"
  mkdir -p /tmp/qr models
  : > "$OUT/resnet_quant.jsonl"
  for model in ${KILN_QUANT_RESNETS:-resnet50 resnet101}; do
    [ -f models/$model.onnx ] || $PY scripts/export_models.py --model $model -o models/$model.onnx \
      $([ -f $C/calib_photos.npz ] && echo "--photos-npz $C/calib_photos.npz" || echo "--calib noise") 2>&1 | tail -n 2
    # Random calibration data: speed does not depend on the scales (the accuracy run is the photo one).
    $PY -c "import numpy as np; np.savez('/tmp/qr/calib.npz', input=np.random.default_rng(0).standard_normal((16, 3, 224, 224)).astype(np.float32))"
    for b in ${KILN_QUANT_BATCHES:-1 256}; do
      $PY -c "import numpy as np; np.save('/tmp/qr/x$b.npy', np.random.default_rng(1).standard_normal(($b, 3, 224, 224)).astype(np.float32))"
      # int8: convolutions stay in the Q/DQ form (FP16 convs) unless --quant-conv (int8qc); FP8
      # convolutions always become QuantConv (fp8 and fp8qc are the same build; decision 0078 addendum).
      for cfg in "fp16:--fp16" "int8:--fp16 --int8 --calib /tmp/qr/calib.npz" "fp8:--fp16 --fp8 --calib /tmp/qr/calib.npz" \
                 "int8qc:--fp16 --int8 --calib /tmp/qr/calib.npz --quant-conv" \
                 "fp8qc:--fp16 --fp8 --calib /tmp/qr/calib.npz --quant-conv"; do
        tag=${model}_${cfg%%:*}_b$b; flags=${cfg#*:}
        case " ${KILN_QUANT_CONFIGS:-fp16 int8 fp8 int8qc fp8qc} " in *" ${cfg%%:*} "*) ;; *) continue;; esac
        if ! $C/kiln build models/$model.onnx -o /tmp/qr/$tag.plan --device gpu $flags --shapes input:${b}x3x224x224 \
            > /tmp/qr/$tag.build.txt 2>&1; then
          echo "{\"config\": \"$tag\", \"error\": \"build failed\"}" | tee -a "$OUT/resnet_quant.jsonl"; tail -n 5 /tmp/qr/$tag.build.txt
          continue
        fi
        grep -E "quantization:" /tmp/qr/$tag.build.txt | sed "s/^/$tag /"
        $C/kiln inspect /tmp/qr/$tag.plan > /tmp/qr/inspect_$tag.txt 2>&1
        $C/kiln bench /tmp/qr/$tag.plan --cuda-graph --iterations 200 --json /tmp/qr/$tag.json > /dev/null 2>&1
        $C/kiln run /tmp/qr/$tag.plan --input input=/tmp/qr/x$b.npy --output-dir /tmp/qr/out_$tag > /dev/null 2>&1
        $PY - "$tag" "$b" /tmp/qr/$tag.json <<'PYEOF' | tee -a "$OUT/resnet_quant.jsonl"
import json, sys
tag, b, jp = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ms = json.load(open(jp))["gpu_compute_ms"]["median"]
print(json.dumps({"config": tag, "gpu_median_ms": ms, "img_per_s": round(b / ms * 1e3)}))
PYEOF
      done
      $PY - "$model" "$b" <<'PYEOF' | tee -a "$OUT/resnet_quant_accuracy.txt"
import glob, sys, numpy as np
model, b = sys.argv[1:3]
ref = glob.glob(f"/tmp/qr/out_{model}_fp16_b{b}/*.npy")
for q in ("int8", "fp8", "int8qc", "fp8qc"):
    f = glob.glob(f"/tmp/qr/out_{model}_{q}_b{b}/*.npy")
    if not f or not ref: print(model, q, b, "no output"); continue
    y, r = np.load(f[0]).astype(np.float64), np.load(ref[0]).astype(np.float64)
    cos = float((y * r).sum() / np.linalg.norm(y) / np.linalg.norm(r))
    top1 = float((y.reshape(len(y), -1).argmax(1) == r.reshape(len(r), -1).argmax(1)).mean())
    print(f"{model} {q} batch {b}: cosine vs fp16 {cos:.5f}, top-1 agreement {top1:.3f} (random inputs)")
PYEOF
    done
    for q in int8qc fp8qc; do
      grep -cE "QuantConv" /tmp/qr/inspect_${model}_${q}_b256.txt 2>/dev/null | sed "s/^/$model $q QuantConv lines in inspect: /"
      grep -E "quant_conv" /tmp/qr/inspect_${model}_${q}_b256.txt 2>/dev/null | sed -E 's/.*(quant_conv [^ ]+ [^ ]+ [^ ]+).*/\1/' | sort | uniq -c
    done
  done
fi

if [[ "$STEPS" == *" llm "* ]] && [ -f scripts/llm_checkpoints_hf.py ]; then
  stamp "== LLM checkpoints: Kiln's reader vs transformers' save_pretrained"
  $PY scripts/llm_checkpoints_hf.py $C/kiln_llm_inspect > "$OUT/llm_checkpoints.txt" 2>&1
  echo "rc=$?" >> "$OUT/llm_checkpoints.txt"
  tail -n 15 "$OUT/llm_checkpoints.txt"
  if [ -x scripts/gpu_llm_reference.sh ] && [ -x $C/kiln_llm_generate ]; then
    stamp "== LLM CPU reference vs transformers"
    OUT=$OUT scripts/gpu_llm_reference.sh > "$OUT/llm_reference.txt" 2>&1
    echo "rc=$?" >> "$OUT/llm_reference.txt"
    tail -n 25 "$OUT/llm_reference.txt"
  fi
fi
if [[ "$STEPS" == *" ab "* ]]; then
  stamp "== product-path A/B against the previous main"
  OUT=$OUT scripts/gpu_product_ab.sh > "$OUT/ab_log.txt" 2>&1
  tail -n 30 "$OUT/ab_log.txt"
fi
stamp "done"
