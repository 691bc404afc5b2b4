// Shape rules of elementwise ops: unary math and activations (output = input), binary ops with
// numpy broadcasting (ONNX "Broadcasting in ONNX"; opset < 7 used the `broadcast`/`axis`
// attributes, where the output has A's shape), comparisons (bool), variadic Max/Min/Sum/Mean,
// Where, Cast/CastLike, and the per-element normalizations whose output is shaped like X.
// Add/Sub/Mul/Div/Cast also carry tracked shape-tensor values.
#include "ir/shape_rules.h"

namespace kiln::ir {
namespace {

Status same_as_input0(ShapeContext& ctx) {
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
  return Status::Ok();
}

Status identity_rule(ShapeContext& ctx) {
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
  if (ctx.values(0)) ctx.set_values(0, *ctx.values(0));
  return Status::Ok();
}

Status bool_like_input0(ShapeContext& ctx) {
  ctx.set_output(0, DataType::kBool, ctx.shape(0));
  return Status::Ok();
}

// Elementwise values of a binary op on two tracked tensors (equal sizes or one of size 1).
std::optional<SymValues> binary_values(const ShapeContext& ctx, SymInt (*f)(const SymInt&, const SymInt&)) {
  const SymValues* a = ctx.values(0);
  const SymValues* b = ctx.values(1);
  if (!a || !b) return std::nullopt;
  if (a->size() != b->size() && a->size() != 1 && b->size() != 1) return std::nullopt;
  const size_t n = std::max(a->size(), b->size());
  SymValues r;
  for (size_t i = 0; i < n; ++i) r.push_back(f((*a)[a->size() == 1 ? 0 : i], (*b)[b->size() == 1 ? 0 : i]));
  return r;
}

Status binary_shape(ShapeContext& ctx, DataType out_dtype) {
  if (!ctx.has_input(0) || !ctx.has_input(1)) return ctx.fail("expects 2 inputs");
  if (ctx.opset() > 0 && ctx.opset() < 7) {
    // Legacy broadcasting: B is broadcast onto A (aligned at `axis` or trailing); output is A.
    const auto& a = ctx.shape(0);
    const auto& b = ctx.shape(1);
    if (a && b && !ctx.node().attr_int("broadcast", 0)) {
      if (a->size() != b->size()) return ctx.fail("shapes " + sym_shape_str(*a) + " and " + sym_shape_str(*b) + " differ and broadcast=0");
      for (size_t i = 0; i < a->size(); ++i)
        if (dims_conflict((*a)[i], (*b)[i])) return ctx.fail("shapes " + sym_shape_str(*a) + " and " + sym_shape_str(*b) + " differ and broadcast=0");
    }
    ctx.set_output(0, out_dtype, a);
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(auto s, broadcast_inputs(ctx));
  ctx.set_output(0, out_dtype, s);
  return Status::Ok();
}

Status arith_rule(ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(binary_shape(ctx, ctx.dtype(0)));
  SymInt (*f)(const SymInt&, const SymInt&) = nullptr;
  switch (ctx.node().op) {
    case OpKind::kAdd: f = sym_add; break;
    case OpKind::kSub: f = sym_sub; break;
    case OpKind::kMul: f = sym_mul; break;
    case OpKind::kDiv: f = sym_div; break;
    default: break;
  }
  if (f && dtype_is_integer(ctx.dtype(0))) {
    auto v = binary_values(ctx, f);
    if (v) ctx.set_values(0, *v);
  }
  return Status::Ok();
}

Status compare_rule(ShapeContext& ctx) { return binary_shape(ctx, DataType::kBool); }

Status variadic_rule(ShapeContext& ctx) {
  if (ctx.num_inputs() == 0) return ctx.fail("expects at least 1 input");
  KILN_ASSIGN_OR_RETURN(auto s, broadcast_inputs(ctx));
  ctx.set_output(0, ctx.dtype(0), s);
  return Status::Ok();
}

Status where_rule(ShapeContext& ctx) {
  if (ctx.num_inputs() != 3) return ctx.fail("expects 3 inputs");
  KILN_ASSIGN_OR_RETURN(auto s, broadcast_inputs(ctx));
  ctx.set_output(0, ctx.dtype(1), s);
  return Status::Ok();
}

Status prelu_rule(ShapeContext& ctx) {
  // PRelu-7+: slope broadcasts unidirectionally (numpy) onto X. Before opset 7 a 1-D slope was
  // per channel (axis 1), not trailing-aligned, so only X's shape is used there.
  if (ctx.opset() >= 7) {
    KILN_ASSIGN_OR_RETURN(auto s, broadcast_inputs(ctx));
    if (ctx.shape(0) && s && *s != *ctx.shape(0)) {
      bool differs = s->size() != ctx.shape(0)->size();
      for (size_t i = 0; !differs && i < s->size(); ++i) differs = dims_conflict((*s)[i], (*ctx.shape(0))[i]);
      if (differs) return ctx.fail("slope " + sym_shape_str(*ctx.shape(1)) + " does not broadcast to X " + sym_shape_str(*ctx.shape(0)));
    }
  }
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
  return Status::Ok();
}

Status cast_rule(ShapeContext& ctx) {
  if (!ctx.node().has_attr("to")) return ctx.fail("missing attribute 'to'");
  const auto& to = ctx.node().attrs.at("to");
  // Opset 1 spelled `to` as a string ("FLOAT"); later opsets use the TensorProto code.
  DataType dt = DataType::kUndefined;
  if (to.kind == Attribute::Kind::kString) {
    static const std::pair<const char*, DataType> kNames[] = {
        {"FLOAT", DataType::kFloat32}, {"DOUBLE", DataType::kFloat64}, {"FLOAT16", DataType::kFloat16},
        {"INT8", DataType::kInt8},     {"INT16", DataType::kInt16},     {"INT32", DataType::kInt32},
        {"INT64", DataType::kInt64},   {"UINT8", DataType::kUInt8},     {"UINT16", DataType::kUInt16},
        {"UINT32", DataType::kUInt32}, {"UINT64", DataType::kUInt64},   {"BOOL", DataType::kBool}};
    for (const auto& [name, t] : kNames)
      if (to.s == name) dt = t;
  } else {
    dt = dtype_from_onnx_code(to.i);
  }
  ctx.set_output(0, dt, ctx.shape(0));
  if (const SymValues* v = ctx.values(0)) {
    // Integral values survive a cast to an integer type, and to float when exactly representable.
    bool exact = dtype_is_integer(dt);
    if (dt == DataType::kFloat32 || dt == DataType::kFloat64) {
      exact = true;
      for (const SymInt& e : *v) exact = exact && e.is_const() && e.c > -(1 << 24) && e.c < (1 << 24);
    }
    if (exact) ctx.set_values(0, *v);
  }
  return Status::Ok();
}

Status neg_rule(ShapeContext& ctx) {
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
  if (const SymValues* v = ctx.values(0)) {
    SymValues r;
    for (const SymInt& e : *v) r.push_back(sym_mul(e, SymInt::constant(-1)));
    ctx.set_values(0, r);
  }
  return Status::Ok();
}

Status cast_like_rule(ShapeContext& ctx) {
  ctx.set_output(0, ctx.dtype(1), ctx.shape(0));
  if (ctx.values(0) && dtype_is_integer(ctx.dtype(1))) ctx.set_values(0, *ctx.values(0));
  return Status::Ok();
}

Status dropout_rule(ShapeContext& ctx) {
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
  // Dropout-7's mask had X's type; since opset 10 it is bool.
  ctx.set_output(1, ctx.opset() >= 10 ? DataType::kBool : ctx.dtype(0), ctx.shape(0));
  return Status::Ok();
}

Status batch_norm_rule(ShapeContext& ctx) {
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
  // Training outputs (running/saved mean and variance) are per channel, shaped like scale.
  for (int k = 1; k < ctx.num_outputs(); ++k) ctx.set_output(k, ctx.dtype(1), ctx.shape(1));
  return Status::Ok();
}

Status layer_norm_rule(ShapeContext& ctx) {
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
  const auto& x = ctx.shape(0);
  std::optional<SymShape> stats;
  if (x) {
    int64_t axis;
    if (!normalize_axis(ctx.node().attr_int("axis", -1), static_cast<int>(x->size()), &axis))
      return ctx.fail("axis out of range for rank " + std::to_string(x->size()));
    stats = *x;
    for (size_t i = axis; i < stats->size(); ++i) (*stats)[i] = Dim::known(1);
  }
  // LayerNormalization-17: Mean and InvStdDev use stash_type (default 1 = float32).
  const DataType st = dtype_from_onnx_code(ctx.node().attr_int("stash_type", 1));
  ctx.set_output(1, st, stats);
  ctx.set_output(2, st, stats);
  return Status::Ok();
}

Status unary_with_axis_rule(ShapeContext& ctx) {
  const auto& x = ctx.shape(0);
  if (x && ctx.node().has_attr("axis") && !x->empty()) {
    int64_t axis;
    if (!normalize_axis(ctx.node().attr_int("axis", 0), static_cast<int>(x->size()), &axis))
      return ctx.fail("axis " + std::to_string(ctx.node().attr_int("axis", 0)) + " out of range for rank " +
                      std::to_string(x->size()));
  }
  return same_as_input0(ctx);
}

}  // namespace

void register_elementwise_shape_rules(ShapeRuleTable& t) {
  for (OpKind op : {OpKind::kAbs, OpKind::kAcos, OpKind::kAcosh, OpKind::kAsin, OpKind::kAsinh, OpKind::kAtan,
                    OpKind::kAtanh, OpKind::kCeil, OpKind::kCos, OpKind::kCosh, OpKind::kErf, OpKind::kExp,
                    OpKind::kFloor, OpKind::kLog, OpKind::kReciprocal, OpKind::kRelu, OpKind::kRound,
                    OpKind::kSigmoid, OpKind::kSign, OpKind::kSin, OpKind::kSinh, OpKind::kSqrt, OpKind::kTan,
                    OpKind::kTanh, OpKind::kSoftplus, OpKind::kSoftsign, OpKind::kElu, OpKind::kSelu, OpKind::kCelu,
                    OpKind::kLeakyRelu, OpKind::kHardSigmoid, OpKind::kHardSwish, OpKind::kThresholdedRelu,
                    OpKind::kMish, OpKind::kGelu, OpKind::kShrink, OpKind::kBitwiseNot, OpKind::kNot, OpKind::kClip,
                    OpKind::kLRN, OpKind::kMeanVarianceNormalization, OpKind::kInstanceNormalization,
                    OpKind::kGroupNormalization, OpKind::kTrilu, OpKind::kReverseSequence})
    t.add(op, same_as_input0);
  for (OpKind op : {OpKind::kSoftmax, OpKind::kLogSoftmax, OpKind::kHardmax, OpKind::kLpNormalization, OpKind::kCumSum})
    t.add(op, unary_with_axis_rule);
  t.add(OpKind::kIdentity, identity_rule);
  t.add(OpKind::kReformat, identity_rule);  // layout is storage, not shape
  t.add(OpKind::kNeg, neg_rule);
  t.add(OpKind::kIsInf, bool_like_input0);
  t.add(OpKind::kIsNaN, bool_like_input0);
  for (OpKind op : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv, OpKind::kPow, OpKind::kMod,
                    OpKind::kBitShift, OpKind::kBitwiseAnd, OpKind::kBitwiseOr, OpKind::kBitwiseXor})
    t.add(op, arith_rule);
  for (OpKind op : {OpKind::kEqual, OpKind::kGreater, OpKind::kGreaterOrEqual, OpKind::kLess, OpKind::kLessOrEqual,
                    OpKind::kAnd, OpKind::kOr, OpKind::kXor})
    t.add(op, compare_rule);
  for (OpKind op : {OpKind::kMax, OpKind::kMin, OpKind::kSum, OpKind::kMean}) t.add(op, variadic_rule);
  t.add(OpKind::kFusedPointwise, variadic_rule);  // the broadcast of its inputs, input 0's dtype
  t.add(OpKind::kWhere, where_rule);
  t.add(OpKind::kPRelu, prelu_rule);
  t.add(OpKind::kCast, cast_rule);
  t.add(OpKind::kCastLike, cast_like_rule);
  t.add(OpKind::kDropout, dropout_rule);
  t.add(OpKind::kBatchNormalization, batch_norm_rule);
  t.add(OpKind::kLayerNormalization, layer_norm_rule);
}

}  // namespace kiln::ir
