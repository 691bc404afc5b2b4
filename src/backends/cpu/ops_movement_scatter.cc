// CPU reference kernels, movement family: index-driven writes (Scatter, ScatterElements,
// ScatterND). The output starts as a copy of `data`; updates are applied in index order, so
// with reduction "none" the last duplicate index wins. Reductions compute in the element type
// (ints) or in double (float formats, rounded back once per update).
#include <algorithm>
#include <cstring>

#include "backends/cpu/dispatch.h"
#include "backends/cpu/ops_movement_common.h"

namespace kiln::cpu::movement {
namespace {

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

StatusOr<Reduction> parse_reduction(const KernelContext& ctx) {
  const std::string r = ctx.attr_string("reduction", "none");
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return ctx.fail("unknown reduction '" + r + "'");
}

template <typename T>
T combine(T a, T b, Reduction r) {
  switch (r) {
    case Reduction::kAdd:
      return static_cast<T>(a + b);
    case Reduction::kMul:
      return static_cast<T>(a * b);
    case Reduction::kMax:
      return std::max(a, b);
    case Reduction::kMin:
      return std::min(a, b);
    case Reduction::kNone:
      break;
  }
  return b;
}

// dst[di + k] = combine(dst[di + k], src[si + k]) for k < count.
Status apply(const KernelContext& ctx, DataType t, void* dst, int64_t di, const void* src, int64_t si, int64_t count,
             Reduction r, int esize) {
  if (r == Reduction::kNone) {
    std::memcpy(static_cast<char*>(dst) + di * esize, static_cast<const char*>(src) + si * esize,
                static_cast<size_t>(count) * esize);
    return Status::Ok();
  }
  if (dtype_is_float(t) && dtype_bits(t) == 8) {  // the five float8 types: through double
    for (int64_t k = 0; k < count; ++k)
      store_from_double(t, dst, di + k, combine(load_as_double(t, dst, di + k), load_as_double(t, src, si + k), r));
    return Status::Ok();
  }
  if (t == DataType::kBool) return ctx.unsupported_here("reductions on bool");
  return dispatch_numeric(t, [&](auto tag) -> Status {
    using T = decltype(tag);
    T* d = static_cast<T*>(dst) + di;
    const T* s = static_cast<const T*>(src) + si;
    for (int64_t k = 0; k < count; ++k) {
      if constexpr (std::is_arithmetic_v<T>)
        d[k] = combine(d[k], s[k], r);
      else
        d[k] = from_double<T>(combine(to_double(d[k]), to_double(s[k]), r));
    }
    return Status::Ok();
  });
}

// Operator ScatterElements, since version 11 / 16 (reduction add, mul) / 18 (max, min); also
// the deprecated Scatter (versions 9-10), which is ScatterElements without reduction.
Status scatter_elements(KernelContext& ctx) {
  const Tensor &x = ctx.in(0), &it = ctx.in(1), &up = ctx.in(2);
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  auto idx = read_ints(ctx, it, "indices");
  if (!idx.ok()) return idx.status();
  auto red = parse_reduction(ctx);
  if (!red.ok()) return red.status();
  auto axis = norm_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  if (!axis.ok()) return axis.status();
  if (up.dtype() != x.dtype()) return ctx.fail("updates must have the dtype of data");
  if (up.shape() != it.shape()) return ctx.fail("updates and indices must have the same shape");
  if (it.rank() != x.rank()) return ctx.fail("indices must have the rank of data");
  for (int k = 0; k < x.rank(); ++k)
    if (k != *axis && it.dim(k) > x.dim(k))
      return ctx.fail("indices shape " + shape_str(it.shape()) + " exceeds data shape " + shape_str(x.shape()));
  const int r = x.rank();
  const std::vector<int64_t> xs = shape_strides(x.shape());
  Tensor y = x.clone();
  std::vector<int64_t> pos(r, 0);
  const int64_t d = x.dim(*axis);
  for (int64_t i = 0; i < it.numel(); ++i) {
    int64_t j = (*idx)[i];
    if (j < 0) j += d;
    if (j < 0 || j >= d)
      return ctx.fail("index " + std::to_string((*idx)[i]) + " is out of range for a dim of " + std::to_string(d));
    int64_t off = 0;
    for (int k = 0; k < r; ++k) off += (k == *axis ? j : pos[k]) * xs[k];
    Status s = apply(ctx, x.dtype(), y.raw(), off, up.raw(), i, 1, *red, *es);
    if (!s.ok()) return s;
    for (int k = r - 1; k >= 0; --k) {
      if (++pos[k] < it.dim(k)) break;
      pos[k] = 0;
    }
  }
  ctx.set_output(0, y);
  return Status::Ok();
}

// Operator ScatterND, since version 11 / 16 (reduction add, mul) / 18 (max, min): each
// length-k row of `indices` addresses the slice data[i0, ..., ik-1, :], which receives the
// matching slice of `updates` (shape indices.shape[:-1] + data.shape[k:]).
Status scatter_nd(KernelContext& ctx) {
  const Tensor &x = ctx.in(0), &it = ctx.in(1), &up = ctx.in(2);
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  auto idx = read_ints(ctx, it, "indices");
  if (!idx.ok()) return idx.status();
  auto red = parse_reduction(ctx);
  if (!red.ok()) return red.status();
  if (up.dtype() != x.dtype()) return ctx.fail("updates must have the dtype of data");
  if (it.rank() < 1) return ctx.fail("indices must have rank >= 1");
  const int64_t m = it.dim(-1);
  if (m < 1 || m > x.rank()) return ctx.fail("indices' last dim must be in [1, rank(data)]");
  Shape expect(it.shape().begin(), it.shape().end() - 1);
  expect.insert(expect.end(), x.shape().begin() + m, x.shape().end());
  if (up.shape() != expect)
    return ctx.fail("updates shape " + shape_str(up.shape()) + ", expected " + shape_str(expect));
  const std::vector<int64_t> xs = shape_strides(x.shape());
  const int64_t slice = xs[m - 1];
  const int64_t tuples = it.numel() / m;
  Tensor y = x.clone();
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (int64_t j = 0; j < m; ++j) {
      const int64_t d = x.dim(static_cast<int>(j));
      int64_t v = (*idx)[t * m + j];
      if (v < 0) v += d;
      if (v < 0 || v >= d)
        return ctx.fail("index " + std::to_string((*idx)[t * m + j]) + " is out of range for a dim of " +
                        std::to_string(d));
      off += v * xs[j];
    }
    Status s = apply(ctx, x.dtype(), y.raw(), off, up.raw(), t * slice, slice, *red, *es);
    if (!s.ok()) return s;
  }
  ctx.set_output(0, y);
  return Status::Ok();
}

}  // namespace

void register_scatter_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kScatter, with_inputs<scatter_elements, 3>);
  r.add(ir::OpKind::kScatterElements, with_inputs<scatter_elements, 3>);
  r.add(ir::OpKind::kScatterND, with_inputs<scatter_nd, 3>);
}

}  // namespace kiln::cpu::movement
