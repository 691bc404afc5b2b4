// CPU reference kernels: activation functions (ONNX Relu, LeakyRelu, Elu, Selu, Celu, Sigmoid,
// HardSigmoid, HardSwish, Softplus, Softsign, Mish, Gelu, ThresholdedRelu, Shrink, PRelu, Clip).
// Attributes are read once per node into the functor; formulas cite onnx/docs/Operators.md.
// Exponential forms are written in their overflow-safe variants (expm1, log1p, split by sign).
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/ops_elementwise_broadcast.h"

namespace kiln::cpu {
namespace {

// Operator Relu, since version 14: floats and signed ints; max(0, x).
struct ReluOp {
  template <typename C> C operator()(C x) const { return x > C(0) ? x : C(0); }
};

// Operator LeakyRelu, since version 16: x >= 0 ? x : alpha * x (alpha = 0.01).
struct LeakyReluOp {
  float alpha;
  explicit LeakyReluOp(const KernelContext& ctx) : alpha(ctx.attr_float("alpha", 0.01f)) {}
  template <typename C> C operator()(C x) const { return x >= C(0) ? x : C(alpha) * x; }
};

// Operator Elu, since version 6: x >= 0 ? x : alpha * (exp(x) - 1) (alpha = 1).
struct EluOp {
  float alpha;
  explicit EluOp(const KernelContext& ctx) : alpha(ctx.attr_float("alpha", 1.0f)) {}
  template <typename C> C operator()(C x) const { return x >= C(0) ? x : C(alpha) * std::expm1(x); }
};

// Operator Selu, since version 6: gamma * (x > 0 ? x : alpha * exp(x) - alpha); the defaults
// are the float32 values the spec lists.
struct SeluOp {
  float alpha, gamma;
  explicit SeluOp(const KernelContext& ctx)
      : alpha(ctx.attr_float("alpha", 1.67326319217681884765625f)),
        gamma(ctx.attr_float("gamma", 1.05070102214813232421875f)) {}
  template <typename C> C operator()(C x) const {
    return C(gamma) * (x > C(0) ? x : C(alpha) * std::expm1(x));
  }
};

// Operator Celu, since version 12: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
struct CeluOp {
  float alpha;
  explicit CeluOp(const KernelContext& ctx) : alpha(ctx.attr_float("alpha", 1.0f)) {}
  template <typename C> C operator()(C x) const {
    return x > C(0) ? x : C(alpha) * std::expm1(x / C(alpha));
  }
};

// Operator Sigmoid, since version 13: 1 / (1 + exp(-x)), evaluated so exp never overflows.
struct SigmoidOp {
  template <typename C> C operator()(C x) const {
    if (x >= C(0)) return C(1) / (C(1) + std::exp(-x));
    const C e = std::exp(x);
    return e / (C(1) + e);
  }
};

// Operator HardSigmoid, since version 6: max(0, min(1, alpha * x + beta)) (0.2, 0.5).
struct HardSigmoidOp {
  float alpha, beta;
  explicit HardSigmoidOp(const KernelContext& ctx)
      : alpha(ctx.attr_float("alpha", 0.2f)), beta(ctx.attr_float("beta", 0.5f)) {}
  template <typename C> C operator()(C x) const {
    const C v = C(alpha) * x + C(beta);
    return v < C(0) ? C(0) : (v > C(1) ? C(1) : v);
  }
};

// Operator HardSwish, since version 14: x * max(0, min(1, x / 6 + 0.5)).
struct HardSwishOp {
  template <typename C> C operator()(C x) const {
    const C v = x / C(6) + C(0.5);
    return x * (v < C(0) ? C(0) : (v > C(1) ? C(1) : v));
  }
};

// log(1 + exp(x)) without overflow for large x.
template <typename C>
C softplus(C x) {
  return x > C(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

// Operator Softplus, since version 1: log(exp(x) + 1).
struct SoftplusOp {
  template <typename C> C operator()(C x) const { return softplus(x); }
};

// Operator Softsign, since version 1: x / (1 + |x|).
struct SoftsignOp {
  template <typename C> C operator()(C x) const { return x / (C(1) + std::fabs(x)); }
};

// Operator Mish, since version 18: x * tanh(softplus(x)).
struct MishOp {
  template <typename C> C operator()(C x) const { return x * std::tanh(softplus(x)); }
};

// Operator Gelu, since version 20: approximate="none": 0.5 x (1 + erf(x / sqrt 2));
// "tanh": 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
struct GeluOp {
  bool tanh_approx;
  explicit GeluOp(const KernelContext& ctx) : tanh_approx(ctx.attr_string("approximate", "none") == "tanh") {}
  template <typename C> C operator()(C x) const {
    if (tanh_approx) {
      const C k = C(0.7978845608028654);  // sqrt(2 / pi)
      return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
    }
    return C(0.5) * x * (C(1) + std::erf(x * C(0.7071067811865476)));
  }
};

// Operator ThresholdedRelu, since version 10: x > alpha ? x : 0 (alpha = 1).
struct ThresholdedReluOp {
  float alpha;
  explicit ThresholdedReluOp(const KernelContext& ctx) : alpha(ctx.attr_float("alpha", 1.0f)) {}
  template <typename C> C operator()(C x) const { return x > C(alpha) ? x : C(0); }
};

// Operator Shrink, since version 9: numeric types; x < -lambd ? x + bias : x > lambd ? x - bias : 0.
// Integers compare and shift in double, then convert back (truncating, as numpy's astype).
struct ShrinkOp {
  float lambd, bias;
  explicit ShrinkOp(const KernelContext& ctx)
      : lambd(ctx.attr_float("lambd", 0.5f)), bias(ctx.attr_float("bias", 0.0f)) {}
  template <typename C> C operator()(C x) const {
    using W = std::conditional_t<std::is_floating_point_v<C>, C, double>;
    const W v = static_cast<W>(x);
    if (v < -W(lambd)) return static_cast<C>(v + W(bias));
    if (v > W(lambd)) return static_cast<C>(v - W(bias));
    return C(0);
  }
};

// Operator Clip: before version 11 min/max are float attributes (defaults: the type's range);
// since 11 they are optional scalar inputs of the input's type; since 12 any numeric type.
// y = min(max(x, lo), hi) as numpy.clip (so lo > hi gives hi; NaN stays NaN).
Status clip(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x = ctx.in(0);
  for (int i = 1; i <= 2; ++i) {
    const Tensor* b = ctx.input(i);
    if (ctx.opset() >= 11 && b && b->dtype() != x.dtype())
      return ctx.fail(std::string("input ") + std::to_string(i) + " has dtype " + dtype_name(b->dtype()) +
                      ", expected " + dtype_name(x.dtype()));
    if (ctx.opset() >= 11 && b && b->numel() > 1)
      return ctx.fail("min/max must be scalars, got shape " + shape_str(b->shape()));
  }
  Tensor y(x.dtype(), x.shape());
  Status s = dispatch_numeric(x.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    using C = compute_t<T>;
    C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
    if (ctx.opset() < 11) {
      if constexpr (std::is_floating_point_v<C>) {
        if (ctx.has_attr("min")) lo = static_cast<C>(ctx.attr_float("min", 0));
        if (ctx.has_attr("max")) hi = static_cast<C>(ctx.attr_float("max", 0));
      }
    } else {
      if (const Tensor* t = ctx.input(1); t && t->numel() == 1) lo = load_c(*t->data<T>());
      if (const Tensor* t = ctx.input(2); t && t->numel() == 1) hi = load_c(*t->data<T>());
    }
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const C v = load_c(px[i]);
      const C a = v < lo ? lo : v;
      py[i] = store_c<T>(hi < a ? hi : a);
    }
    return Status::Ok();
  });
  if (!s.ok()) return ctx.unsupported_here(s.message());
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

// Operator PRelu, since version 7 (numeric since 9): x < 0 ? slope * x : x, slope broadcast
// unidirectionally onto x. Before 7 the slope had to be x's shape or one element; a 1-D slope
// of x's channel count (an old exporter habit) is taken per channel (dim 1).
Status prelu(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& x = ctx.in(0);
  const Tensor& slope = ctx.in(1);
  if (slope.dtype() != x.dtype())
    return ctx.fail(std::string("slope dtype ") + dtype_name(slope.dtype()) + " differs from X dtype " +
                    dtype_name(x.dtype()));
  Shape ss = slope.shape();
  if (ctx.opset() < 7 && ss.size() == 1 && x.rank() > 2 && ss[0] == x.dim(1) && ss[0] != x.dim(-1)) {
    ss = Shape(x.rank() - 1, 1);
    ss[0] = x.dim(1);
  }
  auto out_shape = broadcast_shape(x.shape(), ss);
  if (!out_shape.ok()) return ctx.fail(out_shape.status().message());
  if (*out_shape != x.shape())
    return ctx.fail("slope " + shape_str(slope.shape()) + " does not broadcast onto X " + shape_str(x.shape()));
  Tensor y(x.dtype(), x.shape());
  Status s = dispatch_numeric(x.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    binary_loop(x.data<T>(), x.shape(), slope.data<T>(), ss, y.data<T>(), x.shape(), [](T a, T b) {
      const auto va = load_c(a);
      return va < decltype(va)(0) ? store_c<T>(va * load_c(b)) : a;
    });
    return Status::Ok();
  });
  if (!s.ok()) return ctx.unsupported_here(s.message());
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

}  // namespace

void register_elementwise_activation_kernels(KernelRegistry& r) {
  using ir::OpKind;
  constexpr UnaryTypes kF = UnaryTypes::kFloat, kN = UnaryTypes::kNumeric;
  r.add(OpKind::kRelu, unary_kernel<ReluOp, kN>);
  r.add(OpKind::kLeakyRelu, unary_kernel<LeakyReluOp, kF>);
  r.add(OpKind::kElu, unary_kernel<EluOp, kF>);
  r.add(OpKind::kSelu, unary_kernel<SeluOp, kF>);
  r.add(OpKind::kCelu, unary_kernel<CeluOp, kF>);
  r.add(OpKind::kSigmoid, unary_kernel<SigmoidOp, kF>);
  r.add(OpKind::kHardSigmoid, unary_kernel<HardSigmoidOp, kF>);
  r.add(OpKind::kHardSwish, unary_kernel<HardSwishOp, kF>);
  r.add(OpKind::kSoftplus, unary_kernel<SoftplusOp, kF>);
  r.add(OpKind::kSoftsign, unary_kernel<SoftsignOp, kF>);
  r.add(OpKind::kMish, unary_kernel<MishOp, kF>);
  r.add(OpKind::kGelu, unary_kernel<GeluOp, kF>);
  r.add(OpKind::kThresholdedRelu, unary_kernel<ThresholdedReluOp, kF>);
  r.add(OpKind::kShrink, unary_kernel<ShrinkOp, kN>);
  r.add(OpKind::kClip, clip);
  r.add(OpKind::kPRelu, prelu);
}

}  // namespace kiln::cpu
