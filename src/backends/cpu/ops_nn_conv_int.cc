// CPU kernels for ConvInteger and QLinearConv: exact int32 accumulation over zero-point-shifted
// 8-bit operands (padding contributes the zero point, i.e. 0 after the shift), per ONNX
// "Operator ConvInteger, since version 10" and "Operator QLinearConv, since version 10":
// y = saturate(round_half_even((acc + B) * x_scale * w_scale[m] / y_scale) + y_zero_point).
#include <algorithm>
#include <cmath>

#include "backends/cpu/ops_nn_conv_core.h"

namespace kiln::cpu::nn {
namespace {

// Shared front half: shapes, geometry and the int32 accumulator [N, M, out...].
Status int_conv(const KernelContext& ctx, const Tensor& x0, const Tensor* xzp, const Tensor& w0, const Tensor* wzp,
                SpatialGeom* g, Tensor* acc) {
  const int64_t group = ctx.attr_int("group", 1);
  std::vector<int64_t> kernel;
  KILN_RETURN_IF_ERROR(check_conv_inputs(ctx, x0, w0, false, group, &kernel));
  KILN_RETURN_IF_ERROR(make_geom(ctx, x0.shape(), kernel, false, true, g));
  if (xzp && xzp->numel() != 1) return ctx.unsupported_here("x_zero_point must be a scalar");
  Tensor x, w;
  KILN_RETURN_IF_ERROR(shift_to_int32(ctx, x0, xzp, -1, "X", &x));
  KILN_RETURN_IF_ERROR(shift_to_int32(ctx, w0, wzp, 0, "W", &w));
  const int64_t n = x0.dim(0), c = x0.dim(1), m = w0.dim(0);
  Shape out_shape{n, m};
  out_shape.insert(out_shape.end(), g->out.begin(), g->out.end());
  *acc = Tensor(DataType::kInt32, out_shape);
  conv_forward<int32_t>(*g, n, c, m, group, x.data<int32_t>(), w.data<int32_t>(), acc->data<int32_t>());
  return Status::Ok();
}

Status conv_integer(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  SpatialGeom g;
  Tensor acc;
  KILN_RETURN_IF_ERROR(int_conv(ctx, ctx.in(0), ctx.input(2), ctx.in(1), ctx.input(3), &g, &acc));
  ctx.set_output(0, acc);
  return Status::Ok();
}

Status qlinear_conv(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(8));
  const Tensor& yzp = ctx.in(7);
  if (!is_8bit(yzp.dtype()) || yzp.numel() != 1) return ctx.unsupported_here("y_zero_point must be an 8-bit scalar");
  SpatialGeom g;
  Tensor acc;
  KILN_RETURN_IF_ERROR(int_conv(ctx, ctx.in(0), &ctx.in(2), ctx.in(3), &ctx.in(5), &g, &acc));
  const int64_t m = acc.dim(1), spatial = g.out_size();
  std::vector<float> sx, sw, sy;
  KILN_RETURN_IF_ERROR(scale_values(ctx, ctx.in(1), 1, "x_scale", &sx));
  KILN_RETURN_IF_ERROR(scale_values(ctx, ctx.in(4), m, "w_scale", &sw));
  KILN_RETURN_IF_ERROR(scale_values(ctx, ctx.in(6), 1, "y_scale", &sy));
  const Tensor* bias = ctx.input(8);
  if (bias && (bias->dtype() != DataType::kInt32 || bias->numel() != m))
    return ctx.fail("B must be int32 with one value per output channel");
  const double zy = static_cast<double>(load_as_int64(yzp.dtype(), yzp.raw(), 0));
  const double lo = yzp.dtype() == DataType::kUInt8 ? 0 : -128, hi = yzp.dtype() == DataType::kUInt8 ? 255 : 127;
  Tensor y(yzp.dtype(), acc.shape());
  const int32_t* a = acc.data<int32_t>();
  for (int64_t i = 0; i < acc.numel(); ++i) {
    const int64_t ch = (i / spatial) % m;
    const int32_t v = a[i] + (bias ? bias->data<int32_t>()[ch] : 0);
    const float scale = sx[0] * sw[sw.size() == 1 ? 0 : ch] / sy[0];
    const double q = std::nearbyint(static_cast<float>(v) * scale) + zy;
    store_from_double(y.dtype(), y.raw(), i, std::clamp(q, lo, hi));
  }
  ctx.set_output(0, y);
  return Status::Ok();
}

}  // namespace

void register_conv_int_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kConvInteger, conv_integer);
  r.add(ir::OpKind::kQLinearConv, qlinear_conv);
}

}  // namespace kiln::cpu::nn
