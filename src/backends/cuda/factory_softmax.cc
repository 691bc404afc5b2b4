// Softmax / LogSoftmax: Kiln's row kernel over the innermost axis (one row per block; max, sum of
// exp, scale — float accumulation in every storage type). Opset < 13 coerces the input to 2-D
// at `axis` (ONNX Operators.md, Softmax-1/11), which is the same row split; opset >= 13 normalizes
// over one axis: the row kernel when every dim after it is 1, else one thread per column of the
// [outer, axis, inner] view (kernels_more.h launch_axis_softmax), which also runs Hardmax (every
// opset). Row-major layout (NHWC inputs reformatted).
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_more.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_softmax(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& s = ctx.shape(n.inputs[0]);
  const int r = static_cast<int>(s.size());
  int64_t axis = n.attr_int("axis", n.opset >= 13 ? -1 : 1);
  if (axis < 0) axis += r;
  if (r > 0 && (axis < 0 || axis >= r)) return invalid_argument(where + "axis out of range for rank " + std::to_string(r));
  int64_t inner = 1;
  if (n.opset >= 13)
    for (int i = static_cast<int>(axis) + 1; i < r; ++i) inner *= s[i];
  if (n.op == ir::OpKind::kHardmax || inner != 1) {
    const int64_t outer = dims_product(s, 0, static_cast<size_t>(std::max<int64_t>(axis, 0)));
    const int64_t len = shape_numel(s) / std::max<int64_t>(outer * inner, 1);
    const int kind = n.op == ir::OpKind::kSoftmax ? 0 : (n.op == ir::OpKind::kLogSoftmax ? 1 : 2);
    const StorageType t = ctx.storage();
    KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
    ctx.add_layer(make_kernel_layer(ir::op_name(n.op), std::string("kiln.axis_softmax ") + storage_name(t),
                                    [=](ExecState& st, const Layer& l) {
                                      return launch_axis_softmax(st.ptr(l.ins[0]), st.ptr(l.outs[0]), t, kind, outer,
                                                                 len, inner, st.stream);
                                    }),
                  n.name, {x}, {ctx.new_output(n)}, n.origin);
    return Status::Ok();
  }
  int64_t rows = 1;
  for (int i = 0; i < axis; ++i) rows *= s[i];
  const int64_t cols = shape_numel(s) / std::max<int64_t>(rows, 1);
  KILN_ASSIGN_OR_RETURN(int a, ctx.activation(n.inputs[0]));
  a = ctx.as_layout(a, false);
  const int out = ctx.new_value(ctx.graph().value(n.outputs[0]).name, s, ctx.storage(), false);
  ctx.add_layer(make_softmax_layer(rows, cols, ctx.storage(), n.op == ir::OpKind::kLogSoftmax), n.name, {a}, {out},
                n.origin);
  ctx.bind(n.outputs[0], out);
  return Status::Ok();
}

}  // namespace kiln::cuda
