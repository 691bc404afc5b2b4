// CPU reference kernels: binary elementwise ops with numpy-style broadcasting: arithmetic
// (Add Sub Mul Div Mod Pow), comparisons (bool outputs), logical And/Or/Xor, bitwise ops and
// BitShift. Before opset 7, Add/Sub/Mul/Div/Pow/And/Or/Xor/Equal/Greater/Less broadcast only
// B onto A, through the `broadcast` and `axis` attributes (Operator Add, version 6).
// Integer arithmetic wraps like two's complement; integer division by zero is a clean error.
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/ops_elementwise_broadcast.h"

namespace kiln::cpu {
namespace {

struct BinaryShapes {
  Shape a, b, out;
};

// Output shape of a binary op; opset < 7 uses the legacy unidirectional rule.
StatusOr<BinaryShapes> binary_shapes(const KernelContext& ctx, const Tensor& a, const Tensor& b) {
  BinaryShapes s{a.shape(), b.shape(), {}};
  if (ctx.opset() < 7) {
    if (ctx.attr_int("broadcast", 0) == 0) {
      if (a.shape() != b.shape())
        return invalid_argument("shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) +
                                " differ and broadcast=0");
    } else {
      KILN_ASSIGN_OR_RETURN(s.b, legacy_broadcast_b_shape(a.shape(), b.shape(), ctx.has_attr("axis"),
                                                          ctx.attr_int("axis", 0)));
    }
    s.out = a.shape();
    return s;
  }
  KILN_ASSIGN_OR_RETURN(s.out, broadcast_shape(a.shape(), b.shape()));
  return s;
}

// Integer arithmetic in the unsigned type of at least 32 bits: wraps instead of overflowing
// (no UB, and no int promotion of uint16 products).
template <typename C>
using WrapT = std::conditional_t<sizeof(C) <= 4, uint32_t, uint64_t>;

// Float -> integer conversion that never hits UB: NaN -> 0, out of range saturates.
template <typename I>
I saturating_int(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<I>::lowest())) return std::numeric_limits<I>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

struct AddOp {
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) return static_cast<C>(static_cast<WrapT<C>>(a) + static_cast<WrapT<C>>(b));
    else return a + b;
  }
};
struct SubOp {
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) return static_cast<C>(static_cast<WrapT<C>>(a) - static_cast<WrapT<C>>(b));
    else return a - b;
  }
};
struct MulOp {
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) return static_cast<C>(static_cast<WrapT<C>>(a) * static_cast<WrapT<C>>(b));
    else return a * b;
  }
};
// Operator Div: integers truncate toward zero (C semantics); MIN / -1 wraps to MIN.
struct DivOp {
  static constexpr bool kChecksDivisor = true;
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
      if (b == C(-1)) return static_cast<C>(WrapT<C>(0) - static_cast<WrapT<C>>(a));
    }
    return static_cast<C>(a / b);
  }
};
// Operator Mod, since version 10: fmod=1 takes the dividend's sign (C fmod / %); fmod=0 (ints
// only per spec; floats accepted too) takes the divisor's sign, as Python's %.
struct ModOp {
  static constexpr bool kChecksDivisor = true;
  bool c_style;
  explicit ModOp(const KernelContext& ctx) : c_style(ctx.attr_int("fmod", 0) != 0) {}
  template <typename C> C operator()(C a, C b) const {
    C r;
    if constexpr (std::is_floating_point_v<C>) {
      r = std::fmod(a, b);
    } else if constexpr (std::is_signed_v<C>) {
      r = b == C(-1) ? C(0) : static_cast<C>(a % b);
    } else {
      r = static_cast<C>(a % b);
    }
    if (!c_style && r != C(0) && ((r < C(0)) != (b < C(0)))) r = static_cast<C>(r + b);
    return r;
  }
};

using EqualOp = decltype([](auto a, auto b) { return a == b; });
using GreaterOp = decltype([](auto a, auto b) { return a > b; });
using GreaterOrEqualOp = decltype([](auto a, auto b) { return a >= b; });
using LessOp = decltype([](auto a, auto b) { return a < b; });
using LessOrEqualOp = decltype([](auto a, auto b) { return a <= b; });
using AndOp = decltype([](auto a, auto b) { return a != 0 && b != 0; });
using OrOp = decltype([](auto a, auto b) { return a != 0 || b != 0; });
using XorOp = decltype([](auto a, auto b) { return (a != 0) != (b != 0); });
using BitwiseAndOp = decltype([](auto a, auto b) { return static_cast<decltype(a)>(a & b); });
using BitwiseOrOp = decltype([](auto a, auto b) { return static_cast<decltype(a)>(a | b); });
using BitwiseXorOp = decltype([](auto a, auto b) { return static_cast<decltype(a)>(a ^ b); });

// Operator BitShift, since version 11: unsigned ints; shifting by >= the bit width gives 0.
struct BitShiftOp {
  bool left;
  explicit BitShiftOp(const KernelContext& ctx) : left(ctx.attr_string("direction", "") == "LEFT") {}
  template <typename C> C operator()(C a, C b) const {
    if (b >= sizeof(C) * 8) return C(0);
    return static_cast<C>(left ? static_cast<WrapT<C>>(a) << b : a >> b);
  }
};

template <typename Op>
constexpr bool kChecksDivisor = requires { Op::kChecksDivisor; };

enum class BinTypes { kNumeric, kNumericOrBool, kInt, kUnsigned, kBool };

template <BinTypes S, typename F>
Status dispatch_bin(DataType t, F&& f) {
  if constexpr (S == BinTypes::kNumeric) return dispatch_numeric(t, f);
  if constexpr (S == BinTypes::kNumericOrBool) return dispatch_with_bool(t, f);
  if constexpr (S == BinTypes::kInt) return dispatch_int(t, f);
  if constexpr (S == BinTypes::kUnsigned) {
    switch (t) {
      case DataType::kUInt8: return f(uint8_t{});
      case DataType::kUInt16: return f(uint16_t{});
      case DataType::kUInt32: return f(uint32_t{});
      case DataType::kUInt64: return f(uint64_t{});
      default: return unsupported(std::string("dtype ") + dtype_name(t) + " is not supported here (unsigned only)");
    }
  }
  if constexpr (S == BinTypes::kBool) {
    if (t == DataType::kBool) return f(uint8_t{});
    return unsupported(std::string("dtype ") + dtype_name(t) + " is not supported here (bool only)");
  }
}

// C = op(A, B) with broadcasting; the output is bool when kBoolOut, else A's dtype.
template <typename Op, BinTypes S, bool kBoolOut>
Status binary_kernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  if (a.dtype() != b.dtype())
    return ctx.fail(std::string("input dtypes differ: ") + dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()));
  auto shapes = binary_shapes(ctx, a, b);
  if (!shapes.ok()) return ctx.fail(shapes.status().message());
  const Op op = make_op<Op>(ctx);
  Tensor y(kBoolOut ? DataType::kBool : a.dtype(), shapes->out);
  Status s = dispatch_bin<S>(a.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    if constexpr (kChecksDivisor<Op> && std::is_integral_v<T>) {
      const T* pb = b.data<T>();
      for (int64_t i = 0; i < b.numel(); ++i)
        if (pb[i] == T(0)) return invalid_argument("integer division by zero");
    }
    if constexpr (kBoolOut) {
      binary_loop(a.data<T>(), shapes->a, b.data<T>(), shapes->b, y.data<uint8_t>(), shapes->out,
                  [&op](T u, T v) -> uint8_t { return op(load_c(u), load_c(v)) ? 1 : 0; });
    } else {
      binary_loop(a.data<T>(), shapes->a, b.data<T>(), shapes->b, y.data<T>(), shapes->out,
                  [&op](T u, T v) { return store_c<T>(op(load_c(u), load_c(v))); });
    }
    return Status::Ok();
  });
  if (!s.ok()) {
    if (s.code() == StatusCode::kUnsupported) return ctx.unsupported_here(s.message());
    return ctx.fail(s.message());
  }
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

// Integer power by squaring (wrapping); negative exponents give the truncated real result.
template <typename I>
I int_pow(I base, int64_t e) {
  if (e < 0) {
    if (base == I(1)) return I(1);
    if constexpr (std::is_signed_v<I>) {
      if (base == I(-1)) return (e % 2) ? I(-1) : I(1);
    }
    return I(0);
  }
  WrapT<I> r = 1, x = static_cast<WrapT<I>>(base);
  while (e) {
    if (e & 1) r *= x;
    x *= x;
    e >>= 1;
  }
  return static_cast<I>(r);
}

template <typename T, typename E>
T pow_element(T a, E b) {
  using CA = compute_t<T>;
  using CB = compute_t<E>;
  const CA va = load_c(a);
  const CB vb = load_c(b);
  if constexpr (std::is_integral_v<CA> && std::is_integral_v<CB>) {
    return int_pow<CA>(va, static_cast<int64_t>(vb));
  } else if constexpr (std::is_integral_v<CA>) {
    return saturating_int<CA>(std::pow(static_cast<double>(va), static_cast<double>(vb)));
  } else if constexpr (std::is_same_v<CA, CB>) {
    return store_c<T>(std::pow(va, vb));
  } else {
    return store_c<T>(static_cast<CA>(std::pow(static_cast<double>(va), static_cast<double>(vb))));
  }
}

// Operator Pow, since version 12 (15 adds bfloat16): the exponent may have another numeric
// dtype than the base; the output has the base's dtype.
Status pow_kernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& a = ctx.in(0);
  const Tensor& b = ctx.in(1);
  auto shapes = binary_shapes(ctx, a, b);
  if (!shapes.ok()) return ctx.fail(shapes.status().message());
  // A differently typed exponent is widened once (int64 or float64) so each base dtype
  // needs only three loop instantiations.
  Tensor e = b;
  if (b.dtype() != a.dtype()) {
    const DataType wide = dtype_is_integer(b.dtype()) ? DataType::kInt64 : DataType::kFloat64;
    auto cast = cast_tensor(b, wide);
    if (!cast.ok()) return ctx.unsupported_here(cast.status().message());
    e = std::move(cast).value();
  }
  Tensor y(a.dtype(), shapes->out);
  Status s = dispatch_numeric(a.dtype(), [&](auto ta) -> Status {
    using T = decltype(ta);
    auto run = [&](auto tb) {
      using E = decltype(tb);
      binary_loop(a.data<T>(), shapes->a, e.data<E>(), shapes->b, y.data<T>(), shapes->out,
                  [](T u, E v) { return pow_element<T, E>(u, v); });
    };
    if (e.dtype() == a.dtype()) run(T{});
    else if (e.dtype() == DataType::kInt64) run(int64_t{});
    else run(double{});
    return Status::Ok();
  });
  if (!s.ok()) return ctx.unsupported_here(s.message());
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

}  // namespace

void register_elementwise_binary_kernels(KernelRegistry& r) {
  using ir::OpKind;
  constexpr BinTypes kNum = BinTypes::kNumeric, kNumB = BinTypes::kNumericOrBool, kInt = BinTypes::kInt;
  r.add(OpKind::kAdd, binary_kernel<AddOp, kNum, false>);
  r.add(OpKind::kSub, binary_kernel<SubOp, kNum, false>);
  r.add(OpKind::kMul, binary_kernel<MulOp, kNum, false>);
  r.add(OpKind::kDiv, binary_kernel<DivOp, kNum, false>);
  r.add(OpKind::kMod, binary_kernel<ModOp, kNum, false>);
  r.add(OpKind::kPow, pow_kernel);
  r.add(OpKind::kEqual, binary_kernel<EqualOp, kNumB, true>);
  r.add(OpKind::kGreater, binary_kernel<GreaterOp, kNumB, true>);
  r.add(OpKind::kGreaterOrEqual, binary_kernel<GreaterOrEqualOp, kNumB, true>);
  r.add(OpKind::kLess, binary_kernel<LessOp, kNumB, true>);
  r.add(OpKind::kLessOrEqual, binary_kernel<LessOrEqualOp, kNumB, true>);
  r.add(OpKind::kAnd, binary_kernel<AndOp, BinTypes::kBool, true>);
  r.add(OpKind::kOr, binary_kernel<OrOp, BinTypes::kBool, true>);
  r.add(OpKind::kXor, binary_kernel<XorOp, BinTypes::kBool, true>);
  r.add(OpKind::kBitwiseAnd, binary_kernel<BitwiseAndOp, kInt, false>);
  r.add(OpKind::kBitwiseOr, binary_kernel<BitwiseOrOp, kInt, false>);
  r.add(OpKind::kBitwiseXor, binary_kernel<BitwiseXorOp, kInt, false>);
  r.add(OpKind::kBitShift, binary_kernel<BitShiftOp, BinTypes::kUnsigned, false>);
}

}  // namespace kiln::cpu
