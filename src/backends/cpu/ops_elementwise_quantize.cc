// CPU reference kernels: dtype conversions. Cast / CastLike (element conversion is
// cast_tensor's: float->int truncates, fp8 honours `saturate`), QuantizeLinear and
// DequantizeLinear (per-tensor or per-axis scale/zero point) and DynamicQuantizeLinear.
// Quantization rounds half to even and saturates to the output type's range (Operator
// QuantizeLinear, since version 10/13/19).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/ops_elementwise_broadcast.h"
#include "core/onnx_dtype.h"

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
  auto y = cast_tensor(x, to, ctx.attr_int("saturate", 1) != 0);
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

// How a scale/zero-point pair maps onto x: one value, or one per index of `axis`.
struct QuantLayout {
  int64_t outer = 1, channels = 1, inner = 1;  // x viewed as [outer, channels, inner]
};

StatusOr<QuantLayout> quant_layout(const KernelContext& ctx, const Tensor& x, const Tensor& scale,
                                   const Tensor* zp) {
  if (zp && zp->shape() != scale.shape())
    return invalid_argument("zero point " + shape_str(zp->shape()) + " and scale " + shape_str(scale.shape()) +
                            " shapes differ");
  if (ctx.attr_int("block_size", 0) != 0) return unsupported("blocked quantization (block_size) is not supported");
  QuantLayout l;
  l.inner = x.numel();
  if (scale.numel() == 1) return l;
  if (scale.rank() != 1) return invalid_argument("scale must be a scalar or 1-D, got " + shape_str(scale.shape()));
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < -x.rank() || axis >= x.rank())
    return invalid_argument("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(x.rank()));
  if (axis < 0) axis += x.rank();
  if (x.dim(static_cast<int>(axis)) != scale.numel())
    return invalid_argument("scale has " + std::to_string(scale.numel()) + " values, x dim " +
                            std::to_string(axis) + " is " + std::to_string(x.dim(static_cast<int>(axis))));
  l.outer = 1;
  for (int d = 0; d < axis; ++d) l.outer *= x.dim(d);
  l.channels = scale.numel();
  l.inner = 1;
  for (int d = static_cast<int>(axis) + 1; d < x.rank(); ++d) l.inner *= x.dim(d);
  return l;
}

// Integer range of a quantized type (4-bit types included).
void int_range(DataType t, double* lo, double* hi) {
  switch (t) {
    case DataType::kInt4: *lo = -8; *hi = 7; return;
    case DataType::kUInt4: *lo = 0; *hi = 15; return;
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

// Operator QuantizeLinear: y = saturate(round_half_even(x / scale) + zero_point). The output
// dtype is the zero point's (uint8 without one; opset 21's output_dtype when given).
Status quantize_linear(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& x = ctx.in(0);
  const Tensor& scale = ctx.in(1);
  const Tensor* zp = ctx.input(2);
  DataType qt = zp ? zp->dtype() : DataType::kUInt8;
  if (!zp && ctx.attr_int("output_dtype", 0) != 0) qt = dtype_from_onnx(ctx.attr_int("output_dtype", 0));
  const bool q_float = qt == DataType::kFloat8E4M3FN || qt == DataType::kFloat8E5M2;
  if (!q_float && !(dtype_is_integer(qt) && dtype_bits(qt) <= 32))
    return ctx.unsupported_here(std::string("quantized dtype ") + dtype_name(qt) + " is not supported");
  auto layout = quant_layout(ctx, x, scale, zp);
  if (!layout.ok()) return ctx.fail(layout.status().message());
  const QuantLayout l = *layout;
  double lo = 0, hi = 0;
  if (!q_float) int_range(qt, &lo, &hi);
  const bool saturate = ctx.attr_int("saturate", 1) != 0;
  // Per-channel scale and zero point, widened once.
  std::vector<double> s(l.channels), z(l.channels, 0.0);
  for (int64_t c = 0; c < l.channels; ++c) {
    s[c] = load_as_double(scale.dtype(), scale.raw(), c);
    if (zp) z[c] = load_as_double(zp->dtype(), zp->raw(), c);
  }
  Tensor y(qt, x.shape());
  Status st = dispatch_numeric(x.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    // float32 inputs divide in float32 (so ties round as the reference's); others in double.
    using W = std::conditional_t<std::is_same_v<compute_t<T>, float>, float, double>;
    const T* px = x.data<T>();
    auto run = [&](auto store) {
      int64_t i = 0;
      for (int64_t o = 0; o < l.outer; ++o)
        for (int64_t c = 0; c < l.channels; ++c) {
          const W sc = static_cast<W>(s[c]);
          const double zc = z[c];
          for (int64_t k = 0; k < l.inner; ++k, ++i) store(i, static_cast<W>(load_c(px[i])) / sc, zc);
        }
    };
    if (q_float) {
      run([&](int64_t i, W v, double zc) { store_from_double(qt, y.raw(), i, static_cast<double>(v) + zc, saturate); });
    } else if (qt == DataType::kUInt8 || qt == DataType::kInt8) {
      // The common case, stored directly.
      auto store8 = [&](auto* py) {
        using Q = std::remove_pointer_t<decltype(py)>;
        run([&](int64_t i, W v, double zc) {
          const double q = std::nearbyint(static_cast<double>(v)) + zc;
          py[i] = static_cast<Q>(std::clamp(std::isnan(q) ? 0.0 : q, lo, hi));
        });
      };
      if (qt == DataType::kUInt8) store8(y.data<uint8_t>());
      else store8(y.data<int8_t>());
    } else {
      run([&](int64_t i, W v, double zc) {
        const double q = std::nearbyint(static_cast<double>(v)) + zc;
        store_from_int64(qt, y.raw(), i, static_cast<int64_t>(std::clamp(std::isnan(q) ? 0.0 : q, lo, hi)));
      });
    }
    return Status::Ok();
  });
  if (!st.ok()) return ctx.unsupported_here(st.message());
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

// Operator DequantizeLinear: y = (x - zero_point) * scale, in the scale's dtype (float32
// before opset 19). x may be int32 (with no or a zero zero point), fp8 or 4-bit.
Status dequantize_linear(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& x = ctx.in(0);
  const Tensor& scale = ctx.in(1);
  const Tensor* zp = ctx.input(2);
  if (zp && zp->dtype() != x.dtype())
    return ctx.fail(std::string("zero point dtype ") + dtype_name(zp->dtype()) + " differs from x dtype " +
                    dtype_name(x.dtype()));
  if (!dtype_is_float(scale.dtype()) || dtype_bits(scale.dtype()) < 16)
    return ctx.unsupported_here(std::string("scale dtype ") + dtype_name(scale.dtype()) + " is not supported");
  auto layout = quant_layout(ctx, x, scale, zp);
  if (!layout.ok()) return ctx.fail(layout.status().message());
  const QuantLayout l = *layout;
  std::vector<float> s(l.channels), z(l.channels, 0.0f);
  for (int64_t c = 0; c < l.channels; ++c) {
    s[c] = static_cast<float>(load_as_double(scale.dtype(), scale.raw(), c));
    if (zp) z[c] = static_cast<float>(load_as_double(zp->dtype(), zp->raw(), c));
  }
  // Computed in float32, then stored in the scale's dtype.
  Tensor yf(DataType::kFloat32, x.shape());
  float* py = yf.data<float>();
  auto run = [&](auto load) {
    int64_t i = 0;
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t c = 0; c < l.channels; ++c)
        for (int64_t k = 0; k < l.inner; ++k, ++i) py[i] = (load(i) - z[c]) * s[c];
  };
  switch (x.dtype()) {
    case DataType::kUInt8: run([p = x.data<uint8_t>()](int64_t i) { return static_cast<float>(p[i]); }); break;
    case DataType::kInt8: run([p = x.data<int8_t>()](int64_t i) { return static_cast<float>(p[i]); }); break;
    case DataType::kInt32: run([p = x.data<int32_t>()](int64_t i) { return static_cast<float>(p[i]); }); break;
    case DataType::kUInt16: case DataType::kInt16: case DataType::kFloat8E4M3FN: case DataType::kFloat8E5M2:
    case DataType::kInt4: case DataType::kUInt4:
      run([&x](int64_t i) { return static_cast<float>(load_as_double(x.dtype(), x.raw(), i)); });
      break;
    default:
      return ctx.unsupported_here(std::string("x dtype ") + dtype_name(x.dtype()) + " is not supported");
  }
  if (scale.dtype() == DataType::kFloat32) {
    ctx.set_output(0, std::move(yf));
    return Status::Ok();
  }
  auto y = cast_tensor(yf, scale.dtype());
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
