// What precisions a build may give its layers: one PrecisionConfig (TensorRT's precision
// BuilderFlags kFP16/kBF16/kTF32/kINT8/kFP8 plus per-layer constraints) that the builder maps
// BuilderConfig's flags onto, that the plan records and that the engine loads with. Which
// precision each layer gets is decided once, by passes::assign_precisions, and written on the
// layer; the backends read that decision. docs/decisions/0033-precision-as-data.md.
#pragma once

#include <string>
#include <vector>

#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln {

// One per-layer precision constraint: the layers whose name, or the name of any ONNX node fused
// into them, matches `pattern` ('*' matches any run of characters, e.g. "/layer4/*") compute
// and store their outputs in `precision`: kFloat32 (TF32 math unless PrecisionConfig::tf32 is
// off), kFloat16 or kBFloat16. On CUDA a constrained layer keeps its precision whatever the
// plan's --fp16/--bf16 say, and convert layers appear where neighbours differ; the CPU target
// runs everything in float32 and ignores it. docs/decisions/0013-layer-precisions.md.
struct LayerPrecision {
  std::string pattern;
  DataType precision = DataType::kFloat32;
};

struct PrecisionConfig {
  // Precisions the builder may give layers no constraint names (the graph's own dtypes are always
  // allowed). With both fp16 and bf16, fp16 is chosen (float_precision()).
  bool fp16 = false;
  bool bf16 = false;
  bool tf32 = true;  // TF32 tensor-core math for float32 GEMM/conv on CUDA (TensorRT's default)
  // INT8 / FP8 layers come from QuantizeLinear / DequantizeLinear nodes: the model's own
  // (explicit quantization) or those a calibration inserted (kiln/quantize.h; the builder does
  // that when BuilderConfig::calibration names data or a cache). check() refuses int8 / fp8 for a
  // graph without Q/DQ (quantized_graph false) instead of building float layers that look quantized.
  bool int8 = false;
  bool fp8 = false;
  bool quantized_graph = false;  // the graph holds Q/DQ nodes (set by the builder)
  // Per-layer constraints, read left to right, a later match overriding an earlier one; each
  // pattern must match at least one layer (passes::assign_precisions checks).
  std::vector<LayerPrecision> layer_precisions;

  // The precision of float layers no constraint names: kFloat16 if fp16, else kBFloat16 if
  // bf16, else kFloat32.
  DataType float_precision() const;
  // InvalidArgument naming the flag when the combination cannot be built: int8 / fp8 without
  // Q/DQ nodes (see above). The rules are checked against the graph by passes::assign_precisions.
  Status check() const;
};

}  // namespace kiln
