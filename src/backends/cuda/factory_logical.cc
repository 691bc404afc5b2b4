// Ops with bool outputs (ONNX Equal, Less, LessOrEqual, Greater, GreaterOrEqual, And, Or, Xor,
// Not, IsNaN, IsInf): one broadcast-elementwise layer of kernels_exact.h. Comparisons read
// int32 / int64 operands exactly and float operands in the float storage the first float
// activation among them has (a constant beside it is uploaded in that type; a float32 constant
// pair compares in float32), so a mask computed from fp16 scores compares the fp16 values the
// plan holds. Logical ops read bool operands.
#include "backends/cuda/exact_layers.h"
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {
namespace {

StatusOr<ExactOp> exact_op_of(const ir::Node& n, const std::string& where) {
  using ir::OpKind;
  switch (n.op) {
    case OpKind::kEqual: return ExactOp::kEqual;
    case OpKind::kLess: return ExactOp::kLess;
    case OpKind::kLessOrEqual: return ExactOp::kLessOrEqual;
    case OpKind::kGreater: return ExactOp::kGreater;
    case OpKind::kGreaterOrEqual: return ExactOp::kGreaterOrEqual;
    case OpKind::kAnd: return ExactOp::kAnd;
    case OpKind::kOr: return ExactOp::kOr;
    case OpKind::kXor: return ExactOp::kXor;
    case OpKind::kNot: return ExactOp::kNot;
    case OpKind::kIsNaN: return ExactOp::kIsNaN;
    case OpKind::kIsInf: {
      const bool pos = n.attr_int("detect_positive", 1) != 0, neg = n.attr_int("detect_negative", 1) != 0;
      if (pos && neg) return ExactOp::kIsInf;
      if (pos) return ExactOp::kIsPosInf;
      if (neg) return ExactOp::kIsNegInf;
      return unsupported(where + "detect_positive = detect_negative = 0");
    }
    default: break;
  }
  return unsupported(where + "not a comparison or logical op");
}

}  // namespace

Status lower_logical(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  KILN_ASSIGN_OR_RETURN(ExactOp e, exact_op_of(n, where));
  const size_t arity = exact_op_is_unary(e) ? 1 : 2;
  if (n.inputs.size() != arity) return invalid_argument(where + "expects " + std::to_string(arity) + " input(s)");
  for (ir::ValueId v : n.inputs)
    if (v == ir::kNoValue) return invalid_argument(where + "an input is omitted");
  const DataType dt = ctx.dtype(n.inputs[0]);
  StorageType t = StorageType::kF32;
  const bool logical = e == ExactOp::kAnd || e == ExactOp::kOr || e == ExactOp::kXor || e == ExactOp::kNot;
  if (exact_storage(dt, &t)) {
    if (logical != (t == StorageType::kBool) && !(e == ExactOp::kEqual && t == StorageType::kBool))
      return unsupported(where + "input dtype " + dtype_name(dt));
    if (e == ExactOp::kIsNaN || e == ExactOp::kIsInf || e == ExactOp::kIsPosInf || e == ExactOp::kIsNegInf)
      return unsupported(where + "input dtype " + dtype_name(dt));
  } else if (is_float(dt) && !logical) {
    t = stored_float_type(ctx, n.inputs[0]);
    if (arity == 2 && ctx.graph().value(n.inputs[0]).constant) t = stored_float_type(ctx, n.inputs[1]);
  } else {
    return unsupported(where + "input dtype " + dtype_name(dt));
  }
  return add_exact_elementwise(ctx, n, e, t, where);
}

Status add_exact_elementwise(LowerContext& ctx, const ir::Node& n, ExactOp e, StorageType t, const std::string& where) {
  const size_t arity = exact_op_is_unary(e) ? 1 : 2;
  std::vector<int> ins;
  for (ir::ValueId v : n.inputs) {
    KILN_ASSIGN_OR_RETURN(int a, ctx.operand_as(v, t));
    ins.push_back(a);
  }
  const Shape& out = ctx.shape(n.outputs[0]);
  auto d = broadcast_desc(ctx.shape(n.inputs[0]), ctx.shape(n.inputs[arity - 1]), out);
  if (!d.ok()) return unsupported(where + d.status().message());
  ctx.add_layer(make_exact_elementwise_layer(ir::op_name(n.op), e, t, *d), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
