// Pooling: MaxPool / AveragePool and the global pools. 2-D windows with symmetric pads and no
// dilation, without MaxPool's Indices, run as before in NCHW or NHWC as the plan lays the layer
// out. Tactics (gpu_layers.h make_pool_layer): cuDNN's pooling and Kiln's pool kernel; a ceil_mode
// output larger than cuDNN's floor runs Kiln's kernel, whose windows skip positions past the input
// (exact for MaxPool and for AveragePool without count_include_pad; ONNX Operators.md
// MaxPool/AveragePool). Everything else (1-D and 3-D windows, asymmetric or SAME pads, dilations,
// count_include_pad with ceil_mode, MaxPool's int64 Indices, row- or column-major) runs Kiln's
// N-D pool kernel on the row-major tensor (kernels_nn.h launch_pool_nd; the CPU reference's
// geometry and divisors, docs/decisions/0070).
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_nn.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

namespace {

// MaxPool / AveragePool of 1 to 3 spatial dims through launch_pool_nd (ins: x; outs: y and, when
// wanted, MaxPool's Indices as int64).
Status lower_pool_nd(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& x = ctx.shape(n.inputs[0]);
  const Shape& y = ctx.shape(n.outputs[0]);
  if (x.size() < 3 || x.size() > 5)
    return unsupported(where + "pooling of a rank-" + std::to_string(x.size()) + " input (1 to 3 spatial dims)");
  const bool max = n.op == ir::OpKind::kMaxPool || n.op == ir::OpKind::kGlobalMaxPool;
  const bool global = n.op == ir::OpKind::kGlobalAveragePool || n.op == ir::OpKind::kGlobalMaxPool;
  const int nd = static_cast<int>(x.size()) - 2;
  WindowGeometry g;
  if (global) {
    g.in.assign(x.begin() + 2, x.end());
    g.kernel = g.in;
    g.stride = g.dilation = std::vector<int64_t>(nd, 1);
    g.pad_begin = g.pad_end = std::vector<int64_t>(nd, 0);
    g.out = std::vector<int64_t>(nd, 1);
  } else {
    // Dilations read at every opset, as the CPU reference reads them (ops_nn_pool.cc).
    KILN_RETURN_IF_ERROR(
        window_geometry(n, x, n.attr_ints("kernel_shape"), n.attr_int("ceil_mode", 0) != 0, true, where, &g));
  }
  Shape want = {x[0], x[1]};
  want.insert(want.end(), g.out.begin(), g.out.end());
  if (want != y)
    return invalid_argument(where + "output shape " + shape_str(y) + " differs from the geometry's " + shape_str(want));
  WindowGeom wg;
  for (int i = 0; i < nd; ++i) {
    const int j = 3 - nd + i;
    wg.in[j] = g.in[i];
    wg.out[j] = g.out[i];
    wg.kernel[j] = g.kernel[i];
    wg.stride[j] = g.stride[i];
    wg.dilation[j] = g.dilation[i];
    wg.pad_begin[j] = g.pad_begin[i];
    wg.pad_end[j] = g.pad_end[i];
  }
  const bool count_pad = !max && n.attr_int("count_include_pad", 0) != 0;
  const bool indices = n.outputs.size() > 1 && n.outputs[1] != ir::kNoValue;
  const bool col_major = n.attr_int("storage_order", 0) != 0;  // MaxPool: Indices column-major
  if (indices && !max) return invalid_argument(where + "only MaxPool has an Indices output");
  const StorageType t = ctx.storage();
  const int64_t planes = x[0] * x[1];
  KILN_ASSIGN_OR_RETURN(int xa, ctx.row_major_operand(n.inputs[0]));
  std::vector<int> outs = {ctx.new_output(n)};
  if (indices) {
    const int iv = ctx.new_value(ctx.graph().value(n.outputs[1]).name, ctx.shape(n.outputs[1]), StorageType::kI64, false);
    ctx.bind(n.outputs[1], iv);
    outs.push_back(iv);
  }
  const std::string tactic = std::string("kiln.pool_nd ") + storage_name(t) + (indices ? " +indices" : "");
  auto layer = make_kernel_layer(ir::op_name(n.op), tactic, [=](ExecState& s, const Layer& l) {
    int64_t* idx = indices ? static_cast<int64_t*>(s.ptr(l.outs[1])) : nullptr;
    return launch_pool_nd(s.ptr(l.ins[0]), s.ptr(l.outs[0]), idx, t, planes, wg, max, count_pad, col_major, s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, {xa}, outs, n.origin);
  return Status::Ok();
}

}  // namespace

Status lower_pool(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& x = ctx.shape(n.inputs[0]);
  const Shape& y = ctx.shape(n.outputs[0]);
  // Integer storage (8- / 16-bit MaxPool, docs/decisions/0076) is row-major: the N-D kernel.
  if (x.size() != 4 || (n.outputs.size() > 1 && n.outputs[1] != ir::kNoValue) || !storage_is_float(ctx.storage()))
    return lower_pool_nd(ctx, n, where);
  PoolParams p{};
  p.max = n.op == ir::OpKind::kMaxPool || n.op == ir::OpKind::kGlobalMaxPool;
  p.n = x[0]; p.c = x[1]; p.h = x[2]; p.w = x[3]; p.oh = y[2]; p.ow = y[3];
  if (n.op == ir::OpKind::kGlobalAveragePool || n.op == ir::OpKind::kGlobalMaxPool) {
    p.kh = x[2]; p.kw = x[3]; p.stride_h = p.stride_w = 1;
  } else {
    const auto k = n.attr_ints("kernel_shape");
    const auto s = n.attr_ints("strides", {1, 1});
    const auto d = n.attr_ints("dilations", {1, 1});
    if (k.size() != 2 || d != std::vector<int64_t>{1, 1}) return lower_pool_nd(ctx, n, where);
    if (!symmetric_pads(n, x, k, s, d, &p.pad_h, &p.pad_w)) return lower_pool_nd(ctx, n, where);
    p.kh = k[0]; p.kw = k[1]; p.stride_h = s[0]; p.stride_w = s[1];
    p.count_include_pad = n.attr_int("count_include_pad", 0) != 0;
    const int64_t fh = (x[2] + 2 * p.pad_h - k[0]) / s[0] + 1, fw = (x[3] + 2 * p.pad_w - k[1]) / s[1] + 1;
    if (fh != y[2] || fw != y[3]) {
      if (y[2] < fh || y[3] < fw || y[2] > fh + 1 || y[3] > fw + 1 || (!p.max && p.count_include_pad))
        return lower_pool_nd(ctx, n, where);
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
