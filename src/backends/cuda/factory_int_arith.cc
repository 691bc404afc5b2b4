// Integer arithmetic (ONNX Add, Sub, Mul, Div, Mod, Neg, Abs, Min, Max, Pow on int32 / int64): one
// broadcast-elementwise layer of kernels_exact.h computing in the integer type (two's-complement
// wrap-around; Div truncates toward zero; Mod follows its fmod attribute). Positions, lengths
// and shape arithmetic that shape folding could not make constant run here. The same ops on
// float64 compute in double (docs/decisions/0075). An integer Pow with a float exponent is the
// CPU reference's: pow in double, truncated toward zero (saturating; NaN gives 0) into the base's
// type. uint64 Add, Sub, Mul, Div, Mod, Min, Max and BitShift compute unsigned. Float Add ... Max
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
    case OpKind::kBitShift: {
      // uint64 here (docs/decisions/0075); narrower unsigned types are not computed on the GPU.
      if (ctx.storage() != StorageType::kU64)
        return unsupported(where + "BitShift of " + dtype_name(ctx.dtype(n.outputs[0])) + " values");
      const std::string dir = n.attr_string("direction", "");
      if (dir != "LEFT" && dir != "RIGHT") return invalid_argument(where + "direction must be LEFT or RIGHT");
      e = dir == "LEFT" ? ExactOp::kShl : ExactOp::kShr;
      break;
    }
    case OpKind::kPow: {
      if (n.inputs.size() != 2 || n.inputs[0] == ir::kNoValue || n.inputs[1] == ir::kNoValue)
        return invalid_argument(where + "expects a base and an exponent");
      const DataType et = ctx.dtype(n.inputs[1]);
      const bool int_exp = et == DataType::kInt32 || et == DataType::kInt64;
      const bool float_exp = et == DataType::kFloat32 || et == DataType::kFloat16 || et == DataType::kBFloat16 ||
                             et == DataType::kFloat64;
      if (ctx.storage() == StorageType::kU64) return unsupported(where + "uint64 Pow");
      if (ctx.storage() == StorageType::kF64) {
        // A double base: pow in double; an int64 exponent would round on the way to double.
        if (!float_exp && et != DataType::kInt32)
          return unsupported(where + "float64 Pow with a " + dtype_name(et) + " exponent");
        return add_exact_elementwise(ctx, n, ExactOp::kPow, StorageType::kF64, where);
      }
      if (int_exp) {
        e = ExactOp::kPow;
        break;
      }
      if (!float_exp || !storage_is_int(ctx.storage()))
        return unsupported(where + "integer Pow with a " + dtype_name(et) + " exponent");
      // Integer base, float exponent: the CPU reference's pow in double (the base converted as
      // static_cast<double> does, the exponent exactly), then stored as its saturating_int does
      // (NaN 0, out-of-range values the bound).
      if (ctx.storage() != StorageType::kI32 && ctx.storage() != StorageType::kI64)
        return unsupported(where + "integer Pow with a float exponent into " + storage_name(ctx.storage()));
      KILN_ASSIGN_OR_RETURN(int a, ctx.operand_as(n.inputs[0], StorageType::kF64));
      KILN_ASSIGN_OR_RETURN(int b, ctx.operand_as(n.inputs[1], StorageType::kF64));
      const Shape& out = ctx.shape(n.outputs[0]);
      auto d = broadcast_desc(ctx.shape(n.inputs[0]), ctx.shape(n.inputs[1]), out);
      if (!d.ok()) return unsupported(where + d.status().message());
      const int p = ctx.new_value(n.name + ":pow_f64", out, StorageType::kF64, false);
      ctx.add_layer(make_exact_elementwise_layer("Pow", ExactOp::kPow, StorageType::kF64, *d), n.name + ":pow_f64",
                    {a, b}, {p}, n.origin);
      ctx.add_layer(make_saturating_cast_layer(shape_numel(out), ctx.storage()), n.name, {p}, {ctx.new_output(n)},
                    n.origin);
      return Status::Ok();
    }
    default: return unsupported(where + "not an integer arithmetic op");
  }
  const StorageType t = ctx.storage();
  if (!storage_is_int(t) && t != StorageType::kF64 && t != StorageType::kU64)
    return unsupported(where + "output dtype " + storage_name(t) + " (int32 / int64 / uint64 / float64 only)");
  if (t == StorageType::kU64 && (e == ExactOp::kNeg || e == ExactOp::kAbs))
    return unsupported(where + "uint64 " + ir::op_name(n.op));
  const size_t arity = exact_op_is_unary(e) ? 1 : 2;
  if (n.inputs.size() != arity)
    return unsupported(where + std::to_string(n.inputs.size()) + " inputs (" + std::to_string(arity) + " supported)");
  for (ir::ValueId v : n.inputs)
    if (v == ir::kNoValue) return invalid_argument(where + "an input is omitted");
  return add_exact_elementwise(ctx, n, e, t, where);
}

}  // namespace kiln::cuda
