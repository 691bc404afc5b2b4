// Views: Reshape, Flatten, Squeeze, Unsqueeze, Identity and (inference) Dropout change only the
// shape of a row-major tensor, so the output aliases the input's bytes — no layer, no copy. An
// NHWC input is reformatted to row-major first (the view's element order is NCHW's). The output
// keeps the input's storage type (integer token ids stay integers).
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_view(LowerContext& ctx, const ir::Node& n, const std::string&) {
  KILN_ASSIGN_OR_RETURN(int a, ctx.activation(n.inputs[0]));
  a = ctx.as_layout(a, false);
  const int out = ctx.new_value(ctx.graph().value(n.outputs[0]).name, ctx.shape(n.outputs[0]), ctx.value_type(a), false);
  ctx.alias(out, a);
  ctx.bind(n.outputs[0], out);
  return Status::Ok();
}

}  // namespace kiln::cuda
