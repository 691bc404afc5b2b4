// Reductions and normalizations of row-major tensors (Kiln's row kernels, float accumulation in
// every storage type; reduced axes that are not one contiguous run are moved last by a strided
// copy first): ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/
// LogSum/LogSumExp (axes as an attribute or a constant input, keepdims, noop_with_empty_axes;
// gpu_ops.h plan_reduce), LayerNormalization (ONNX opset 17: mean and variance over axes
// [axis, rank), epsilon, Scale and optional B of the normalized size, the optional Mean /
// InvStdDev outputs) and RMSNormalization (x / sqrt(mean(x^2) + epsilon) * scale;
// docs/decisions/0006).
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/gpu_transformer.h"
#include "backends/cuda/kernels_more.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_reduce(LowerContext& ctx, const ir::Node& n, const std::string&) {
  KILN_ASSIGN_OR_RETURN(ReducePlan p, plan_reduce(n, ctx.graph(), ctx.shape(n.inputs[0])));
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  if (p.transposed) {  // reduced axes not contiguous: reduced axes moved last by one strided copy first
    const int moved = ctx.new_value(ctx.graph().value(n.outputs[0]).name + "_reduce_input", Shape{p.outer, p.red},
                                    ctx.storage(), false);
    ctx.add_layer(make_strided_copy_layer("Transpose", p.transpose, static_cast<int>(storage_bytes(ctx.storage()))),
                  n.name + "_transpose", {x}, {moved}, n.origin);
    x = moved;
  }
  ctx.add_layer(make_reduce_layer(ir::op_name(n.op), p, ctx.storage()), n.name, {x}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

Status lower_layernorm(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& s = ctx.shape(n.inputs[0]);
  int64_t axis = n.attr_int("axis", -1);
  if (axis < 0) axis += static_cast<int64_t>(s.size());
  if (axis < 0 || axis >= static_cast<int64_t>(s.size())) return invalid_argument(where + "axis out of range");
  int64_t rows = 1;
  for (int64_t i = 0; i < axis; ++i) rows *= s[i];
  const int64_t cols = shape_numel(s) / std::max<int64_t>(rows, 1);
  std::vector<int> ins;
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  ins.push_back(x);
  for (size_t k = 1; k < 3 && k < n.inputs.size(); ++k) {
    if (n.inputs[k] == ir::kNoValue) continue;
    if (shape_numel(ctx.shape(n.inputs[k])) != cols)
      return unsupported(where + "scale/bias broadcast over the normalized axes (need " + std::to_string(cols) +
                         " elements)");
    KILN_ASSIGN_OR_RETURN(int v, ctx.row_major_operand(n.inputs[k]));
    ins.push_back(v);
  }
  if (ins.size() < 2) return invalid_argument(where + "Scale is required");
  const float eps = n.attr_float("epsilon", 1e-5f);
  ctx.add_layer(make_layernorm_layer(rows, cols, eps, ctx.storage()), n.name, ins, {ctx.new_output(n)}, n.origin);
  // The optional outputs Mean and InvStdDev (the leading dims, the normalized ones 1): one more
  // layer over the same input (kernels_more.h launch_row_moments).
  const bool want_mean = n.outputs.size() > 1 && n.outputs[1] != ir::kNoValue;
  const bool want_inv = n.outputs.size() > 2 && n.outputs[2] != ir::kNoValue;
  if (want_mean || want_inv) {
    std::vector<int> outs;
    if (want_mean) outs.push_back(ctx.new_output(n, 1));
    if (want_inv) outs.push_back(ctx.new_output(n, 2));
    const StorageType t = ctx.storage();
    ctx.add_layer(make_kernel_layer("LayerNormalization", std::string("kiln.layernorm_stats ") + storage_name(t),
                                    [=](ExecState& st, const Layer& l) {
                                      void* mean = want_mean ? st.ptr(l.outs[0]) : nullptr;
                                      void* inv = want_inv ? st.ptr(l.outs[want_mean ? 1 : 0]) : nullptr;
                                      return launch_row_moments(st.ptr(l.ins[0]), mean, inv, t, rows, cols, eps,
                                                                st.stream);
                                    }),
                  n.name + "_stats", {x}, outs, n.origin);
  }
  return Status::Ok();
}

Status lower_rms_norm(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.inputs.size() < 2 || n.inputs[1] == ir::kNoValue) return invalid_argument(where + "scale is required");
  KILN_ASSIGN_OR_RETURN(RmsNormPlan p, plan_rms_norm(n, ctx.shape(n.inputs[0]), ctx.shape(n.inputs[1])));
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  KILN_ASSIGN_OR_RETURN(int scale, ctx.row_major_operand(n.inputs[1]));
  ctx.add_layer(make_rms_norm_layer(p, ctx.storage()), n.name, {x, scale}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
