// CPU reference kernels: the ten Reduce* ops over one shared core. The core walks the input
// once in memory order with the reduced and kept dims coalesced into alternating groups, and
// folds each element into the accumulator of its output; the ops differ only in a small
// policy (init / step / finish). Also the family's registration (ArgMax..CumSum and the losses
// live in ops_reduce_argtopk.cc and ops_reduce_loss.cc).
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/ops_reduce_internal.h"

namespace kiln::cpu {
namespace {

// The shape of a reduction: every input element folds into exactly one output element, and
// each output receives `count` elements.
struct ReduceGeom {
  Shape out_shape;
  int64_t out_numel = 1;
  int64_t count = 1;                  // input elements per output (0 for an empty reduced set)
  std::vector<int64_t> group_size;    // coalesced runs of dims, outer to inner; size-1 dims dropped
  std::vector<bool> group_reduced;
};

ReduceGeom make_geom(const Shape& in, const std::vector<bool>& reduced, bool keepdims) {
  ReduceGeom g;
  for (size_t d = 0; d < in.size(); ++d) {
    if (reduced[d]) {
      g.count *= in[d];
      if (keepdims) g.out_shape.push_back(1);
    } else {
      g.out_numel *= in[d];
      g.out_shape.push_back(in[d]);
    }
    if (in[d] == 1) continue;
    if (!g.group_size.empty() && g.group_reduced.back() == reduced[d]) {
      g.group_size.back() *= in[d];
    } else {
      g.group_size.push_back(in[d]);
      g.group_reduced.push_back(reduced[d]);
    }
  }
  if (g.group_size.empty()) {  // a single element (scalar or all dims 1)
    g.group_size.push_back(1);
    g.group_reduced.push_back(false);
  }
  return g;
}

// Folds every element of `in` (numel elements, row-major) into acc[output index].
template <typename T, typename Op>
void fold_all(const ReduceGeom& g, const T* in, int64_t numel, const Op& op, typename Op::Acc* acc) {
  using V = AccOf<T>;
  if (numel == 0) return;
  const int groups = static_cast<int>(g.group_size.size());
  std::vector<int64_t> out_stride(groups, 0), idx(groups, 0);
  for (int64_t d = groups - 1, s = 1; d >= 0; --d) {
    if (g.group_reduced[d]) continue;
    out_stride[d] = s;
    s *= g.group_size[d];
  }
  const int64_t run = g.group_size.back();  // innermost group: contiguous in the input
  const bool run_reduced = g.group_reduced.back();
  int64_t out_off = 0;
  for (int64_t pos = 0; pos < numel; pos += run) {
    const T* x = in + pos;
    if (run_reduced) {
      typename Op::Acc a = acc[out_off];
      for (int64_t j = 0; j < run; ++j) op.step(a, load_as<V>(x[j]));
      acc[out_off] = a;
    } else {
      typename Op::Acc* a = acc + out_off;
      for (int64_t j = 0; j < run; ++j) op.step(a[j], load_as<V>(x[j]));
    }
    // Advance the odometer over the outer groups, tracking the output offset.
    for (int d = groups - 2; d >= 0; --d) {
      if (++idx[d] < g.group_size[d]) {
        out_off += out_stride[d];
        break;
      }
      out_off -= out_stride[d] * (g.group_size[d] - 1);
      idx[d] = 0;
    }
  }
}

// Stores a real-valued result into T; for integer T, NaN gives 0 and out-of-range values
// saturate (log/sqrt of integer data can yield -inf or NaN, which C++ casts leave undefined).
template <typename T, typename R>
T store_result(R v) {
  if constexpr (std::is_floating_point_v<R> && std::is_integral_v<T>) {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<R>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<R>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  } else {
    return store_as<T>(v);
  }
}

// Floating type for transcendental finishes: the accumulator itself, or double for integers.
template <typename T>
using RealOf = std::conditional_t<std::is_floating_point_v<AccOf<T>>, AccOf<T>, double>;

template <typename V>
V abs_value(V x) {
  if constexpr (std::is_unsigned_v<V>) return x;
  else if constexpr (std::is_integral_v<V>) return x < 0 ? acc_mul(x, V{-1}) : x;  // wraps for INT64_MIN
  else return x < 0 ? -x : x;
}

template <typename V>
bool is_nan_value(V x) {
  if constexpr (std::is_floating_point_v<V>) return std::isnan(x);
  else return false;
}

// Policies, one per op (Operators.md, "ReduceX", since versions 1/11/13/18). Empty reduced sets
// give the identity element (ReduceMax: -inf or the type's lowest value; ReduceMean: NaN).
template <typename T>
struct SumOp {
  using Acc = AccOf<T>;
  Acc init() const { return 0; }
  void step(Acc& a, Acc x) const { a = acc_add(a, x); }
  T finish(Acc a, int64_t) const { return store_result<T>(a); }
};

template <typename T>
struct MeanOp {
  using Acc = AccOf<T>;
  Acc init() const { return 0; }
  void step(Acc& a, Acc x) const { a = acc_add(a, x); }
  T finish(Acc a, int64_t n) const {
    if constexpr (std::is_floating_point_v<Acc>) return store_result<T>(a / static_cast<Acc>(n));
    else return store_result<T>(n == 0 ? Acc{0} : static_cast<Acc>(a / static_cast<Acc>(n)));
  }
};

template <typename T>
struct MaxOp {
  using Acc = AccOf<T>;
  Acc init() const {
    if constexpr (std::is_floating_point_v<Acc>) return -std::numeric_limits<Acc>::infinity();
    else return static_cast<Acc>(std::numeric_limits<T>::lowest());
  }
  // NaN propagates (once the accumulator is NaN no comparison replaces it).
  void step(Acc& a, Acc x) const {
    if (x > a || is_nan_value(x)) a = x;
  }
  T finish(Acc a, int64_t) const { return store_result<T>(a); }
};

template <typename T>
struct MinOp {
  using Acc = AccOf<T>;
  Acc init() const {
    if constexpr (std::is_floating_point_v<Acc>) return std::numeric_limits<Acc>::infinity();
    else return static_cast<Acc>(std::numeric_limits<T>::max());
  }
  void step(Acc& a, Acc x) const {
    if (x < a || is_nan_value(x)) a = x;
  }
  T finish(Acc a, int64_t) const { return store_result<T>(a); }
};

template <typename T>
struct ProdOp {
  using Acc = AccOf<T>;
  Acc init() const { return 1; }
  void step(Acc& a, Acc x) const { a = acc_mul(a, x); }
  T finish(Acc a, int64_t) const { return store_result<T>(a); }
};

template <typename T>
struct L1Op {
  using Acc = AccOf<T>;
  Acc init() const { return 0; }
  void step(Acc& a, Acc x) const { a = acc_add(a, abs_value(x)); }
  T finish(Acc a, int64_t) const { return store_result<T>(a); }
};

template <typename T>
struct L2Op {
  using Acc = AccOf<T>;
  Acc init() const { return 0; }
  void step(Acc& a, Acc x) const { a = acc_add(a, acc_mul(x, x)); }
  T finish(Acc a, int64_t) const { return store_result<T>(std::sqrt(static_cast<RealOf<T>>(a))); }
};

template <typename T>
struct SumSquareOp {
  using Acc = AccOf<T>;
  Acc init() const { return 0; }
  void step(Acc& a, Acc x) const { a = acc_add(a, acc_mul(x, x)); }
  T finish(Acc a, int64_t) const { return store_result<T>(a); }
};

template <typename T>
struct LogSumOp {
  using Acc = AccOf<T>;
  Acc init() const { return 0; }
  void step(Acc& a, Acc x) const { a = acc_add(a, x); }
  T finish(Acc a, int64_t) const { return store_result<T>(std::log(static_cast<RealOf<T>>(a))); }
};

// log(sum(exp(x))) computed online as m + log(s) with m the running maximum and
// s = sum(exp(x - m)), rescaled whenever m grows: exact in exact arithmetic, no overflow.
template <typename T>
struct LogSumExpOp {
  using R = RealOf<T>;
  struct Acc {
    R m;
    R s;
  };
  Acc init() const { return {-std::numeric_limits<R>::infinity(), 0}; }
  void step(Acc& a, AccOf<T> xv) const {
    const R x = static_cast<R>(xv);
    if (x == -std::numeric_limits<R>::infinity()) return;  // exp(-inf) adds nothing
    if (x > a.m) {
      a.s = a.s * std::exp(a.m - x) + 1;
      a.m = x;
    } else if (x == a.m) {
      a.s += 1;
    } else {
      a.s += std::exp(x - a.m);  // NaN x makes s NaN
    }
  }
  T finish(Acc a, int64_t) const {
    if (a.s == 0) return store_result<T>(-std::numeric_limits<R>::infinity());
    return store_result<T>(a.m + std::log(a.s));
  }
};

// Which axes to reduce: `axes` input (ReduceSum since 13, the others since 18) or attribute
// (earlier opsets); either is accepted when present. Empty axes reduce everything unless
// noop_with_empty_axes, which reduces nothing (elementwise pre/post steps still apply).
StatusOr<std::vector<bool>> reduce_mask(const KernelContext& ctx, int rank) {
  std::vector<int64_t> axes;
  if (ctx.has_input(1)) {
    const Tensor& t = ctx.in(1);
    if (t.rank() > 1) return ctx.fail("axes must be 1-D, got shape " + shape_str(t.shape()));
    KILN_ASSIGN_OR_RETURN(axes, read_int_values(ctx, t, "axes"));
  } else {
    axes = ctx.attr_ints("axes");
  }
  std::vector<bool> mask(static_cast<size_t>(rank), false);
  if (axes.empty()) {
    if (!ctx.attr_int("noop_with_empty_axes", 0)) mask.assign(mask.size(), true);
    return mask;
  }
  for (int64_t a : axes) {
    const int64_t given = a;
    if (!normalize_axis(a, rank))
      return ctx.fail("axis " + std::to_string(given) + " is out of range for rank " + std::to_string(rank));
    if (mask[a]) return ctx.fail("axis " + std::to_string(given) + " is repeated");
    mask[a] = true;
  }
  return mask;
}

template <template <typename> class OpT, typename T>
Status run_reduce(KernelContext& ctx, const Tensor& x, const ReduceGeom& g, DataType out_dtype) {
  using Op = OpT<T>;
  const Op op;
  std::vector<typename Op::Acc> acc(static_cast<size_t>(g.out_numel), op.init());
  fold_all(g, x.data<T>(), x.numel(), op, acc.data());
  Tensor out(out_dtype, g.out_shape);
  T* y = out.data<T>();
  for (int64_t o = 0; o < g.out_numel; ++o) y[o] = op.finish(acc[o], g.count);
  // Bool data folded as bytes: an empty ReduceMin gives 255, which must read as true.
  if constexpr (std::is_same_v<T, uint8_t>)
    if (out_dtype == DataType::kBool)
      for (int64_t o = 0; o < g.out_numel; ++o) y[o] = y[o] != 0;
  ctx.set_output(0, out);
  return Status::Ok();
}

// kBoolAsUInt8: ReduceMax/Min (since 20) accept bool, reduced as bytes and renormalized to 0/1.
template <template <typename> class OpT, bool kBoolAsUInt8 = false>
Status reduce_kernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x = ctx.in(0);
  KILN_ASSIGN_OR_RETURN(std::vector<bool> mask, reduce_mask(ctx, x.rank()));
  const ReduceGeom g = make_geom(x.shape(), mask, ctx.attr_int("keepdims", 1) != 0);
  if (kBoolAsUInt8 && x.dtype() == DataType::kBool) return run_reduce<OpT, uint8_t>(ctx, x, g, DataType::kBool);
  Status s = dispatch_numeric(x.dtype(), [&](auto tag) { return run_reduce<OpT, decltype(tag)>(ctx, x, g, x.dtype()); });
  if (s.code() == StatusCode::kUnsupported) return ctx.unsupported_here(s.message());
  return s;
}

}  // namespace

void register_reduce_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kReduceSum, reduce_kernel<SumOp>);
  r.add(ir::OpKind::kReduceMean, reduce_kernel<MeanOp>);
  r.add(ir::OpKind::kReduceMax, reduce_kernel<MaxOp, true>);
  r.add(ir::OpKind::kReduceMin, reduce_kernel<MinOp, true>);
  r.add(ir::OpKind::kReduceProd, reduce_kernel<ProdOp>);
  r.add(ir::OpKind::kReduceL1, reduce_kernel<L1Op>);
  r.add(ir::OpKind::kReduceL2, reduce_kernel<L2Op>);
  r.add(ir::OpKind::kReduceLogSum, reduce_kernel<LogSumOp>);
  r.add(ir::OpKind::kReduceLogSumExp, reduce_kernel<LogSumExpOp>);
  r.add(ir::OpKind::kReduceSumSquare, reduce_kernel<SumSquareOp>);
  register_argtopk_kernels(r);
  register_loss_kernels(r);
}

}  // namespace kiln::cpu
