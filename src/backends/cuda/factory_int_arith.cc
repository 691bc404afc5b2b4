// Integer arithmetic (ONNX Add, Sub, Mul, Div, Mod, Neg, Abs, Min, Max, Pow on int32 / int64): one
// broadcast-elementwise layer of kernels_exact.h computing in the integer type (two's-complement
// wrap-around; Div truncates toward zero; Mod follows its fmod attribute). Positions, lengths
// and shape arithmetic that shape folding could not make constant run here. Float Add ... Max
// are the float table's (factory_pointwise.cc).
#include "backends/cuda/exact_layers.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_int_arith(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  using ir::OpKind;
  ExactOp e;
  switch (n.op) {
    case OpKind::kAdd: e = ExactOp::kAdd; break;
    case OpKind::kSub: e = ExactOp::kSub; break;
    case OpKind::kMul: e = ExactOp::kMul; break;
    case OpKind::kDiv: e = ExactOp::kDiv; break;
    case OpKind::kMod: e = n.attr_int("fmod", 0) != 0 ? ExactOp::kFmod : ExactOp::kMod; break;
    case OpKind::kNeg: e = ExactOp::kNeg; break;
    case OpKind::kAbs: e = ExactOp::kAbs; break;
    case OpKind::kMin: e = ExactOp::kMin; break;
    case OpKind::kMax: e = ExactOp::kMax; break;
    case OpKind::kPow: {
      // An integer exponent only: a float one read as an integer would be truncated (the CPU
      // reference computes pow in double then).
      if (n.inputs.size() == 2 && n.inputs[1] != ir::kNoValue) {
        const DataType et = ctx.dtype(n.inputs[1]);
        if (et != DataType::kInt32 && et != DataType::kInt64)
          return unsupported(where + "integer Pow with a " + dtype_name(et) + " exponent");
      }
      e = ExactOp::kPow;
      break;
    }
    default: return unsupported(where + "not an integer arithmetic op");
  }
  const StorageType t = ctx.storage();
  if (!storage_is_int(t)) return unsupported(where + "output dtype " + storage_name(t) + " (int32 / int64 only)");
  const size_t arity = exact_op_is_unary(e) ? 1 : 2;
  if (n.inputs.size() != arity)
    return unsupported(where + std::to_string(n.inputs.size()) + " inputs (" + std::to_string(arity) + " supported)");
  for (ir::ValueId v : n.inputs)
    if (v == ir::kNoValue) return invalid_argument(where + "an input is omitted");
  return add_exact_elementwise(ctx, n, e, t, where);
}

}  // namespace kiln::cuda
