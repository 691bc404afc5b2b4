// Pooling: MaxPool / AveragePool (2-D windows, symmetric pads, no dilation) and the global pools,
// in NCHW or NHWC as the plan lays the layer out. Tactics (gpu_layers.h make_pool_layer): cuDNN's
// pooling and Kiln's pool kernel; a ceil_mode output larger than cuDNN's floor runs Kiln's kernel,
// whose windows skip positions past the input (exact for MaxPool and for AveragePool without
// count_include_pad; ONNX Operators.md MaxPool/AveragePool).
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_pool(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& x = ctx.shape(n.inputs[0]);
  const Shape& y = ctx.shape(n.outputs[0]);
  if (x.size() != 4) return unsupported(where + "only 2-D pooling");
  if (n.outputs.size() > 1 && n.outputs[1] != ir::kNoValue) return unsupported(where + "MaxPool Indices output");
  PoolParams p{};
  p.max = n.op == ir::OpKind::kMaxPool || n.op == ir::OpKind::kGlobalMaxPool;
  p.n = x[0]; p.c = x[1]; p.h = x[2]; p.w = x[3]; p.oh = y[2]; p.ow = y[3];
  if (n.op == ir::OpKind::kGlobalAveragePool || n.op == ir::OpKind::kGlobalMaxPool) {
    p.kh = x[2]; p.kw = x[3]; p.stride_h = p.stride_w = 1;
  } else {
    const auto k = n.attr_ints("kernel_shape");
    const auto s = n.attr_ints("strides", {1, 1});
    const auto d = n.attr_ints("dilations", {1, 1});
    if (k.size() != 2 || d != std::vector<int64_t>{1, 1}) return unsupported(where + "pooling window/dilations");
    if (!symmetric_pads(n, x, k, s, d, &p.pad_h, &p.pad_w)) return unsupported(where + "asymmetric padding");
    p.kh = k[0]; p.kw = k[1]; p.stride_h = s[0]; p.stride_w = s[1];
    p.count_include_pad = n.attr_int("count_include_pad", 0) != 0;
    const int64_t fh = (x[2] + 2 * p.pad_h - k[0]) / s[0] + 1, fw = (x[3] + 2 * p.pad_w - k[1]) / s[1] + 1;
    if (fh != y[2] || fw != y[3]) {
      if (y[2] < fh || y[3] < fw || y[2] > fh + 1 || y[3] > fw + 1 || (!p.max && p.count_include_pad))
        return unsupported(where + "ceil_mode output size " + std::to_string(y[2]) + "x" + std::to_string(y[3]) +
                           (p.max ? "" : " with count_include_pad"));
      p.ceil_output = true;
    }
  }
  const StorageType st = ctx.storage();
  const bool nhwc = ctx.nhwc(n, st != StorageType::kF32);
  KILN_ASSIGN_OR_RETURN(int xa, ctx.activation(n.inputs[0]));
  xa = ctx.as_layout(xa, nhwc);
  const int out = ctx.new_value(ctx.graph().value(n.outputs[0]).name, y, st, nhwc);
  KILN_ASSIGN_OR_RETURN(auto layer, make_pool_layer(p, st, nhwc));
  ctx.add_layer(std::move(layer), n.name, {xa}, {out}, n.origin);
  ctx.bind(n.outputs[0], out);
  return Status::Ok();
}

}  // namespace kiln::cuda
