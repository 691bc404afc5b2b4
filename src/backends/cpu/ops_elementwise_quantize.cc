// CPU reference kernels: dtype conversions. Cast / CastLike (element conversion is
// cast_tensor's: float->int truncates, fp8 honours `saturate`, float8e8m0 `round_mode`),
// QuantizeLinear and DequantizeLinear (per-tensor, per-axis and blocked scale/zero point, every
// quantized type of opset 25) and DynamicQuantizeLinear. Quantization rounds half to even and
// saturates to the output type's range (Operator QuantizeLinear, versions 10 to 25).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/ops_elementwise_broadcast.h"
#include "core/onnx_dtype.h"
#include "kiln/quant_params.h"

namespace kiln::cpu {
namespace {

// Cast-1 named the target type with a string attribute (TensorProto.DataType names).
DataType dtype_from_onnx_name(const std::string& s) {
  static const std::pair<const char*, int> kNames[] = {
      {"FLOAT", 1},  {"UINT8", 2},   {"INT8", 3},    {"UINT16", 4}, {"INT16", 5},   {"INT32", 6},
      {"INT64", 7},  {"STRING", 8},  {"BOOL", 9},    {"FLOAT16", 10}, {"DOUBLE", 11}, {"UINT32", 12},
      {"UINT64", 13}, {"BFLOAT16", 16}};
  for (const auto& [name, code] : kNames)
    if (s == name) return dtype_from_onnx(code);
  return DataType::kUndefined;
}

Status cast_to(KernelContext& ctx, DataType to) {
  const Tensor& x = ctx.in(0);
  if (to == DataType::kUndefined) return ctx.fail("unknown target dtype");
  if (to == DataType::kString || x.dtype() == DataType::kString)
    return ctx.unsupported_here(std::string("cast from ") + dtype_name(x.dtype()) + " to " + dtype_name(to) +
                                " is not supported (string tensors)");
  // Opset 19's saturate (default 1) only affects fp8 targets.
  const bool saturate = ctx.attr_int("saturate", 1) != 0;
  if (to == DataType::kFloat8E8M0 && x.dtype() != to) {
    // Cast-24's round_mode (default "up") picks the power of two (numerics.h, E8M0Rounding).
    E8M0Rounding mode;
    const std::string rm = ctx.attr_string("round_mode", "up");
    if (!e8m0_rounding_from_name(rm, &mode)) return ctx.fail("round_mode '" + rm + "' is not up, down or nearest");
    Tensor y(to, x.shape());
    for (int64_t i = 0; i < x.numel(); ++i)
      y.data<uint8_t>()[i] = double_to_fp8e8m0(load_as_double(x.dtype(), x.raw(), i), saturate, mode);
    ctx.set_output(0, std::move(y));
    return Status::Ok();
  }
  auto y = cast_tensor(x, to, saturate);
  if (!y.ok()) return ctx.unsupported_here(y.status().message());
  ctx.set_output(0, std::move(y).value());
  return Status::Ok();
}

// Operator Cast, since version 6 (`to` is a TensorProto.DataType code; a string before 6).
Status cast(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  auto it = ctx.node().attrs.find("to");
  if (it == ctx.node().attrs.end()) return ctx.fail("missing attribute 'to'");
  const DataType to = it->second.kind == ir::Attribute::Kind::kString ? dtype_from_onnx_name(it->second.s)
                                                                      : dtype_from_onnx(it->second.i);
  return cast_to(ctx, to);
}

// Operator CastLike, since version 15: the target dtype is input 1's.
Status cast_like(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  return cast_to(ctx, ctx.in(1).dtype());
}

// The scale/zero-point index of each x element: x viewed as [outer, dim(axis), inner]; per
// tensor everything is one row (index 0), per axis the index is the position d along the axis,
// per block it is (o * S + d / block_size) * inner + k with S = ceil(dim(axis) / block_size).
struct QuantIndex {
  QuantGranularity granularity = QuantGranularity::kPerTensor;
  int64_t outer = 1, dim = 1, inner = 1, block = 1, blocks = 1;
};

StatusOr<QuantIndex> quant_index(const KernelContext& ctx, const Tensor& x, const Tensor& scale, const Tensor* zp) {
  const Shape zs = zp ? zp->shape() : Shape{};
  auto l = qdq_layout(x.shape(), scale.shape(), zp ? &zs : nullptr, ctx.attr_int("axis", 1), ctx.attr_int("block_size", 0));
  if (!l.ok()) return l.status();
  QuantIndex q;
  q.granularity = l->granularity;
  if (q.granularity == QuantGranularity::kPerTensor) {
    q.inner = x.numel();
    return q;
  }
  const int axis = static_cast<int>(l->axis);
  for (int d = 0; d < axis; ++d) q.outer *= x.dim(d);
  q.dim = x.dim(axis);
  for (int d = axis + 1; d < x.rank(); ++d) q.inner *= x.dim(d);
  if (q.granularity == QuantGranularity::kPerBlock) {
    q.block = l->block_size;
    q.blocks = scale.dim(axis);
  }
  return q;
}

// Calls f(i, sidx) for every element i of x (row-major) with its scale/zero-point index.
template <typename F>
void for_each_quant(const QuantIndex& q, F&& f) {
  int64_t i = 0;
  for (int64_t o = 0; o < q.outer; ++o)
    for (int64_t d = 0; d < q.dim; ++d) {
      switch (q.granularity) {
        case QuantGranularity::kPerTensor:
          for (int64_t k = 0; k < q.inner; ++k, ++i) f(i, int64_t{0});
          break;
        case QuantGranularity::kPerAxis:
          for (int64_t k = 0; k < q.inner; ++k, ++i) f(i, d);
          break;
        case QuantGranularity::kPerBlock: {
          const int64_t row = (o * q.blocks + d / q.block) * q.inner;
          for (int64_t k = 0; k < q.inner; ++k, ++i) f(i, row + k);
          break;
        }
      }
    }
}

// Integer range of a quantized integer type (4- and 2-bit types included).
void int_range(DataType t, double* lo, double* hi) {
  switch (t) {
    case DataType::kInt4: *lo = -8; *hi = 7; return;
    case DataType::kUInt4: *lo = 0; *hi = 15; return;
    case DataType::kInt2: *lo = -2; *hi = 1; return;
    case DataType::kUInt2: *lo = 0; *hi = 3; return;
    default: break;
  }
  const int bits = dtype_bits(t);
  if (dtype_is_signed(t)) {
    *lo = -std::ldexp(1.0, bits - 1);
    *hi = std::ldexp(1.0, bits - 1) - 1;
  } else {
    *lo = 0;
    *hi = std::ldexp(1.0, bits) - 1;
  }
}

bool is_quant_float(DataType t) {
  return t == DataType::kFloat8E4M3FN || t == DataType::kFloat8E5M2 || t == DataType::kFloat8E4M3FNUZ ||
         t == DataType::kFloat8E5M2FNUZ || t == DataType::kFloat4E2M1;
}

// ONNX QuantizeLinear's T3 / DequantizeLinear's T1 (opset 25), int32 aside.
bool is_quant_type(DataType t) {
  switch (t) {
    case DataType::kInt8: case DataType::kUInt8: case DataType::kInt16: case DataType::kUInt16:
    case DataType::kInt4: case DataType::kUInt4: case DataType::kInt2: case DataType::kUInt2:
      return true;
    default: return is_quant_float(t);
  }
}

// Rounds v to dtype `t`'s precision (float32, float16, bfloat16; anything else: unchanged, the
// computation stays in double).
double round_to(DataType t, double v) {
  switch (t) {
    case DataType::kFloat32: return static_cast<float>(v);
    case DataType::kFloat16: return fp16_to_float(double_to_fp16(v));
    case DataType::kBFloat16: return bf16_to_float(double_to_bf16(v));
    default: return v;
  }
}

// The float types' zero points carry no information (ONNX: "usually not used ... the type still
// determines the quantization type"); ONNX's reference refuses non-zero float8 ones. Kiln refuses
// every non-zero float zero point, so a QuantParams never needs one.
Status check_float_zero_point(const KernelContext& ctx, const Tensor* zp) {
  if (!zp || !is_quant_float(zp->dtype())) return Status::Ok();
  for (int64_t i = 0; i < zp->numel(); ++i)
    if (load_as_double(zp->dtype(), zp->raw(), i) != 0.0)
      return ctx.fail(std::string("zero point ") + std::to_string(i) + " of type " + dtype_name(zp->dtype()) +
                      " is not zero (float quantized types take no zero point)");
  return Status::Ok();
}

// Operator QuantizeLinear (opsets 10, 13, 19, 21, 23, 24, 25):
//   y = saturate(round_half_even(x / scale) + zero_point)       (integer types: clamp to range)
//   y = cast(x / scale, saturate)                                (float8 / float4 types)
// The output type is output_dtype (opset 21+; must equal the zero point's type when both are
// given), else the zero point's type, else uint8. The division is done in `precision` (opset
// 23+, a TensorProto float type; held as the node attribute "quantize_precision", see
// onnx/importer.cc) when set, else in the scale's type when that is float32/16/bf16 (x converted
// to it), else (int32, float8e8m0 scales) exactly. Scale/zero-point shapes: qdq_layout
// (kiln/quant_params.h).
Status quantize_linear(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& x = ctx.in(0);
  const Tensor& scale = ctx.in(1);
  const Tensor* zp = ctx.input(2);
  DataType qt = zp ? zp->dtype() : DataType::kUInt8;
  if (const int64_t od = ctx.attr_int("output_dtype", 0); od != 0) {
    const DataType ot = dtype_from_onnx(static_cast<int>(od));
    if (zp && ot != zp->dtype())
      return ctx.fail("output_dtype " + std::to_string(od) + " (" + dtype_name(ot) + ") differs from the zero point's type " +
                      dtype_name(zp->dtype()));
    qt = ot;
  }
  if (!is_quant_type(qt))
    return ctx.unsupported_here(std::string("quantized type ") + dtype_name(qt) +
                                " is not one QuantizeLinear produces (int8/uint8/int16/uint16/int4/uint4/int2/uint2, "
                                "the four float8 types, float4e2m1)");
  if (x.dtype() == DataType::kString || scale.dtype() == DataType::kString || scale.dtype() == DataType::kBool)
    return ctx.fail(std::string("x ") + dtype_name(x.dtype()) + " / scale " + dtype_name(scale.dtype()) + " is not numeric");
  DataType div = scale.dtype();
  if (const int64_t p = ctx.attr_int("quantize_precision", 0); p != 0) {
    div = dtype_from_onnx(static_cast<int>(p));
    if (div != DataType::kFloat32 && div != DataType::kFloat16 && div != DataType::kBFloat16 && div != DataType::kFloat64)
      return ctx.fail("precision " + std::to_string(p) + " is not a float type (float, float16, bfloat16, double)");
  }
  KILN_RETURN_IF_ERROR(check_float_zero_point(ctx, zp));
  auto index = quant_index(ctx, x, scale, zp);
  if (!index.ok()) return ctx.fail(index.status().message());
  const bool q_float = is_quant_float(qt);
  double lo = 0, hi = 0;
  if (!q_float) int_range(qt, &lo, &hi);
  const bool saturate = ctx.attr_int("saturate", 1) != 0;
  std::vector<double> s(scale.numel()), z(scale.numel(), 0.0);
  for (int64_t c = 0; c < scale.numel(); ++c) {
    s[c] = round_to(div, load_as_double(scale.dtype(), scale.raw(), c));
    if (zp && !q_float) z[c] = load_as_double(zp->dtype(), zp->raw(), c);
  }
  Tensor y(qt, x.shape());
  // x / scale in `div`'s precision: both operands and the quotient rounded to it (a double
  // quotient of two floats rounds correctly to float32, float16 and bfloat16).
  auto quotient = [&](int64_t i, int64_t c) { return round_to(div, round_to(div, load_as_double(x.dtype(), x.raw(), i)) / s[c]); };
  auto to_int = [&](double v, int64_t c) {
    const double q = std::nearbyint(v) + z[c];  // default rounding mode: half to even
    return std::clamp(std::isnan(q) ? 0.0 : q, lo, hi);
  };
  if (q_float) {
    for_each_quant(*index, [&](int64_t i, int64_t c) { store_from_double(qt, y.raw(), i, quotient(i, c), saturate); });
  } else if (x.dtype() == DataType::kFloat32 && div == DataType::kFloat32 && (qt == DataType::kInt8 || qt == DataType::kUInt8)) {
    // The common case: float32 division, stored directly.
    const float* px = x.data<float>();
    auto run = [&](auto* py) {
      using Q = std::remove_pointer_t<decltype(py)>;
      for_each_quant(*index, [&](int64_t i, int64_t c) {
        py[i] = static_cast<Q>(to_int(px[i] / static_cast<float>(s[c]), c));
      });
    };
    if (qt == DataType::kUInt8) run(y.data<uint8_t>());
    else run(y.data<int8_t>());
  } else {
    for_each_quant(*index, [&](int64_t i, int64_t c) {
      store_from_int64(qt, y.raw(), i, static_cast<int64_t>(to_int(quotient(i, c), c)));
    });
  }
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

// Operator DequantizeLinear (opsets 10, 13, 19, 21, 23, 24, 25): y = (x - zero_point) * scale,
// computed in float32 (ONNX's reference) and stored as output_dtype (opset 23+), else the scale's
// type (opset 19+; a float8e8m0 scale needs output_dtype), else float32. x: int8/uint8/int16/
// uint16/int32/int4/uint4/int2/uint2, the four float8 types or float4e2m1; the zero point has x's
// type (zero for the float types). Scale/zero-point shapes: qdq_layout (kiln/quant_params.h).
Status dequantize_linear(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& x = ctx.in(0);
  const Tensor& scale = ctx.in(1);
  const Tensor* zp = ctx.input(2);
  if (!is_quant_type(x.dtype()) && x.dtype() != DataType::kInt32)
    return ctx.unsupported_here(std::string("x dtype ") + dtype_name(x.dtype()) + " is not a quantized type");
  if (zp && zp->dtype() != x.dtype())
    return ctx.fail(std::string("zero point dtype ") + dtype_name(zp->dtype()) + " differs from x dtype " +
                    dtype_name(x.dtype()));
  const bool scale_float = scale.dtype() == DataType::kFloat32 || scale.dtype() == DataType::kFloat16 ||
                           scale.dtype() == DataType::kBFloat16;
  if (!scale_float && scale.dtype() != DataType::kFloat8E8M0)
    return ctx.unsupported_here(std::string("scale dtype ") + dtype_name(scale.dtype()) +
                                " is not float, float16, bfloat16 or float8e8m0");
  DataType out = ctx.opset() >= 19 ? scale.dtype() : DataType::kFloat32;
  if (const int64_t od = ctx.attr_int("output_dtype", 0); od != 0) {
    out = dtype_from_onnx(static_cast<int>(od));
  } else if (!scale_float) {
    return ctx.fail("the scale is float8e8m0, so output_dtype is required (the output is float, float16 or bfloat16)");
  }
  if (out != DataType::kFloat32 && out != DataType::kFloat16 && out != DataType::kBFloat16)
    return ctx.fail(std::string("output dtype ") + dtype_name(out) + " is not float, float16 or bfloat16");
  KILN_RETURN_IF_ERROR(check_float_zero_point(ctx, zp));
  auto index = quant_index(ctx, x, scale, zp);
  if (!index.ok()) return ctx.fail(index.status().message());
  std::vector<float> s(scale.numel()), z(scale.numel(), 0.0f);
  for (int64_t c = 0; c < scale.numel(); ++c) {
    s[c] = static_cast<float>(load_as_double(scale.dtype(), scale.raw(), c));
    if (zp) z[c] = static_cast<float>(load_as_double(zp->dtype(), zp->raw(), c));
  }
  Tensor yf(DataType::kFloat32, x.shape());
  float* py = yf.data<float>();
  switch (x.dtype()) {
    case DataType::kUInt8:
      for_each_quant(*index, [&, p = x.data<uint8_t>()](int64_t i, int64_t c) { py[i] = (p[i] - z[c]) * s[c]; });
      break;
    case DataType::kInt8:
      for_each_quant(*index, [&, p = x.data<int8_t>()](int64_t i, int64_t c) { py[i] = (p[i] - z[c]) * s[c]; });
      break;
    default:
      for_each_quant(*index, [&](int64_t i, int64_t c) {
        py[i] = (static_cast<float>(load_as_double(x.dtype(), x.raw(), i)) - z[c]) * s[c];
      });
      break;
  }
  if (out == DataType::kFloat32) {
    ctx.set_output(0, std::move(yf));
    return Status::Ok();
  }
  auto y = cast_tensor(yf, out);
  if (!y.ok()) return ctx.unsupported_here(y.status().message());
  ctx.set_output(0, std::move(y).value());
  return Status::Ok();
}

// Operator DynamicQuantizeLinear, since version 11 (uint8):
//   x_min = min(0, min(x)), x_max = max(0, max(x)), y_scale = (x_max - x_min) / 255,
//   y_zero_point = saturate(round(0 - x_min / y_scale)), y = saturate(round(x / y_scale) + y_zero_point).
// All-zero (or empty) x gives scale 0: then zero point and y are 0 instead of 0/0.
Status dynamic_quantize_linear(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x = ctx.in(0);
  if (x.dtype() != DataType::kFloat32)
    return ctx.unsupported_here(std::string("x dtype ") + dtype_name(x.dtype()) + " (float32 only)");
  const float* px = x.data<float>();
  float mn = 0.0f, mx = 0.0f;
  for (int64_t i = 0; i < x.numel(); ++i) {
    mn = std::min(mn, px[i]);
    mx = std::max(mx, px[i]);
  }
  const float scale = (mx - mn) / 255.0f;
  Tensor y(DataType::kUInt8, x.shape());
  uint8_t* py = y.data<uint8_t>();
  float zp = 0.0f;
  if (scale > 0.0f && std::isfinite(scale)) {
    zp = std::clamp(std::nearbyint(0.0f - mn / scale), 0.0f, 255.0f);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float q = std::nearbyint(px[i] / scale) + zp;
      py[i] = static_cast<uint8_t>(std::clamp(std::isnan(q) ? 0.0f : q, 0.0f, 255.0f));
    }
  }
  ctx.set_output(0, std::move(y));
  if (ctx.output_wanted(1)) ctx.set_output(1, Tensor::scalar<float>(DataType::kFloat32, scale));
  if (ctx.output_wanted(2)) ctx.set_output(2, Tensor::scalar<uint8_t>(DataType::kUInt8, static_cast<uint8_t>(zp)));
  return Status::Ok();
}

}  // namespace

void register_elementwise_quantize_kernels(KernelRegistry& r) {
  using ir::OpKind;
  r.add(OpKind::kCast, cast);
  r.add(OpKind::kCastLike, cast_like);
  r.add(OpKind::kQuantizeLinear, quantize_linear);
  r.add(OpKind::kDequantizeLinear, dequantize_linear);
  r.add(OpKind::kDynamicQuantizeLinear, dynamic_quantize_linear);
}

}  // namespace kiln::cpu
