// Conv / FusedConv beyond the 2-D constant-weight path of factory_conv.cc (1-D and 3-D, a runtime
// weight or bias, asymmetric pads) and ConvTranspose (1-D to 3-D: output_padding, output_shape,
// pads, auto_pad, groups, dilations), through cuDNN's legacy Nd API (gpu_layers.h
// make_conv_nd_layer; docs/decisions/0070). Row-major N, C, spatial... in the layer's storage;
// the geometry is the CPU reference's (backends/cpu/ops_nn.cc make_geom, ops_nn_conv.cc
// conv_transpose_geom; ONNX Operators.md Conv / ConvTranspose), and the output shape inferred for
// the graph must agree with it.
#include <algorithm>
#include <iterator>

#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {
namespace {

std::string dims_str(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "x" : "") + std::to_string(v[i]);
  return s;
}

// ConvTranspose's pads and output extent (the CPU reference's conv_transpose_geom): pads given,
// or from output_shape / SAME auto_pad (total padding split with the odd unit at the end for
// SAME_UPPER, at the beginning otherwise; a larger output_shape gives negative pads).
Status conv_transpose_geometry(const ir::Node& n, const Shape& x, const std::vector<int64_t>& kernel,
                               const std::string& where, WindowGeometry* g) {
  const int nd = static_cast<int>(x.size()) - 2;
  g->in.assign(x.begin() + 2, x.end());
  g->kernel = kernel;
  g->stride = n.attr_ints("strides", std::vector<int64_t>(nd, 1));
  g->dilation = n.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  const std::vector<int64_t> out_pad = n.attr_ints("output_padding", std::vector<int64_t>(nd, 0));
  const std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  std::vector<int64_t> out_shape = n.attr_ints("output_shape");
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (static_cast<int>(out_shape.size()) == nd + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  if (static_cast<int>(g->stride.size()) != nd || static_cast<int>(g->dilation.size()) != nd ||
      static_cast<int>(out_pad.size()) != nd || static_cast<int>(pads.size()) != 2 * nd ||
      (!out_shape.empty() && static_cast<int>(out_shape.size()) != nd))
    return invalid_argument(where + "strides/dilations/output_padding/pads/output_shape do not match the spatial rank");
  g->pad_begin.assign(nd, 0);
  g->pad_end.assign(nd, 0);
  g->out.assign(nd, 0);
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  for (int d = 0; d < nd; ++d) {
    if (g->stride[d] <= 0 || g->dilation[d] <= 0) return invalid_argument(where + "strides and dilations must be positive");
    const int64_t full = g->stride[d] * (g->in[d] - 1) + out_pad[d] + (g->kernel[d] - 1) * g->dilation[d] + 1;
    if (!out_shape.empty() || same) {
      g->out[d] = out_shape.empty() ? g->in[d] * g->stride[d] : out_shape[d];
      const int64_t total = full - g->out[d];
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      g->pad_begin[d] = auto_pad == "SAME_UPPER" ? half : total - half;
      g->pad_end[d] = total - g->pad_begin[d];
    } else {
      if (pads[d] < 0 || pads[d + nd] < 0) return invalid_argument(where + "pads must be non-negative");
      g->pad_begin[d] = pads[d];
      g->pad_end[d] = pads[d + nd];
      g->out[d] = full - pads[d] - pads[d + nd];
    }
    if (g->out[d] <= 0) return invalid_argument(where + "output would be empty");
  }
  return Status::Ok();
}

}  // namespace

Status window_geometry(const ir::Node& n, const Shape& x, const std::vector<int64_t>& kernel, bool ceil_mode,
                       bool has_dilations, const std::string& where, WindowGeometry* g) {
  const int nd = static_cast<int>(x.size()) - 2;
  if (nd < 1) return invalid_argument(where + "input rank " + std::to_string(x.size()) + ", expected at least 3");
  if (static_cast<int>(kernel.size()) != nd)
    return invalid_argument(where + "kernel has " + std::to_string(kernel.size()) + " dims, the input " +
                            std::to_string(nd) + " spatial dims");
  g->in.assign(x.begin() + 2, x.end());
  g->kernel = kernel;
  g->stride = n.attr_ints("strides", std::vector<int64_t>(nd, 1));
  g->dilation = has_dilations ? n.attr_ints("dilations", std::vector<int64_t>(nd, 1)) : std::vector<int64_t>(nd, 1);
  const std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  if (static_cast<int>(g->stride.size()) != nd || static_cast<int>(g->dilation.size()) != nd ||
      static_cast<int>(pads.size()) != 2 * nd)
    return invalid_argument(where + "strides/dilations/pads do not match the spatial rank");
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  g->pad_begin.assign(nd, 0);
  g->pad_end.assign(nd, 0);
  g->out.assign(nd, 0);
  for (int d = 0; d < nd; ++d) {
    if (g->kernel[d] <= 0 || g->stride[d] <= 0 || g->dilation[d] <= 0)
      return invalid_argument(where + "kernel_shape, strides and dilations must be positive");
    if (pads[d] < 0 || pads[d + nd] < 0) return invalid_argument(where + "pads must be non-negative");
    const int64_t in = g->in[d], s = g->stride[d], span = (g->kernel[d] - 1) * g->dilation[d] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g->out[d] = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (g->out[d] - 1) * s + span - in);
      g->pad_begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
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
        g->out[d] = (padded - span + s - 1) / s + 1;
        if ((g->out[d] - 1) * s >= in + pads[d]) --g->out[d];  // the last window starts in the input or left pad
      } else {
        g->out[d] = (padded - span) / s + 1;
      }
    } else {
      return invalid_argument(where + "unknown auto_pad '" + auto_pad + "'");
    }
    if (g->out[d] <= 0) return invalid_argument(where + "window larger than the padded input: output would be empty");
  }
  return Status::Ok();
}

Status lower_conv_nd(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const bool transpose = n.op == ir::OpKind::kConvTranspose;
  const Shape& x = ctx.shape(n.inputs[0]);
  const Shape& w = ctx.shape(n.inputs[1]);
  const Shape& y = ctx.shape(n.outputs[0]);
  if (x.size() < 3 || x.size() > 5)
    return unsupported(where + "convolution of a rank-" + std::to_string(x.size()) + " input (1 to 3 spatial dims)");
  if (w.size() != x.size()) return invalid_argument(where + "W " + shape_str(w) + " does not match X " + shape_str(x));
  const int64_t groups = n.attr_int("group", 1);
  if (groups <= 0 || x[1] % groups != 0) return invalid_argument(where + "group does not divide the input channels");
  const std::vector<int64_t> kernel(w.begin() + 2, w.end());
  if (n.has_attr("kernel_shape") && n.attr_ints("kernel_shape") != kernel)
    return invalid_argument(where + "kernel_shape does not match W " + shape_str(w));
  WindowGeometry g;
  if (transpose) {
    KILN_RETURN_IF_ERROR(conv_transpose_geometry(n, x, kernel, where, &g));
  } else {
    KILN_RETURN_IF_ERROR(window_geometry(n, x, kernel, false, true, where, &g));
  }
  ConvNdParams p;
  p.transpose = transpose;
  p.nd = static_cast<int>(x.size()) - 2;
  p.n = x[0];
  p.c = x[1];
  p.k = transpose ? w[1] * groups : w[0];
  if (transpose ? w[0] != x[1] : w[1] * groups != x[1])
    return invalid_argument(where + "W " + shape_str(w) + " does not match " + std::to_string(x[1]) +
                            " input channels, group " + std::to_string(groups));
  Shape want = {p.n, p.k};
  want.insert(want.end(), g.out.begin(), g.out.end());
  if (want != y)
    return invalid_argument(where + "output shape " + shape_str(y) + " differs from the geometry's " + shape_str(want));
  for (int d = 0; d < p.nd; ++d) {
    p.in[d] = g.in[d];
    p.out[d] = g.out[d];
    p.kernel[d] = g.kernel[d];
    p.stride[d] = g.stride[d];
    p.dilation[d] = g.dilation[d];
    p.pad_begin[d] = g.pad_begin[d];
    p.pad_end[d] = g.pad_end[d];
  }
  p.groups = groups;
  const bool fused = n.op == ir::OpKind::kFusedConv;
  p.has_residual = fused && n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue;
  const std::string act = fused ? n.attr_string("activation", "") : "";
  p.act = conv_activation_op(act);
  p.act_alpha = n.attr_float("act_alpha", 0);
  p.act_beta = n.attr_float("act_beta", 0);
  if (!act.empty() && p.act == PointwiseOp::kIdentity) return unsupported(where + "fused activation '" + act + "'");
  // The channel-padded copy of a graph input (GpuBuildOptions::pad_input_channels) has C rounded
  // up; only the 2-D path pads the weights to match.
  if (ctx.channel_padded(n.inputs[0])) return unsupported(where + "a channel-padded input outside the 2-D conv path");
  KILN_ASSIGN_OR_RETURN(int xa, ctx.row_major_operand(n.inputs[0]));
  KILN_ASSIGN_OR_RETURN(int wa, ctx.row_major_operand(n.inputs[1]));
  std::vector<int> ins = {xa, wa};
  const ir::ValueId bv = n.inputs.size() > 2 ? n.inputs[2] : ir::kNoValue;
  if (bv != ir::kNoValue) {
    if (shape_numel(ctx.shape(bv)) != p.k)
      return invalid_argument(where + "B " + shape_str(ctx.shape(bv)) + ", expected [" + std::to_string(p.k) + "]");
    KILN_ASSIGN_OR_RETURN(int ba, ctx.row_major_operand(bv));
    ins.push_back(ba);
    p.has_bias = true;
  } else if (p.has_residual || p.act != PointwiseOp::kIdentity) {
    // The epilogue kernel adds a bias: zeros.
    std::vector<float> zeros;
    KILN_ASSIGN_OR_RETURN(int ba, ctx.upload(n.name + ":bias", ir::kNoValue, static_cast<size_t>(p.k), {p.k}, false, [&] {
      zeros.assign(static_cast<size_t>(p.k), 0.f);
      return static_cast<const float*>(zeros.data());
    }));
    ins.push_back(ba);
    p.has_bias = true;
  } else {
    ins.push_back(-1);
  }
  if (p.has_residual) {
    KILN_ASSIGN_OR_RETURN(int ra, ctx.row_major_operand(n.inputs[3]));
    ins.push_back(ra);
  }
  auto layer = make_conv_nd_layer(p, ctx.storage(), ctx.options().precision.tf32);
  if (!layer.ok()) return Status(layer.status().code(), where + layer.status().message());
  ctx.add_layer(std::move(*layer), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
