// Gather (ONNX Operators.md Gather, any axis) of a row-major float input with int32 / int64
// indices: constant indices are normalized at build (negative ones counted from the end, out of
// range an error naming the node) and uploaded as an int64 weight (not packed in the plan); indices
// from an integer activation (token ids: embedding lookups) are read on the device, out-of-range
// ones giving zeros (gpu_ops.h plan_gather, launch_gather_runtime). Output in the storage type.
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_gather(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.inputs.size() < 2) return invalid_argument(where + "indices are required");
  KILN_ASSIGN_OR_RETURN(GatherPlan p, plan_gather(n, ctx.graph(), ctx.shape(n.inputs[0]), ctx.shape(n.inputs[1]),
                                                  ctx.dtype(n.inputs[1])));
  const int elem_bytes = static_cast<int>(storage_bytes(ctx.storage()));
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  if (p.runtime) {  // indices from an integer activation (plan_gather checked the dtype): token ids
    KILN_ASSIGN_OR_RETURN(int idx, ctx.activation(n.inputs[1]));
    ctx.add_layer(make_gather_layer(p, elem_bytes), n.name, {x, idx}, {ctx.new_output(n)}, n.origin);
    return Status::Ok();
  }
  // The normalized indices as an int64 weight (the value's storage type does not describe it;
  // only the gather layer reads it).
  KILN_ASSIGN_OR_RETURN(int idx, ctx.upload_raw(n.name + ":indices", {static_cast<int64_t>(p.indices.size())},
                                                p.indices.data(), p.indices.size() * sizeof(int64_t),
                                                "gather indices of '" + n.name + "'"));
  ctx.add_layer(make_gather_layer(p, elem_bytes), n.name, {x, idx}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
