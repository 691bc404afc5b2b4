// Range (ONNX Range-11): y[i] = start + i * delta, its length the output's at the build shapes.
// A Range of constants is folded before lowering; this runs the ones with a start or delta
// computed at run time (positions after a cache length), in the output's storage: int32 / int64
// exactly, float types computed in double and rounded (kernels_exact.h launch_range).
#include "backends/cuda/exact_layers.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_range(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.inputs.size() != 3) return invalid_argument(where + "expects start, limit and delta");
  for (ir::ValueId v : n.inputs)
    if (v == ir::kNoValue || shape_numel(ctx.shape(v)) != 1) return invalid_argument(where + "inputs must be scalars");
  const StorageType t = ctx.storage();
  KILN_ASSIGN_OR_RETURN(int start, ctx.operand_as(n.inputs[0], t));
  KILN_ASSIGN_OR_RETURN(int delta, ctx.operand_as(n.inputs[2], t));
  ctx.add_layer(make_range_layer(shape_numel(ctx.shape(n.outputs[0])), t), n.name, {start, delta}, {ctx.new_output(n)},
                n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
