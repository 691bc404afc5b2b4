// CPU reference kernels, movement family: data-dependent selection whose output shape depends
// on values (NonZero, Compress, Unique). Values are compared through exact keys (int64 for
// signed ints and bool, uint64 for unsigned, double for every float format).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backends/cpu/ops_movement_common.h"

namespace kiln::cpu::movement {
namespace {

// Operator NonZero, since version 9: indices of non-zero elements, shape [rank, count], in
// row-major order (a scalar counts as 1-D).
Status non_zero(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  if (elem_bytes(x.dtype()) == 0) return ctx.unsupported_here(std::string("dtype ") + dtype_name(x.dtype()));
  const int r = std::max(x.rank(), 1);
  const Shape shape = x.rank() == 0 ? Shape{1} : x.shape();
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (load_as_double(x.dtype(), x.raw(), i) != 0.0) hits.push_back(i);
  const int64_t n = static_cast<int64_t>(hits.size());
  Tensor y(DataType::kInt64, {r, n});
  const std::vector<int64_t> st = shape_strides(shape);
  for (int64_t j = 0; j < n; ++j)
    for (int k = 0; k < r; ++k) y.data<int64_t>()[k * n + j] = hits[j] / st[k] % shape[k];
  ctx.set_output(0, y);
  return Status::Ok();
}

// Operator Compress, since version 9 / 11 (negative axis): keeps the slices along `axis` (or
// the elements of the flattened input) whose condition entry is true; a short condition drops
// the rest.
Status compress(KernelContext& ctx) {
  const Tensor &x = ctx.in(0), &c = ctx.in(1);
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  if (c.rank() != 1 || elem_bytes(c.dtype()) == 0) return ctx.fail("condition must be a 1-D bool tensor");
  const bool has_axis = ctx.has_attr("axis");
  int axis = 0;
  Tensor in = x;
  if (has_axis) {
    auto a = norm_axis(ctx, ctx.attr_int("axis", 0), x.rank());
    if (!a.ok()) return a.status();
    axis = *a;
  } else {
    in = x.reshaped({x.numel()});
  }
  const int64_t d = in.dim(axis);
  if (c.numel() > d)
    return ctx.fail("condition has " + std::to_string(c.numel()) + " entries for a dim of " + std::to_string(d));
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < c.numel(); ++i)
    if (load_as_double(c.dtype(), c.raw(), i) != 0.0) keep.push_back(i);
  Shape out = in.shape();
  out[axis] = static_cast<int64_t>(keep.size());
  int64_t outer = 1;
  for (int k = 0; k < axis; ++k) outer *= in.dim(k);
  const size_t block = static_cast<size_t>(shape_strides(in.shape())[axis]) * *es;
  Tensor y(x.dtype(), out);
  char* dst = static_cast<char*>(y.raw());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j : keep) {
      std::memcpy(dst, static_cast<const char*>(in.raw()) + (o * d + j) * block, block);
      dst += block;
    }
  ctx.set_output(0, y);
  return Status::Ok();
}

// A strict weak order on keys: NaNs sort last and equal one another (as numpy.unique does),
// so a NaN input cannot break the sort.
template <typename K>
bool key_less(K a, K b) {
  if constexpr (std::is_floating_point_v<K>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}
template <typename K>
bool key_equal(K a, K b) {
  if constexpr (std::is_floating_point_v<K>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  }
  return a == b;
}

// Unique over `n` slices of `len` keys each (keys[s * len + e]).
template <typename K>
void unique_groups(const std::vector<K>& keys, int64_t n, int64_t len, bool sorted, std::vector<int64_t>* first,
                   std::vector<int64_t>* inverse, std::vector<int64_t>* counts) {
  auto less = [&](int64_t a, int64_t b) {
    return std::lexicographical_compare(keys.begin() + a * len, keys.begin() + (a + 1) * len, keys.begin() + b * len,
                                        keys.begin() + (b + 1) * len, key_less<K>);
  };
  auto equal = [&](int64_t a, int64_t b) {
    return std::equal(keys.begin() + a * len, keys.begin() + (a + 1) * len, keys.begin() + b * len, key_equal<K>);
  };
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), less);
  std::vector<int64_t> group_of(n);
  int64_t groups = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0 || !equal(order[i - 1], order[i])) {
      first->push_back(order[i]);  // stable sort: the smallest index of the group comes first
      counts->push_back(0);
      ++groups;
    }
    group_of[order[i]] = groups - 1;
    ++(*counts)[groups - 1];
  }
  std::vector<int64_t> rank(groups);
  std::iota(rank.begin(), rank.end(), 0);
  if (!sorted) {
    // Reorder groups by first occurrence.
    std::vector<int64_t> by_first(groups);
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return (*first)[a] < (*first)[b]; });
    std::vector<int64_t> f(groups), c(groups);
    for (int64_t g = 0; g < groups; ++g) {
      rank[by_first[g]] = g;
      f[g] = (*first)[by_first[g]];
      c[g] = (*counts)[by_first[g]];
    }
    *first = f;
    *counts = c;
  }
  inverse->resize(n);
  for (int64_t i = 0; i < n; ++i) (*inverse)[i] = rank[group_of[i]];
}

template <typename K>
std::vector<K> slice_keys(const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                          K (*load)(DataType, const void*, int64_t)) {
  std::vector<K> keys(static_cast<size_t>(x.numel()));
  const int64_t len = outer * inner;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t s = 0; s < n; ++s)
      for (int64_t i = 0; i < inner; ++i)
        keys[s * len + o * inner + i] = load(x.dtype(), x.raw(), (o * n + s) * inner + i);
  return keys;
}

uint64_t load_u64(DataType t, const void* d, int64_t i) {
  return t == DataType::kUInt64 ? static_cast<const uint64_t*>(d)[i] : static_cast<uint64_t>(load_as_int64(t, d, i));
}

Tensor int64_vector(const std::vector<int64_t>& v) {
  Tensor t(DataType::kInt64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

// Operator Unique, since version 11: unique elements (or slices along `axis`), sorted or in
// order of first occurrence, with first-occurrence indices, inverse indices and counts.
Status unique(KernelContext& ctx) {
  const Tensor& x0 = ctx.in(0);
  auto es = copy_elem_bytes(ctx, x0);
  if (!es.ok()) return es.status();
  const bool sorted = ctx.attr_int("sorted", 1) != 0;
  Tensor x = x0;
  int axis = 0;
  if (ctx.has_attr("axis")) {
    auto a = norm_axis(ctx, ctx.attr_int("axis", 0), x0.rank());
    if (!a.ok()) return a.status();
    axis = *a;
  } else {
    x = x0.reshaped({x0.numel()});
  }
  const int64_t n = x.dim(axis);
  int64_t outer = 1;
  for (int k = 0; k < axis; ++k) outer *= x.dim(k);
  const int64_t inner = shape_strides(x.shape())[axis];
  const int64_t len = outer * inner;
  std::vector<int64_t> first, inverse, counts;
  const DataType t = x.dtype();
  if (dtype_is_float(t)) {
    unique_groups(slice_keys<double>(x, outer, n, inner, load_as_double), n, len, sorted, &first, &inverse, &counts);
  } else if (dtype_is_integer(t) && !dtype_is_signed(t)) {
    unique_groups(slice_keys<uint64_t>(x, outer, n, inner, load_u64), n, len, sorted, &first, &inverse, &counts);
  } else {
    unique_groups(slice_keys<int64_t>(x, outer, n, inner, load_as_int64), n, len, sorted, &first, &inverse, &counts);
  }
  Shape out = x.shape();
  out[axis] = static_cast<int64_t>(first.size());
  Tensor y(t, out);
  const size_t block = static_cast<size_t>(inner) * *es;
  char* dst = static_cast<char*>(y.raw());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t f : first) {
      std::memcpy(dst, static_cast<const char*>(x.raw()) + (o * n + f) * block, block);
      dst += block;
    }
  ctx.set_output(0, y);
  if (ctx.output_wanted(1)) ctx.set_output(1, int64_vector(first));
  if (ctx.output_wanted(2)) ctx.set_output(2, int64_vector(inverse));
  if (ctx.output_wanted(3)) ctx.set_output(3, int64_vector(counts));
  return Status::Ok();
}

}  // namespace

void register_select_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kNonZero, with_inputs<non_zero, 1>);
  r.add(ir::OpKind::kCompress, with_inputs<compress, 2>);
  r.add(ir::OpKind::kUnique, with_inputs<unique, 1>);
}

}  // namespace kiln::cpu::movement
