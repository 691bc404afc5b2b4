// CPU kernels for Conv and ConvTranspose (float32/float64 through OpenBLAS; float16/bfloat16
// computed in float32). ONNX "Operator Conv, since version 1" (11: auto_pad defaults, 22: bf16)
// and "Operator ConvTranspose, since version 1" (output_padding, output_shape, groups).
#include <algorithm>

#include "backends/cpu/ops_nn_conv_core.h"

namespace kiln::cpu::nn {

// Validates X / W ranks and channel counts shared by Conv and ConvTranspose and returns the
// kernel's spatial extent (kernel_shape attribute, else W's trailing dims).
Status check_conv_inputs(const KernelContext& ctx, const Tensor& x, const Tensor& w, bool transpose, int64_t group,
                         std::vector<int64_t>* kernel) {
  if (x.rank() < 3) return ctx.fail("X rank " + std::to_string(x.rank()) + ", expected at least 3");
  if (w.rank() != x.rank())
    return ctx.fail("W rank " + std::to_string(w.rank()) + " differs from X rank " + std::to_string(x.rank()));
  if (group <= 0) return ctx.fail("group must be positive");
  const int64_t c = x.dim(1);
  if (c % group != 0) return ctx.fail("input channels " + std::to_string(c) + " not divisible by group");
  if (!transpose) {
    if (w.dim(1) * group != c)
      return ctx.fail("W " + shape_str(w.shape()) + " does not match " + std::to_string(c) + " input channels, group " +
                      std::to_string(group));
    if (w.dim(0) % group != 0) return ctx.fail("output channels not divisible by group");
  } else if (w.dim(0) != c) {
    return ctx.fail("W " + shape_str(w.shape()) + " does not match " + std::to_string(c) + " input channels");
  }
  kernel->assign(w.shape().begin() + 2, w.shape().end());
  if (ctx.has_attr("kernel_shape") && ctx.attr_ints("kernel_shape") != *kernel)
    return ctx.fail("kernel_shape attribute does not match W " + shape_str(w.shape()));
  for (int64_t k : *kernel)
    if (k <= 0) return ctx.fail("W has an empty kernel dim");
  return Status::Ok();
}

namespace {

// Adds bias[ch] to every spatial element of y [n, m, spatial].
template <typename T>
void add_bias(T* y, const T* bias, int64_t n, int64_t m, int64_t spatial) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < m; ++ch) {
      T* p = y + (b * m + ch) * spatial;
      const T v = bias[ch];
      for (int64_t i = 0; i < spatial; ++i) p[i] += v;
    }
}

Status check_bias(const KernelContext& ctx, const Tensor* b, int64_t m, DataType dt) {
  if (!b) return Status::Ok();
  if (b->rank() != 1 || b->dim(0) != m)
    return ctx.fail("B " + shape_str(b->shape()) + ", expected [" + std::to_string(m) + "]");
  if (b->dtype() != dt) return ctx.fail("B dtype differs from X");
  return Status::Ok();
}

// The part Conv and ConvTranspose share once the geometry is known: bias check, compute dtype
// (float32/float64; fp16/bf16 computed in float32), the forward pass, the bias, the cast back.
// `forward(T{}, x, w, y)` fills y ([N, M, out...]) from x and w in the compute dtype; when it
// overwrites every element (`overwrites`; not ConvTranspose's scatter-add), y may be the buffer
// the interpreter offers (KernelContext::output_buffer).
template <typename Forward>
Status run_with_bias(KernelContext& ctx, const Tensor& x0, const Tensor& w0, const SpatialGeom& g, int64_t m,
                     bool overwrites, Forward&& forward) {
  const int64_t n = x0.dim(0);
  KILN_RETURN_IF_ERROR(check_bias(ctx, ctx.input(2), m, x0.dtype()));
  KILN_ASSIGN_OR_RETURN(Tensor x, to_compute(ctx, x0));
  KILN_ASSIGN_OR_RETURN(Tensor w, to_compute(ctx, w0));
  Tensor bias;
  if (ctx.input(2)) {
    KILN_ASSIGN_OR_RETURN(bias, to_compute(ctx, *ctx.input(2)));
  }
  Shape out_shape{n, m};
  out_shape.insert(out_shape.end(), g.out.begin(), g.out.end());
  // float32/float64 compute in the output dtype, so y can be the offered buffer itself.
  Tensor y = overwrites && x.dtype() == x0.dtype() ? ctx.output_buffer(0, x.dtype(), out_shape)
                                                   : Tensor(x.dtype(), out_shape);
  auto run = [&](auto tag) -> Status {
    using T = decltype(tag);
    forward(tag, x, w, y);
    if (bias.defined()) add_bias<T>(y.data<T>(), bias.data<T>(), n, m, g.out_size());
    return Status::Ok();
  };
  KILN_RETURN_IF_ERROR(x.dtype() == DataType::kFloat32 ? run(float{}) : run(double{}));
  KILN_ASSIGN_OR_RETURN(Tensor out, from_compute(y, x0.dtype()));
  ctx.set_output(0, out);
  return Status::Ok();
}

Status conv(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& x0 = ctx.in(0);
  const Tensor& w0 = ctx.in(1);
  const int64_t group = ctx.attr_int("group", 1);
  std::vector<int64_t> kernel;
  if (x0.dtype() != w0.dtype()) return ctx.fail("X and W dtypes differ");
  KILN_RETURN_IF_ERROR(check_conv_inputs(ctx, x0, w0, false, group, &kernel));
  SpatialGeom g;
  KILN_RETURN_IF_ERROR(make_geom(ctx, x0.shape(), kernel, false, true, &g));
  return run_with_bias(ctx, x0, w0, g, w0.dim(0), true, [&](auto tag, const auto& x, const auto& w, auto& y) {
    using T = decltype(tag);
    conv_forward<T>(g, x0.dim(0), x0.dim(1), w0.dim(0), group, x.template data<T>(), w.template data<T>(),
                    y.template data<T>());
  });
}

// ConvTranspose geometry: output extent from pads (out = s*(in-1) + output_padding +
// (k-1)*d + 1 - pads), or pads from output_shape / SAME auto_pad (total padding split with
// the odd unit at the end for SAME_UPPER, at the beginning otherwise), per the spec.
Status conv_transpose_geom(const KernelContext& ctx, const Tensor& x, std::vector<int64_t> kernel, SpatialGeom* g) {
  const int nd = x.rank() - 2;
  g->in.assign(x.shape().begin() + 2, x.shape().end());
  g->kernel = std::move(kernel);
  g->stride = ctx.attr_ints("strides", std::vector<int64_t>(nd, 1));
  g->dilation = ctx.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  std::vector<int64_t> out_pad = ctx.attr_ints("output_padding", std::vector<int64_t>(nd, 0));
  std::vector<int64_t> pads = ctx.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  std::vector<int64_t> out_shape = ctx.attr_ints("output_shape");
  const std::string auto_pad = ctx.attr_string("auto_pad", "NOTSET");
  // Some exporters give output_shape with the N and C dims: keep the spatial ones.
  if (static_cast<int>(out_shape.size()) == nd + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (static_cast<int>(g->stride.size()) != nd || static_cast<int>(g->dilation.size()) != nd ||
      static_cast<int>(out_pad.size()) != nd || static_cast<int>(pads.size()) != 2 * nd ||
      (!out_shape.empty() && static_cast<int>(out_shape.size()) != nd))
    return ctx.fail("strides/dilations/output_padding/pads/output_shape do not match the spatial rank");
  g->pad_begin.assign(nd, 0);
  g->pad_end.assign(nd, 0);
  g->out.assign(nd, 0);
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  for (int d = 0; d < nd; ++d) {
    if (g->stride[d] <= 0 || g->dilation[d] <= 0) return ctx.fail("strides and dilations must be positive");
    const int64_t full = g->stride[d] * (g->in[d] - 1) + out_pad[d] + (g->kernel[d] - 1) * g->dilation[d] + 1;
    if (!out_shape.empty() || same) {
      g->out[d] = out_shape.empty() ? g->in[d] * g->stride[d] : out_shape[d];
      // A larger output_shape than the natural one gives negative padding: floor division
      // (as in the spec's reference code) puts the extra outputs at the end.
      const int64_t total = full - g->out[d];
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      if (auto_pad == "SAME_UPPER") {
        g->pad_begin[d] = half;
        g->pad_end[d] = total - half;
      } else {
        g->pad_begin[d] = total - half;
        g->pad_end[d] = half;
      }
    } else {
      if (pads[d] < 0 || pads[d + nd] < 0) return ctx.fail("pads must be non-negative");
      g->pad_begin[d] = pads[d];
      g->pad_end[d] = pads[d + nd];
      g->out[d] = full - pads[d] - pads[d + nd];
    }
    if (g->out[d] <= 0) return ctx.fail("output would be empty");
  }
  return Status::Ok();
}

Status conv_transpose(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& x0 = ctx.in(0);
  const Tensor& w0 = ctx.in(1);
  const int64_t group = ctx.attr_int("group", 1);
  std::vector<int64_t> kernel;
  if (x0.dtype() != w0.dtype()) return ctx.fail("X and W dtypes differ");
  KILN_RETURN_IF_ERROR(check_conv_inputs(ctx, x0, w0, true, group, &kernel));
  SpatialGeom g;
  KILN_RETURN_IF_ERROR(conv_transpose_geom(ctx, x0, kernel, &g));
  const int64_t m = w0.dim(1) * group;
  return run_with_bias(ctx, x0, w0, g, m, false, [&](auto tag, const auto& x, const auto& w, auto& y) {
    using T = decltype(tag);
    conv_transpose_forward<T>(g, x0.dim(0), x0.dim(1), m, group, x.template data<T>(), w.template data<T>(),
                              y.template data<T>());
  });
}

}  // namespace

void register_conv_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kConv, conv);
  r.add(ir::OpKind::kConvTranspose, conv_transpose);
}

}  // namespace kiln::cpu::nn
