// Quantization parameters of a tensor, as ONNX QuantizeLinear / DequantizeLinear define them
// (opsets 10, 13, 19, 21, 23-25): x = (q - zero_point) * scale, with one scale (and zero point) for
//   the whole tensor (per tensor, opset 10),
//   each index along `axis` (per axis, opset 13: scale is 1-D of length dim(axis)), or
//   each block of `block_size` consecutive elements along `axis` (per block, opset 21: scale has
//   the tensor's rank, its dims equal the tensor's except dim(axis) = ceil(dim / block_size)).
// A graph value carries its dtype plus optional QuantParams; plans store them (graph section) and
// `kiln inspect` prints them. docs/decisions/0033-precision-as-data.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln {

enum class QuantGranularity : uint8_t { kPerTensor = 0, kPerAxis = 1, kPerBlock = 2 };
const char* quant_granularity_name(QuantGranularity g);  // "per_tensor", "per_axis", "per_block"

struct QuantParams {
  // The quantized element type (ONNX: y_zero_point's type): int8, uint8, int16, uint16, int4,
  // uint4, int2, uint2, fp8e4m3fn, fp8e5m2, fp8e4m3fnuz, fp8e5m2fnuz, fp4e2m1, Kiln's nf4, or
  // int32 (DequantizeLinear's input only: a bias quantized with scale S_x * S_w); see
  // quantizable_dtype. Scales given as float16/bfloat16/float8e8m0 are stored as float32 (exact).
  DataType type = DataType::kInt8;
  QuantGranularity granularity = QuantGranularity::kPerTensor;
  int64_t axis = 0;        // per axis / per block: the quantized axis, in [0, rank); 0 per tensor
  int64_t block_size = 0;  // per block: elements per block along `axis` (> 0); 0 otherwise
  // Shape of the scale tensor: [] per tensor, [dim(axis)] per axis, the tensor's shape with
  // dim(axis) = ceil(dim(axis) / block_size) per block. Every dim >= 1.
  std::vector<int64_t> scale_shape;
  std::vector<float> scale;          // row-major, one per element of scale_shape; finite and > 0
  std::vector<int32_t> zero_point;   // empty (all zero) or one per scale, within `type`'s range;
                                     // always zero for the float types (ONNX: only the type counts)
  bool saturate = true;              // float8 only (opset 19; the four fp8 types): out-of-range
                                     // values clamp, else inf/NaN

  bool operator==(const QuantParams&) const = default;
};

// The element types a QuantParams may name.
bool quantizable_dtype(DataType t);
// Whether `saturate` means anything for quantized type `t` (the four float8 types).
bool quant_saturate_applies(DataType t);

// Checks every field and their consistency (granularity vs axis/block_size/scale_shape, counts,
// scales finite and > 0, zero points in range). `shape` is the quantized tensor's shape when its
// rank is known (dims < 0: unknown), else null; with it, the axis must be inside the rank and the
// scale shape must match the known dims. Errors are InvalidArgument naming `what` and the field.
Status validate_quant_params(const QuantParams& q, const std::vector<int64_t>* shape, const std::string& what);

// How an ONNX QuantizeLinear / DequantizeLinear node's scale (and zero point) map onto its x:
// QuantizeLinear-25 / DequantizeLinear-25 (ONNX Operators.md, "three supported quantization
// granularities"), as ONNX's reference (onnx/reference/ops/_quant_utils.py reshape_input) reads them:
//   - a scale with one element (a scalar, or [1], [1,1], ...) is per tensor, whatever block_size;
//   - block_size == 0: a 1-D scale of length dim(axis) is per axis;
//   - block_size > 0: a scale of x's rank, equal to x's shape except ceil(dim(axis) / block_size)
//     along axis, is per block.
// The zero point, when present, has the scale's shape (or both have one element: a scalar scale
// beside a [1] zero point is per tensor). `axis` may be negative (counts from the back; ONNX
// range [-r, r-1]). Unknown x dims (< 0) are not checked. Errors (InvalidArgument) give the
// shapes, axis and block size; callers prefix the node.
struct QdqLayout {
  QuantGranularity granularity = QuantGranularity::kPerTensor;
  int64_t axis = 0;        // normalized into [0, rank(x)); 0 per tensor
  int64_t block_size = 0;  // > 0 per block only
};
StatusOr<QdqLayout> qdq_layout(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& scale_shape,
                               const std::vector<int64_t>* zero_point_shape, int64_t axis, int64_t block_size);

// "int8 per_axis axis=0 scale[64] 0.0123..0.25 zp[64] -3..4" (text dumps, kiln inspect).
std::string quant_params_summary(const QuantParams& q);

}  // namespace kiln
