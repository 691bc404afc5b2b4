// CPU reference kernels, nn family: registration of the sub-families (conv, gemm, pooling,
// normalization, softmax, linear algebra) and the helpers they share (ops_nn_common.h).
#include "backends/cpu/ops_nn_common.h"

#include <algorithm>

namespace kiln::cpu {
namespace nn {

StatusOr<Tensor> to_compute(const KernelContext& ctx, const Tensor& t) {
  if (t.dtype() == DataType::kFloat32 || t.dtype() == DataType::kFloat64) return t;
  if (is_half(t.dtype())) return cast_tensor(t, DataType::kFloat32);
  return ctx.unsupported_here(std::string("dtype ") + dtype_name(t.dtype()) + " is not supported here");
}

StatusOr<Tensor> from_compute(const Tensor& t, DataType to) {
  if (t.dtype() == to) return t;
  return cast_tensor(t, to);
}

Status make_geom(const KernelContext& ctx, const Shape& x_shape, std::vector<int64_t> kernel, bool ceil_mode,
                 bool has_dilations, SpatialGeom* g) {
  const int nd = static_cast<int>(x_shape.size()) - 2;
  if (nd < 1) return ctx.fail("input rank " + std::to_string(x_shape.size()) + ", expected at least 3");
  if (static_cast<int>(kernel.size()) != nd)
    return ctx.fail("kernel has " + std::to_string(kernel.size()) + " dims, input has " + std::to_string(nd) +
                    " spatial dims");
  g->in.assign(x_shape.begin() + 2, x_shape.end());
  g->kernel = std::move(kernel);
  g->stride = ctx.attr_ints("strides", std::vector<int64_t>(nd, 1));
  g->dilation = has_dilations ? ctx.attr_ints("dilations", std::vector<int64_t>(nd, 1)) : std::vector<int64_t>(nd, 1);
  std::vector<int64_t> pads = ctx.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  if (static_cast<int>(g->stride.size()) != nd) return ctx.fail("strides must have one value per spatial dim");
  if (static_cast<int>(g->dilation.size()) != nd) return ctx.fail("dilations must have one value per spatial dim");
  if (static_cast<int>(pads.size()) != 2 * nd) return ctx.fail("pads must have two values per spatial dim");
  std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  g->pad_begin.assign(nd, 0);
  g->pad_end.assign(nd, 0);
  g->out.assign(nd, 0);
  for (int d = 0; d < nd; ++d) {
    if (g->kernel[d] <= 0 || g->stride[d] <= 0 || g->dilation[d] <= 0)
      return ctx.fail("kernel_shape, strides and dilations must be positive");
    if (pads[d] < 0 || pads[d + nd] < 0) return ctx.fail("pads must be non-negative");
    const int64_t in = g->in[d], s = g->stride[d];
    const int64_t span = (g->kernel[d] - 1) * g->dilation[d] + 1;  // dilated window extent
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g->out[d] = ceil_div(in, s);
      const int64_t total = std::max<int64_t>(0, (g->out[d] - 1) * s + span - in);
      const int64_t small = total / 2;
      g->pad_begin[d] = auto_pad == "SAME_UPPER" ? small : total - small;
      g->pad_end[d] = total - g->pad_begin[d];
    } else if (auto_pad == "VALID") {
      g->out[d] = in >= span ? (in - span) / s + 1 : 0;
    } else if (auto_pad == "NOTSET" || auto_pad.empty()) {
      g->pad_begin[d] = pads[d];
      g->pad_end[d] = pads[d + nd];
      const int64_t padded = in + pads[d] + pads[d + nd];
      if (padded < span) {
        g->out[d] = 0;
      } else if (ceil_mode) {
        g->out[d] = ceil_div(padded - span, s) + 1;
        // The last window must start inside the input or the left padding (PyTorch, ORT).
        if ((g->out[d] - 1) * s >= in + pads[d]) --g->out[d];
      } else {
        g->out[d] = (padded - span) / s + 1;
      }
    } else {
      return ctx.fail("unknown auto_pad '" + auto_pad + "'");
    }
    if (g->out[d] <= 0) return ctx.fail("window larger than the padded input: output would be empty");
  }
  return Status::Ok();
}

}  // namespace nn

void register_nn_kernels(KernelRegistry& r) {
  nn::register_conv_kernels(r);
  nn::register_conv_int_kernels(r);
  nn::register_gemm_kernels(r);
  nn::register_pool_kernels(r);
  nn::register_norm_kernels(r);
  nn::register_softmax_kernels(r);
  nn::register_linalg_kernels(r);
}

}  // namespace kiln::cpu
