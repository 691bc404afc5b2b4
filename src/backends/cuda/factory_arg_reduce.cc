// Reductions with integer outputs: ArgMax / ArgMin (ONNX ArgMax-13 / ArgMin-13: axis, keepdims,
// select_last_index; int64 indices of float or integer inputs) and ReduceSum / ReduceMax /
// ReduceMin of int32 / int64 tensors (sequence lengths from a mask: ReduceSum(mask, -1)), and every
// Reduce* of float64 tensors in double (docs/decisions/0075), axes as gpu_ops.h plan_reduce takes
// them (one contiguous run). One thread per output (kernels_exact.h).
#include "backends/cuda/exact_layers.h"
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_arg_extreme(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (ctx.storage() != StorageType::kI64) return unsupported(where + "output dtype must be int64");
  const Shape& s = ctx.shape(n.inputs[0]);
  const int64_t r = static_cast<int64_t>(s.size());
  int64_t axis = n.attr_int("axis", 0);
  if (axis < -r || axis >= r) return invalid_argument(where + "axis " + std::to_string(axis) + " out of range");
  if (axis < 0) axis += r;
  if (s[axis] == 0) return invalid_argument(where + "empty axis");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= s[i];
  for (int64_t i = axis + 1; i < r; ++i) inner *= s[i];
  const DataType dt = ctx.dtype(n.inputs[0]);
  StorageType t;
  if (!exact_storage(dt, &t)) {
    if (!is_float(dt)) return unsupported(where + "input dtype " + dtype_name(dt));
    t = stored_float_type(ctx, n.inputs[0]);
  }
  if (t == StorageType::kBool) return unsupported(where + "input dtype bool");
  KILN_ASSIGN_OR_RETURN(int x, ctx.operand_as(n.inputs[0], t));
  const bool max = n.op == ir::OpKind::kArgMax, last = n.attr_int("select_last_index", 0) != 0;
  const int64_t count = s[axis];
  ctx.add_layer(make_kernel_layer(ir::op_name(n.op),
                                  std::string("kiln.") + (max ? "argmax " : "argmin ") + storage_name(t) +
                                      (last ? " last" : ""),
                                  [=](ExecState& st, const Layer& l) {
                                    return launch_arg_extreme(st.ptr(l.ins[0]), t, static_cast<int64_t*>(st.ptr(l.outs[0])),
                                                              outer, count, inner, max, last, st.stream);
                                  }),
                n.name, {x}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

Status lower_int_reduce(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const StorageType t = ctx.storage();
  if (t == StorageType::kF64) {  // every Reduce* in double (docs/decisions/0075)
    KILN_ASSIGN_OR_RETURN(ReducePlan p, plan_reduce(n, ctx.graph(), ctx.shape(n.inputs[0])));
    if (p.transposed) return unsupported(where + "float64 reduction over non-contiguous axes");
    KILN_ASSIGN_OR_RETURN(int x, ctx.operand_as(n.inputs[0], t));
    ctx.add_layer(make_kernel_layer(ir::op_name(n.op), "kiln.f64_reduce",
                                    [=](ExecState& st, const Layer& l) {
                                      return launch_f64_reduce(static_cast<const double*>(st.ptr(l.ins[0])),
                                                               static_cast<double*>(st.ptr(l.outs[0])), p.kind, p.outer,
                                                               p.red, p.inner, st.stream);
                                    }),
                  n.name, {x}, {ctx.new_output(n)}, n.origin);
    return Status::Ok();
  }
  if (!storage_is_int(t)) return unsupported(where + "output dtype " + storage_name(t));
  if (n.op != ir::OpKind::kReduceSum && n.op != ir::OpKind::kReduceMax && n.op != ir::OpKind::kReduceMin)
    return unsupported(where + "integer " + ir::op_name(n.op));
  KILN_ASSIGN_OR_RETURN(ReducePlan p, plan_reduce(n, ctx.graph(), ctx.shape(n.inputs[0])));
  if (p.transposed) return unsupported(where + "integer reduction over non-contiguous axes");
  const int max = p.kind == ReduceKind::kMax ? 1 : (p.kind == ReduceKind::kMin ? -1 : 0);
  KILN_ASSIGN_OR_RETURN(int x, ctx.operand_as(n.inputs[0], t));
  ctx.add_layer(make_kernel_layer(ir::op_name(n.op), std::string("kiln.int_reduce ") + storage_name(t),
                                  [=](ExecState& st, const Layer& l) {
                                    return launch_int_reduce(st.ptr(l.ins[0]), st.ptr(l.outs[0]), t, max, p.outer, p.red,
                                                             p.inner, st.stream);
                                  }),
                n.name, {x}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
