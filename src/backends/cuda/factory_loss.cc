// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (ONNX Operators.md, since 12/13; the CPU
// reference is backends/cpu/ops_reduce_loss.cc): input (N, C, d1..dk) in the layer's float
// storage, target (N, d1..dk) int32 / int64 (read as int64), optional weight (C), ignore_index,
// reduction none / sum / mean; SoftmaxCrossEntropyLoss takes log_softmax over C first and writes
// it as its optional output 1. One layer (kernels_more.h launch_nll_loss).
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_more.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_nll_loss(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const bool softmax = n.op == ir::OpKind::kSoftmaxCrossEntropyLoss;
  if (n.inputs.size() < 2 || n.inputs[0] == ir::kNoValue || n.inputs[1] == ir::kNoValue)
    return invalid_argument(where + "input and target are required");
  const Shape& xs = ctx.shape(n.inputs[0]);
  if (xs.size() < 2) return invalid_argument(where + "input must have rank >= 2 (N, C, ...), got " + shape_str(xs));
  LossDesc d;
  d.n = xs[0];
  d.c = xs[1];
  Shape want{d.n};
  for (size_t i = 2; i < xs.size(); ++i) {
    d.d *= xs[i];
    want.push_back(xs[i]);
  }
  if (ctx.shape(n.inputs[1]) != want)
    return invalid_argument(where + "target shape " + shape_str(ctx.shape(n.inputs[1])) + " does not match input " +
                            shape_str(xs) + " (expected " + shape_str(want) + ")");
  const DataType tdt = ctx.dtype(n.inputs[1]);
  if (tdt != DataType::kInt64 && tdt != DataType::kInt32)
    return unsupported(where + "target dtype " + dtype_name(tdt) + " (int32 or int64 on the GPU)");
  const bool has_weight = n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue;
  if (has_weight && ctx.shape(n.inputs[2]) != Shape{d.c})
    return invalid_argument(where + "weight shape " + shape_str(ctx.shape(n.inputs[2])) + ", expected [" +
                            std::to_string(d.c) + "]");
  const std::string reduction = n.attr_string("reduction", "mean");
  if (reduction == "none") d.reduction = 0;
  else if (reduction == "sum") d.reduction = 1;
  else if (reduction == "mean") d.reduction = 2;
  else return invalid_argument(where + "unknown reduction '" + reduction + "'");
  d.softmax = softmax;
  d.has_ignore = n.has_attr("ignore_index");
  d.ignore_index = n.attr_int("ignore_index", 0);
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  KILN_ASSIGN_OR_RETURN(int target, ctx.operand_as(n.inputs[1], StorageType::kI64));
  std::vector<int> ins = {x, target};
  if (has_weight) {
    KILN_ASSIGN_OR_RETURN(int w, ctx.row_major_operand(n.inputs[2]));
    ins.push_back(w);
  }
  std::vector<int> outs = {ctx.new_output(n, 0)};
  const bool log_prob = softmax && n.outputs.size() > 1 && n.outputs[1] != ir::kNoValue;
  if (log_prob) outs.push_back(ctx.new_output(n, 1));
  const StorageType t = ctx.storage();
  const std::string tactic = std::string("kiln.nll_loss ") + storage_name(t) + " " + reduction;
  ctx.add_layer(make_kernel_layer(ir::op_name(n.op), tactic,
                                  [=](ExecState& s, const Layer& l) {
                                    return launch_nll_loss(s.ptr(l.ins[0]), static_cast<const int64_t*>(s.ptr(l.ins[1])),
                                                           has_weight ? s.ptr(l.ins[2]) : nullptr, s.ptr(l.outs[0]),
                                                           log_prob ? s.ptr(l.outs[1]) : nullptr, t, d, s.stream);
                                  }),
                n.name, ins, outs, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
