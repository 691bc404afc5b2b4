// Softmax / LogSoftmax: Kiln's row kernel over the innermost axis (one row per block; max, sum of
// exp, scale — float accumulation in every storage type). Opset < 13 coerces the input to 2-D
// at `axis` (ONNX Operators.md, Softmax-1/11), which is the same row split; opset >= 13 normalizes
// over one axis, supported when it is the innermost. Row-major layout (NHWC inputs reformatted).
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_softmax(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& s = ctx.shape(n.inputs[0]);
  const int r = static_cast<int>(s.size());
  int64_t axis = n.attr_int("axis", n.opset >= 13 ? -1 : 1);
  if (axis < 0) axis += r;
  if (n.opset >= 13 && axis != r - 1) return unsupported(where + "softmax over a non-innermost axis");
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
