// Data movement on row-major tensors (NHWC inputs reformatted first), planned on the host by
// gpu_ops.h: Transpose, Slice and Expand as one strided copy (rank <= kMaxRank), Pad (constant, edge,
// reflect, wrap). Resize: factory_resize.cc.
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_strided(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& in = ctx.shape(n.inputs[0]);
  const Shape& out = ctx.shape(n.outputs[0]);
  StridedDesc d;
  if (n.op == ir::OpKind::kTranspose) {
    KILN_ASSIGN_OR_RETURN(d, plan_transpose(n, in));
  } else if (n.op == ir::OpKind::kSlice) {
    KILN_ASSIGN_OR_RETURN(d, plan_slice(n, ctx.graph(), in, out));
  } else {
    KILN_ASSIGN_OR_RETURN(d, plan_expand(n, in, out));
  }
  if (in.size() > static_cast<size_t>(kMaxRank)) return unsupported(where + "rank above " + std::to_string(kMaxRank));
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  ctx.add_layer(make_strided_copy_layer(ir::op_name(n.op), d, static_cast<int>(storage_bytes(ctx.storage()))), n.name,
                {x}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

Status lower_pad(LowerContext& ctx, const ir::Node& n, const std::string&) {
  KILN_ASSIGN_OR_RETURN(PadPlan p, plan_pad(n, ctx.graph(), ctx.shape(n.inputs[0]), ctx.shape(n.outputs[0])));
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  ctx.add_layer(make_pad_layer(p, ctx.storage()), n.name, {x}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
