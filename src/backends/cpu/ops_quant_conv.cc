// CPU reference kernel of QuantConv (ops.def; passes/fuse_qdq_conv.cc; docs/decisions/0078): the
// 8-bit convolution with integer accumulation, the same arithmetic as QuantLinear's
// (ops_fused_transformer.cc) over the conv's windows. X is quantized per tensor exactly as
// QuantizeLinear does (x / x_scale in float, round half to even, saturate; FP8: the nearest
// E4M3FN value), shifted by the zero point, and convolved with the stored 8-bit weight by the
// shared conv core (ops_nn_conv_core.h): INT8 in int32 (|q - zp| <= 255, |w| <= 128: exact for
// C/group * R * S < 2^16), FP8 in double (exact for E4M3 products). Padding contributes a shifted
// value of 0, i.e. a padded x of 0, as in the unfused graph. Then per output channel:
// acc * x_scale * w_scale[k] + bias[k] (+ residual) (Relu).
// 8-bit activations (docs/decisions/0081): an int8 / float8e4m3fn X is taken as the quantized
// codes q (not quantized again), and with y_scale / y_zero_point / y_type the float result is
// quantized as QuantizeLinear does (y / y_scale in float32, round half to even, + zero point,
// saturate to [-128, 127]; FP8: the nearest E4M3FN value, saturating at +-448) into Y of that type.
#include <algorithm>
#include <cmath>

#include "backends/cpu/ops_nn_conv_core.h"
#include "core/numerics.h"
#include "ir/pointwise_opcode.h"

namespace kiln::cpu {

namespace {

Status quant_conv(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(3));
  const Tensor& w = ctx.in(1);
  const Tensor& ws = ctx.in(2);
  const Tensor* b = ctx.input(3);
  const Tensor* res = ctx.input(4);
  const bool fp8 = w.dtype() == DataType::kFloat8E4M3FN;
  if (!fp8 && w.dtype() != DataType::kInt8)
    return ctx.fail(std::string("weight is ") + dtype_name(w.dtype()) + ", expected int8 or fp8e4m3fn");
  // X already quantized (its codes are q): int8 / float8e4m3fn of the weight's type.
  const bool x_q = ctx.in(0).dtype() == DataType::kInt8 || ctx.in(0).dtype() == DataType::kFloat8E4M3FN;
  if (x_q && ctx.in(0).dtype() != w.dtype())
    return ctx.fail(std::string("8-bit input X is ") + dtype_name(ctx.in(0).dtype()) + ", the weight " +
                    dtype_name(w.dtype()));
  Tensor x;
  if (x_q) {
    x = ctx.in(0);
  } else {
    KILN_ASSIGN_OR_RETURN(x, nn::to_compute(ctx, ctx.in(0)));
    if (x.dtype() != DataType::kFloat32) return ctx.unsupported_here("QuantConv computes float32 inputs only");
  }
  const std::string y_type = ctx.attr_string("y_type", "");
  const DataType yq = y_type.empty() ? DataType::kUndefined : dtype_from_name(y_type);
  if (!y_type.empty() && yq != DataType::kInt8 && yq != DataType::kFloat8E4M3FN)
    return ctx.fail("y_type '" + y_type + "', expected int8 or fp8e4m3fn");
  const float sy = ctx.attr_float("y_scale", 0.f);
  const int64_t zy = ctx.attr_int("y_zero_point", 0);
  if (yq != DataType::kUndefined) {
    if (!(sy > 0) || !std::isfinite(sy)) return ctx.fail("y_scale must be a finite number > 0");
    if (yq == DataType::kFloat8E4M3FN ? zy != 0 : (zy < -128 || zy > 127))
      return ctx.fail("y_zero_point " + std::to_string(zy) + " out of range");
  }
  const int64_t group = ctx.attr_int("group", 1);
  std::vector<int64_t> kernel;
  // check_conv_inputs reads only ranks and dims (the weight's dtype is not looked at).
  KILN_RETURN_IF_ERROR(nn::check_conv_inputs(ctx, x, w, false, group, &kernel));
  nn::SpatialGeom geom;
  KILN_RETURN_IF_ERROR(nn::make_geom(ctx, x.shape(), kernel, false, true, &geom));
  const int64_t n = x.dim(0), c = x.dim(1), m = w.dim(0), out_sz = geom.out_size();
  if (ws.dtype() != DataType::kFloat32 || ws.numel() != m) return ctx.fail("w_scale must be float32 [K]");
  if (b && (b->dtype() != DataType::kFloat32 || b->numel() != m)) return ctx.fail("bias must be float32 [K]");
  const float sx = ctx.attr_float("x_scale", 0.f);
  const int64_t zp = ctx.attr_int("x_zero_point", 0);
  const std::string act = ctx.attr_string("activation", "");
  if (!act.empty() && act != "Relu") return ctx.fail("activation '" + act + "', expected \"\" or Relu");
  if (!(sx > 0) || !std::isfinite(sx)) return ctx.fail("x_scale must be a finite number > 0");
  if (fp8 ? zp != 0 : (zp < -128 || zp > 127)) return ctx.fail("x_zero_point " + std::to_string(zp) + " out of range");
  Shape ys = {n, m};
  ys.insert(ys.end(), geom.out.begin(), geom.out.end());
  Tensor res_f;
  if (res) {
    KILN_ASSIGN_OR_RETURN(res_f, nn::to_compute(ctx, *res));
    if (res_f.shape() != ys || res_f.dtype() != DataType::kFloat32)
      return ctx.fail("residual " + shape_str(res->shape()) + " is not the conv output's shape " + shape_str(ys));
  }
  const float* xp = x_q ? nullptr : x.data<float>();
  const int64_t total = n * m * out_sz;
  std::vector<double> acc(static_cast<size_t>(total));
  if (fp8) {
    std::vector<double> q(static_cast<size_t>(x.numel())), wf(static_cast<size_t>(w.numel()));
    for (int64_t i = 0; i < x.numel(); ++i)
      q[i] = x_q ? fp8e4m3fn_to_float(x.data<uint8_t>()[i]) : ir::round_to_e4m3fn(xp[i] / sx);
    for (int64_t i = 0; i < w.numel(); ++i) wf[i] = fp8e4m3fn_to_float(w.data<uint8_t>()[i]);
    nn::conv_forward<double>(geom, n, c, m, group, q.data(), wf.data(), acc.data());
  } else {
    std::vector<int32_t> q(static_cast<size_t>(x.numel())), wi(static_cast<size_t>(w.numel())),
        a(static_cast<size_t>(total));
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (x_q) {
        q[i] = static_cast<int32_t>(x.data<int8_t>()[i]) - static_cast<int32_t>(zp);
        continue;
      }
      const float r = std::clamp(std::nearbyint(xp[i] / sx) + static_cast<float>(zp), -128.f, 127.f);
      q[i] = static_cast<int32_t>(r) - static_cast<int32_t>(zp);
    }
    for (int64_t i = 0; i < w.numel(); ++i) wi[i] = w.data<int8_t>()[i];
    nn::conv_forward<int32_t>(geom, n, c, m, group, q.data(), wi.data(), a.data());
    std::copy(a.begin(), a.end(), acc.begin());
  }
  Tensor y(DataType::kFloat32, ys);
  float* yp = y.data<float>();
  const float* wsp = ws.data<float>();
  const float* bp = b ? b->data<float>() : nullptr;
  const float* rp = res ? res_f.data<float>() : nullptr;
  for (int64_t i = 0; i < total; ++i) {
    const int64_t k = (i / out_sz) % m;
    float v = static_cast<float>(acc[i]) * (sx * wsp[k]) + (bp ? bp[k] : 0.f);
    if (rp) v += rp[i];
    yp[i] = act == "Relu" && v < 0.f ? 0.f : v;
  }
  if (yq != DataType::kUndefined) {
    // QuantizeLinear of the float result: the codes the next layer would have computed from it.
    Tensor out(yq, ys);
    for (int64_t i = 0; i < total; ++i) {
      if (yq == DataType::kFloat8E4M3FN) {
        out.data<uint8_t>()[i] = float_to_fp8e4m3fn(ir::round_to_e4m3fn(yp[i] / sy), /*saturate=*/true);
      } else {
        const float r = std::clamp(std::nearbyint(yp[i] / sy) + static_cast<float>(zy), -128.f, 127.f);
        out.data<int8_t>()[i] = static_cast<int8_t>(r);
      }
    }
    ctx.set_output(0, std::move(out));
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, nn::from_compute(y, x_q ? DataType::kFloat32 : ctx.in(0).dtype()));
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace

void register_quant_conv_kernel(KernelRegistry& r) { r.add(ir::OpKind::kQuantConv, quant_conv); }

}  // namespace kiln::cpu
