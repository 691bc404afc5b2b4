// QuantParams validation and summaries (kiln/quant_params.h): the one place that knows which
// combinations of granularity, axis, block size, scale shape and zero points ONNX Q/DQ allows.
#include "kiln/quant_params.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace kiln {
namespace {

// Zero-point range of an integer quantized type; {0, 0} for the float types.
std::pair<int64_t, int64_t> zero_point_range(DataType t) {
  switch (t) {
    case DataType::kInt8: return {-128, 127};
    case DataType::kUInt8: return {0, 255};
    case DataType::kInt16: return {-32768, 32767};
    case DataType::kUInt16: return {0, 65535};
    case DataType::kInt4: return {-8, 7};
    case DataType::kUInt4: return {0, 15};
    case DataType::kInt2: return {-2, 1};
    case DataType::kUInt2: return {0, 3};
    case DataType::kInt32: return {INT32_MIN, INT32_MAX};
    default: return {0, 0};
  }
}

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace

const char* quant_granularity_name(QuantGranularity g) {
  switch (g) {
    case QuantGranularity::kPerTensor: return "per_tensor";
    case QuantGranularity::kPerAxis: return "per_axis";
    case QuantGranularity::kPerBlock: return "per_block";
  }
  return "invalid";
}

bool quantizable_dtype(DataType t) {
  switch (t) {
    case DataType::kInt8: case DataType::kUInt8: case DataType::kInt16: case DataType::kUInt16:
    case DataType::kInt4: case DataType::kUInt4: case DataType::kFloat8E4M3FN: case DataType::kFloat8E5M2:
    case DataType::kFloat4E2M1: case DataType::kNF4: case DataType::kFloat8E4M3FNUZ: case DataType::kFloat8E5M2FNUZ:
    case DataType::kInt2: case DataType::kUInt2: case DataType::kInt32:
      return true;
    default:
      return false;
  }
}

bool quant_saturate_applies(DataType t) {
  return t == DataType::kFloat8E4M3FN || t == DataType::kFloat8E5M2 || t == DataType::kFloat8E4M3FNUZ ||
         t == DataType::kFloat8E5M2FNUZ;
}

Status validate_quant_params(const QuantParams& q, const std::vector<int64_t>* shape, const std::string& what) {
  auto bad = [&](const std::string& field, const std::string& why) {
    return invalid_argument(what + ": quantization " + field + ": " + why);
  };
  if (!quantizable_dtype(q.type))
    return bad("type", std::string("'") + dtype_name(q.type) +
                           "' is not a quantized type (int8, uint8, int16, uint16, int32, int4, uint4, int2, uint2, "
                           "fp8e4m3fn, fp8e5m2, fp8e4m3fnuz, fp8e5m2fnuz, fp4e2m1, nf4)");
  int64_t count = 1;
  for (int64_t d : q.scale_shape) {
    if (d < 1 || d > (int64_t{1} << 40) || count > (int64_t{1} << 40) / d)
      return bad("scale_shape", dims_str(q.scale_shape) + " has a dim < 1 or too many elements");
    count *= d;
  }
  const int64_t rank = static_cast<int64_t>(q.scale_shape.size());
  switch (q.granularity) {
    case QuantGranularity::kPerTensor:
      if (q.axis != 0 || q.block_size != 0 || rank != 0)
        return bad("per_tensor", "axis " + std::to_string(q.axis) + ", block_size " + std::to_string(q.block_size) +
                                     ", scale_shape " + dims_str(q.scale_shape) + " (expected 0, 0, [])");
      break;
    case QuantGranularity::kPerAxis:
      if (q.axis < 0 || q.block_size != 0 || rank != 1)
        return bad("per_axis", "axis " + std::to_string(q.axis) + ", block_size " + std::to_string(q.block_size) +
                                   ", scale_shape " + dims_str(q.scale_shape) + " (expected axis >= 0, 0, [n])");
      break;
    case QuantGranularity::kPerBlock:
      if (q.axis < 0 || q.axis >= std::max<int64_t>(rank, 1) || q.block_size < 1)
        return bad("per_block", "axis " + std::to_string(q.axis) + ", block_size " + std::to_string(q.block_size) +
                                    ", scale_shape " + dims_str(q.scale_shape) +
                                    " (expected axis inside the scale's rank, block_size >= 1)");
      break;
    default:
      return bad("granularity", "unknown code " + std::to_string(static_cast<int>(q.granularity)));
  }
  if (static_cast<int64_t>(q.scale.size()) != count)
    return bad("scale", std::to_string(q.scale.size()) + " values for scale_shape " + dims_str(q.scale_shape));
  for (size_t i = 0; i < q.scale.size(); ++i)
    if (!std::isfinite(q.scale[i]) || q.scale[i] <= 0)
      return bad("scale", "scale[" + std::to_string(i) + "] = " + std::to_string(q.scale[i]) + " (must be finite and > 0)");
  if (!q.zero_point.empty() && static_cast<int64_t>(q.zero_point.size()) != count)
    return bad("zero_point", std::to_string(q.zero_point.size()) + " values, expected 0 or " + std::to_string(count));
  const auto [lo, hi] = zero_point_range(q.type);
  for (size_t i = 0; i < q.zero_point.size(); ++i)
    if (q.zero_point[i] < lo || q.zero_point[i] > hi)
      return bad("zero_point", "zero_point[" + std::to_string(i) + "] = " + std::to_string(q.zero_point[i]) +
                                   " is outside " + dtype_name(q.type) + "'s [" + std::to_string(lo) + ", " +
                                   std::to_string(hi) + "]");
  if (!q.saturate && !quant_saturate_applies(q.type))
    return bad("saturate", std::string("false, but saturation applies to the float8 types only, not ") + dtype_name(q.type));
  if (!shape) return Status::Ok();
  const int64_t t_rank = static_cast<int64_t>(shape->size());
  auto dim = [&](int64_t a) { return (*shape)[static_cast<size_t>(a)]; };
  if (q.granularity == QuantGranularity::kPerAxis) {
    if (q.axis >= t_rank)
      return bad("axis", std::to_string(q.axis) + " is outside the tensor's rank " + std::to_string(t_rank));
    if (dim(q.axis) >= 0 && dim(q.axis) != q.scale_shape[0])
      return bad("scale_shape", dims_str(q.scale_shape) + ", but the tensor " + dims_str(*shape) + " has " +
                                    std::to_string(dim(q.axis)) + " along axis " + std::to_string(q.axis));
  } else if (q.granularity == QuantGranularity::kPerBlock) {
    if (rank != t_rank)
      return bad("scale_shape", dims_str(q.scale_shape) + " has rank " + std::to_string(rank) + ", the tensor " +
                                    dims_str(*shape) + " rank " + std::to_string(t_rank));
    for (int64_t a = 0; a < t_rank; ++a) {
      if (dim(a) < 0) continue;
      const int64_t want = a == q.axis ? (dim(a) + q.block_size - 1) / q.block_size : dim(a);
      if (q.scale_shape[static_cast<size_t>(a)] != std::max<int64_t>(want, 1))
        return bad("scale_shape", dims_str(q.scale_shape) + " does not fit the tensor " + dims_str(*shape) +
                                      " in blocks of " + std::to_string(q.block_size) + " along axis " +
                                      std::to_string(q.axis) + " (dim " + std::to_string(a) + " should be " +
                                      std::to_string(std::max<int64_t>(want, 1)) + ")");
    }
  }
  return Status::Ok();
}

StatusOr<QdqLayout> qdq_layout(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& scale_shape,
                               const std::vector<int64_t>* zp_shape, int64_t axis, int64_t block_size) {
  auto numel = [](const std::vector<int64_t>& d) {
    int64_t n = 1;
    for (int64_t v : d) n *= v;
    return n;
  };
  const int64_t s_count = numel(scale_shape);
  if (zp_shape && *zp_shape != scale_shape && !(numel(*zp_shape) == 1 && s_count == 1))
    return invalid_argument("zero point shape " + dims_str(*zp_shape) + " differs from the scale's " +
                            dims_str(scale_shape) + " (ONNX: y_zero_point must have y_scale's shape)");
  if (block_size < 0) return invalid_argument("block_size " + std::to_string(block_size) + " is negative");
  QdqLayout l;
  if (s_count == 1) return l;
  const int64_t rank = static_cast<int64_t>(x_shape.size());
  const std::string where = "scale " + dims_str(scale_shape) + " for x " + dims_str(x_shape) + " with axis " +
                            std::to_string(axis) + (block_size ? ", block_size " + std::to_string(block_size) : "");
  if (axis < -rank || axis >= rank)
    return invalid_argument(where + ": axis is outside x's rank " + std::to_string(rank) + " (range [-r, r-1])");
  l.axis = axis < 0 ? axis + rank : axis;
  const int64_t xa = x_shape[static_cast<size_t>(l.axis)];
  if (block_size == 0) {
    if (scale_shape.size() != 1)
      return invalid_argument(where + ": without block_size the scale must be a scalar (per tensor) or 1-D (per axis)");
    if (xa >= 0 && scale_shape[0] != xa)
      return invalid_argument(where + ": per-axis scale has " + std::to_string(scale_shape[0]) +
                              " values, x has " + std::to_string(xa) + " along the axis");
    l.granularity = QuantGranularity::kPerAxis;
    return l;
  }
  if (static_cast<int64_t>(scale_shape.size()) != rank)
    return invalid_argument(where + ": a blocked scale must have x's rank " + std::to_string(rank));
  for (int64_t a = 0; a < rank; ++a) {
    const int64_t xd = x_shape[static_cast<size_t>(a)];
    if (xd < 0) continue;
    const int64_t want = a == l.axis ? (xd + block_size - 1) / block_size : xd;
    if (scale_shape[static_cast<size_t>(a)] != want)
      return invalid_argument(where + ": blocked scale dim " + std::to_string(a) + " is " +
                              std::to_string(scale_shape[static_cast<size_t>(a)]) + ", expected " +
                              std::to_string(want) + (a == l.axis ? " (ceil(dim / block_size))" : " (x's dim)"));
  }
  l.granularity = QuantGranularity::kPerBlock;
  l.block_size = block_size;
  return l;
}

std::string quant_params_summary(const QuantParams& q) {
  std::string s = std::string(dtype_name(q.type)) + " " + quant_granularity_name(q.granularity);
  if (q.granularity != QuantGranularity::kPerTensor) s += " axis=" + std::to_string(q.axis);
  if (q.granularity == QuantGranularity::kPerBlock) s += " block=" + std::to_string(q.block_size);
  char b[96];
  if (q.scale.size() == 1) {
    std::snprintf(b, sizeof b, " scale=%g", q.scale[0]);
  } else if (!q.scale.empty()) {
    const auto [lo, hi] = std::minmax_element(q.scale.begin(), q.scale.end());
    std::snprintf(b, sizeof b, " scale%s %g..%g", dims_str(q.scale_shape).c_str(), *lo, *hi);
  } else {
    b[0] = '\0';
  }
  s += b;
  if (q.zero_point.size() == 1) {
    s += " zp=" + std::to_string(q.zero_point[0]);
  } else if (!q.zero_point.empty()) {
    const auto [lo, hi] = std::minmax_element(q.zero_point.begin(), q.zero_point.end());
    s += " zp " + std::to_string(*lo) + ".." + std::to_string(*hi);
  }
  if (!q.saturate) s += " no-saturate";
  return s;
}

}  // namespace kiln
