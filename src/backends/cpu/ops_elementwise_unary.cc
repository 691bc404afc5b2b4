// CPU reference kernels: unary math (ONNX Abs, Acos, ..., Tanh, Round, Sign), the predicates
// IsInf/IsNaN (bool outputs), logical Not and BitwiseNot. Each op is a small functor over the
// compute type; the shared unary_kernel loop instantiates it per dtype. Formulas follow
// onnx/docs/Operators.md (all versions agree; opset 1-5's consumed_inputs attribute is ignored).
#include <cmath>
#include <type_traits>

#include "backends/cpu/ops_elementwise_broadcast.h"

namespace kiln::cpu {
namespace {

// Two's-complement wrapping negation (no UB on INT_MIN).
template <typename C>
C wrap_neg(C x) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(0) - static_cast<U>(x));
  } else {
    return -x;
  }
}

// Operator Abs, since version 13: all numeric types.
struct AbsOp {
  template <typename C> C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) return std::fabs(x);
    else if constexpr (std::is_unsigned_v<C>) return x;
    else return x < 0 ? wrap_neg(x) : x;
  }
};
// Operator Neg, since version 13: signed ints and floats (unsigned wrap).
struct NegOp {
  template <typename C> C operator()(C x) const { return wrap_neg(x); }
};
// Operator Sign, since version 13: -1, 0, 1 (NaN stays NaN, as numpy.sign).
struct SignOp {
  template <typename C> C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(x)) return x;
    }
    return static_cast<C>((C(0) < x) - (x < C(0)));
  }
};
// Operator Erf, since version 13: numeric types; integers go through double and truncate.
struct ErfOp {
  template <typename C> C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) return std::erf(x);
    else return static_cast<C>(std::erf(static_cast<double>(x)));
  }
};

// Float-only math, each a stateless lambda type mapping onto <cmath>.
using AcosOp = decltype([](auto x) { return std::acos(x); });
using AcoshOp = decltype([](auto x) { return std::acosh(x); });
using AsinOp = decltype([](auto x) { return std::asin(x); });
using AsinhOp = decltype([](auto x) { return std::asinh(x); });
using AtanOp = decltype([](auto x) { return std::atan(x); });
using AtanhOp = decltype([](auto x) { return std::atanh(x); });
using CeilOp = decltype([](auto x) { return std::ceil(x); });
using CosOp = decltype([](auto x) { return std::cos(x); });
using CoshOp = decltype([](auto x) { return std::cosh(x); });
using ExpOp = decltype([](auto x) { return std::exp(x); });
using FloorOp = decltype([](auto x) { return std::floor(x); });
using LogOp = decltype([](auto x) { return std::log(x); });
using ReciprocalOp = decltype([](auto x) { return decltype(x)(1) / x; });
// Operator Round, since version 11: half to even; nearbyint uses the default
// round-to-nearest-even mode and raises no inexact exception.
using RoundOp = decltype([](auto x) { return std::nearbyint(x); });
using SinOp = decltype([](auto x) { return std::sin(x); });
using SinhOp = decltype([](auto x) { return std::sinh(x); });
using SqrtOp = decltype([](auto x) { return std::sqrt(x); });
using TanOp = decltype([](auto x) { return std::tan(x); });
using TanhOp = decltype([](auto x) { return std::tanh(x); });

// Float input -> bool output predicates.
template <typename Pred>
Status predicate_kernel(KernelContext& ctx, Pred pred) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x = ctx.in(0);
  Tensor y(DataType::kBool, x.shape());
  uint8_t* py = y.data<uint8_t>();
  Status s = dispatch_float(x.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) py[i] = pred(load_c(px[i])) ? 1 : 0;
    return Status::Ok();
  });
  if (!s.ok()) return ctx.unsupported_here(s.message());
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

// Operator IsInf, since version 10: detect_negative / detect_positive (default 1) choose
// which infinities count.
Status is_inf(KernelContext& ctx) {
  const bool neg = ctx.attr_int("detect_negative", 1) != 0;
  const bool pos = ctx.attr_int("detect_positive", 1) != 0;
  return predicate_kernel(ctx, [neg, pos](auto v) { return std::isinf(v) && (v > 0 ? pos : neg); });
}

// Operator IsNaN, since version 9.
Status is_nan(KernelContext& ctx) {
  return predicate_kernel(ctx, [](auto v) { return std::isnan(v); });
}

// Operator Not, since version 1: bool only.
Status logical_not(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x = ctx.in(0);
  if (x.dtype() != DataType::kBool)
    return ctx.unsupported_here(std::string("Not expects bool, got ") + dtype_name(x.dtype()));
  Tensor y(DataType::kBool, x.shape());
  const uint8_t* px = x.data<uint8_t>();
  uint8_t* py = y.data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) py[i] = px[i] ? 0 : 1;
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

// Operator BitwiseNot, since version 18: integer types.
Status bitwise_not(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x = ctx.in(0);
  Tensor y(x.dtype(), x.shape());
  Status s = dispatch_int(x.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) py[i] = static_cast<T>(~px[i]);
    return Status::Ok();
  });
  if (!s.ok()) return ctx.unsupported_here(s.message());
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

}  // namespace

void register_elementwise_unary_kernels(KernelRegistry& r) {
  using ir::OpKind;
  constexpr UnaryTypes kF = UnaryTypes::kFloat, kN = UnaryTypes::kNumeric;
  r.add(OpKind::kAbs, unary_kernel<AbsOp, kN>);
  r.add(OpKind::kNeg, unary_kernel<NegOp, kN>);
  r.add(OpKind::kSign, unary_kernel<SignOp, kN>);
  r.add(OpKind::kErf, unary_kernel<ErfOp, kN>);
  r.add(OpKind::kAcos, unary_kernel<AcosOp, kF>);
  r.add(OpKind::kAcosh, unary_kernel<AcoshOp, kF>);
  r.add(OpKind::kAsin, unary_kernel<AsinOp, kF>);
  r.add(OpKind::kAsinh, unary_kernel<AsinhOp, kF>);
  r.add(OpKind::kAtan, unary_kernel<AtanOp, kF>);
  r.add(OpKind::kAtanh, unary_kernel<AtanhOp, kF>);
  r.add(OpKind::kCeil, unary_kernel<CeilOp, kF>);
  r.add(OpKind::kCos, unary_kernel<CosOp, kF>);
  r.add(OpKind::kCosh, unary_kernel<CoshOp, kF>);
  r.add(OpKind::kExp, unary_kernel<ExpOp, kF>);
  r.add(OpKind::kFloor, unary_kernel<FloorOp, kF>);
  r.add(OpKind::kLog, unary_kernel<LogOp, kF>);
  r.add(OpKind::kReciprocal, unary_kernel<ReciprocalOp, kF>);
  r.add(OpKind::kRound, unary_kernel<RoundOp, kF>);
  r.add(OpKind::kSin, unary_kernel<SinOp, kF>);
  r.add(OpKind::kSinh, unary_kernel<SinhOp, kF>);
  r.add(OpKind::kSqrt, unary_kernel<SqrtOp, kF>);
  r.add(OpKind::kTan, unary_kernel<TanOp, kF>);
  r.add(OpKind::kTanh, unary_kernel<TanhOp, kF>);
  r.add(OpKind::kIsInf, is_inf);
  r.add(OpKind::kIsNaN, is_nan);
  r.add(OpKind::kNot, logical_not);
  r.add(OpKind::kBitwiseNot, bitwise_not);
}

}  // namespace kiln::cpu
