// CPU reference kernels: single-axis reductions and scans: ArgMax, ArgMin, TopK, CumSum.
// Each views its input as [outer, n, inner] around the one axis it works along.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backends/cpu/ops_reduce_internal.h"

namespace kiln::cpu {
namespace {

// [outer, n, inner] around `axis` (already normalized).
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisView view_around(const Shape& s, int64_t axis) {
  AxisView v;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) {
    if (d < axis) v.outer *= s[d];
    else if (d == axis) v.n = s[d];
    else v.inner *= s[d];
  }
  return v;
}

template <typename V>
bool is_nan_value(V x) {
  if constexpr (std::is_floating_point_v<V>) return std::isnan(x);
  else return false;
}

// ArgMax/ArgMin (Operators.md "ArgMax", since 1/11/12/13): index of the extreme value along
// `axis`, first occurrence unless select_last_index. NaN counts as the extreme (as numpy does).
template <bool kMax, typename T>
void arg_extreme(const T* x, const AxisView& v, bool last, int64_t* out) {
  using V = AccOf<T>;
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      const T* p = x + o * v.n * v.inner + i;
      V best = load_as<V>(p[0]);
      int64_t best_k = 0;
      for (int64_t k = 1; k < v.n; ++k) {
        const V c = load_as<V>(p[k * v.inner]);
        if (is_nan_value(best)) {
          if (last && is_nan_value(c)) best_k = k;
          continue;
        }
        const bool better = is_nan_value(c) || (kMax ? c > best : c < best);
        if (better || (last && c == best)) {
          best = c;
          best_k = k;
        }
      }
      out[o * v.inner + i] = best_k;
    }
  }
}

template <bool kMax>
Status arg_kernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x = ctx.in(0);
  int64_t axis = ctx.attr_int("axis", 0);
  if (!normalize_axis(axis, x.rank()))
    return ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()));
  if (x.dim(static_cast<int>(axis)) == 0) return ctx.fail("cannot take the arg-extreme of an empty axis");
  const bool keepdims = ctx.attr_int("keepdims", 1) != 0;
  const bool last = ctx.attr_int("select_last_index", 0) != 0;
  Shape out_shape = x.shape();
  if (keepdims) out_shape[axis] = 1;
  else out_shape.erase(out_shape.begin() + axis);
  Tensor out(DataType::kInt64, out_shape);
  const AxisView v = view_around(x.shape(), axis);
  Status s = dispatch_numeric(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    arg_extreme<kMax>(x.data<T>(), v, last, out.data<int64_t>());
    return Status::Ok();
  });
  if (!s.ok()) return ctx.unsupported_here(s.message());
  ctx.set_output(0, out);
  return Status::Ok();
}

// TopK (Operators.md "TopK", since 1/10/11): the k largest (or smallest) values along `axis`
// and their indices; equal values keep the lower index first. NaN sorts after every number.
template <typename T>
void top_k(const T* x, const AxisView& v, int64_t k, bool largest, T* values, int64_t* indices) {
  using V = AccOf<T>;
  std::vector<V> row(static_cast<size_t>(v.n));
  std::vector<int64_t> order(static_cast<size_t>(v.n));
  auto before = [&](int64_t i, int64_t j) {
    const V a = row[i], b = row[j];
    const bool an = is_nan_value(a), bn = is_nan_value(b);
    if (an || bn) return an && bn ? i < j : bn;
    if (a != b) return largest ? a > b : a < b;
    return i < j;
  };
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      const T* p = x + o * v.n * v.inner + i;
      for (int64_t j = 0; j < v.n; ++j) row[j] = load_as<V>(p[j * v.inner]);
      std::iota(order.begin(), order.end(), int64_t{0});
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t dst = (o * k + j) * v.inner + i;
        values[dst] = p[order[j] * v.inner];
        indices[dst] = order[j];
      }
    }
  }
}

Status topk_kernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x = ctx.in(0);
  int64_t k = 0;
  if (ctx.opset() >= 10 || ctx.has_input(1)) {
    if (!ctx.has_input(1)) return ctx.fail("input K is missing");
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> kv, read_int_values(ctx, ctx.in(1), "K"));
    if (kv.size() != 1 || ctx.in(1).rank() > 1)
      return ctx.fail("K must hold exactly one value, got shape " + shape_str(ctx.in(1).shape()));
    k = kv[0];
  } else {
    if (!ctx.has_attr("k")) return ctx.fail("attribute k is missing");
    k = ctx.attr_int("k", 0);
  }
  int64_t axis = ctx.attr_int("axis", -1);
  if (!normalize_axis(axis, x.rank()))
    return ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()));
  const AxisView v = view_around(x.shape(), axis);
  if (k < 0 || k > v.n)
    return ctx.fail("K = " + std::to_string(k) + " is outside [0, " + std::to_string(v.n) + "]");
  // `sorted` = 0 leaves the order unspecified; sorted output is a valid answer then too.
  const bool largest = ctx.attr_int("largest", 1) != 0;
  Shape out_shape = x.shape();
  out_shape[axis] = k;
  Tensor values(x.dtype(), out_shape), indices(DataType::kInt64, out_shape);
  Status s = dispatch_numeric(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    top_k(x.data<T>(), v, k, largest, values.data<T>(), indices.data<int64_t>());
    return Status::Ok();
  });
  if (!s.ok()) return ctx.unsupported_here(s.message());
  ctx.set_output(0, values);
  ctx.set_output(1, indices);
  return Status::Ok();
}

// CumSum (Operators.md "CumSum", since 11/14): running sums along `axis`; `exclusive` leaves
// the current element out, `reverse` runs from the end.
template <typename T>
void cum_sum(const T* x, const AxisView& v, bool exclusive, bool reverse, T* y) {
  using V = AccOf<T>;
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      const int64_t base = o * v.n * v.inner + i;
      V acc = 0;
      for (int64_t step = 0; step < v.n; ++step) {
        const int64_t at = base + (reverse ? v.n - 1 - step : step) * v.inner;
        const V cur = load_as<V>(x[at]);
        if (exclusive) {
          y[at] = store_as<T>(acc);
          acc = acc_add(acc, cur);
        } else {
          acc = acc_add(acc, cur);
          y[at] = store_as<T>(acc);
        }
      }
    }
  }
}

Status cumsum_kernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& x = ctx.in(0);
  if (ctx.in(1).rank() > 1 || ctx.in(1).numel() != 1)
    return ctx.fail("axis must be a scalar, got shape " + shape_str(ctx.in(1).shape()));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> av, read_int_values(ctx, ctx.in(1), "axis"));
  int64_t axis = av[0];
  if (!normalize_axis(axis, x.rank()))
    return ctx.fail("axis " + std::to_string(av[0]) + " is out of range for rank " + std::to_string(x.rank()));
  const bool exclusive = ctx.attr_int("exclusive", 0) != 0;
  const bool reverse = ctx.attr_int("reverse", 0) != 0;
  Tensor out(x.dtype(), x.shape());
  const AxisView v = view_around(x.shape(), axis);
  Status s = dispatch_numeric(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    cum_sum(x.data<T>(), v, exclusive, reverse, out.data<T>());
    return Status::Ok();
  });
  if (!s.ok()) return ctx.unsupported_here(s.message());
  ctx.set_output(0, out);
  return Status::Ok();
}

}  // namespace

void register_argtopk_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kArgMax, arg_kernel<true>);
  r.add(ir::OpKind::kArgMin, arg_kernel<false>);
  r.add(ir::OpKind::kTopK, topk_kernel);
  r.add(ir::OpKind::kCumSum, cumsum_kernel);
}

}  // namespace kiln::cpu
