// Shared machinery of the elementwise CPU kernels: numpy-style multidirectional broadcasting
// (ONNX docs/Broadcasting.md), a collapsed-dimension loop plan so the innermost loop runs with
// fixed strides (0 or 1), the compute type of each storage type (fp16/bf16 compute in float),
// and the internal registration functions of the family's files.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/dispatch.h"
#include "core/tensor.h"

namespace kiln::cpu {

// ---- registration of the family's files (called from register_elementwise_kernels) ----
void register_elementwise_unary_kernels(KernelRegistry& r);
void register_elementwise_activation_kernels(KernelRegistry& r);
void register_elementwise_binary_kernels(KernelRegistry& r);
void register_elementwise_variadic_kernels(KernelRegistry& r);
void register_elementwise_quantize_kernels(KernelRegistry& r);

// ---- compute types: what an element is widened to before arithmetic ----
template <typename T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<Float16> { using type = float; };
template <> struct ComputeOf<BFloat16> { using type = float; };
template <typename T> using compute_t = typename ComputeOf<T>::type;

template <typename T>
inline compute_t<T> load_c(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) return half_to_float(v);
  else return v;
}
template <typename T>
inline T store_c(compute_t<T> v) {
  if constexpr (std::is_same_v<T, Float16>) return Float16{float_to_fp16(v)};
  else if constexpr (std::is_same_v<T, BFloat16>) return BFloat16{float_to_bf16(v)};
  else return v;
}

// Like dispatch_all, but bool tensors are handed out as uint8_t (0/1) so comparison and
// selection ops can treat them as plain integers.
template <typename F>
Status dispatch_with_bool(DataType t, F&& f) {
  if (t == DataType::kBool) return f(uint8_t{});
  return dispatch_numeric(t, f);
}

// ---- shapes ----

// Multidirectional broadcast of two shapes; the error names both shapes.
StatusOr<Shape> broadcast_shape(const Shape& a, const Shape& b);
// Of any number of shapes (at least one).
StatusOr<Shape> broadcast_shapes(const std::vector<const Shape*>& shapes);
// Legacy (opset < 7) binary broadcasting: B is broadcast onto A, its dims aligned with A's
// starting at `axis` (default: suffix alignment); a 1-element B always broadcasts. Returns
// B's shape padded with 1s to A's rank, ready for the multidirectional loop.
StatusOr<Shape> legacy_broadcast_b_shape(const Shape& a, const Shape& b, bool has_axis, int64_t axis);

// A loop over an output shape with N broadcast inputs. Adjacent dims where every input is
// either fully present or fully broadcast are merged, and size-1 output dims dropped, so
// common cases ([N,C,H,W] + [C,1,1]) become two or three long runs.
template <int N>
struct BroadcastPlan {
  std::vector<int64_t> dims;                     // collapsed output dims (at least one)
  std::array<std::vector<int64_t>, N> strides;   // element strides per input; 0 where broadcast
};

template <int N>
BroadcastPlan<N> make_broadcast_plan(const Shape& out, const std::array<const Shape*, N>& ins) {
  const int r = static_cast<int>(out.size());
  std::vector<int64_t> dims;
  std::vector<std::array<bool, N>> bcast;  // per kept dim: is input k broadcast along it
  for (int d = 0; d < r; ++d) {
    if (out[d] == 1) continue;
    std::array<bool, N> b{};
    for (int k = 0; k < N; ++k) {
      const Shape& s = *ins[k];
      const int kd = d - (r - static_cast<int>(s.size()));
      b[k] = kd < 0 || s[kd] == 1;
    }
    if (!dims.empty() && bcast.back() == b) {
      dims.back() *= out[d];
    } else {
      dims.push_back(out[d]);
      bcast.push_back(b);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    bcast.push_back(std::array<bool, N>{});
  }
  BroadcastPlan<N> p;
  p.dims = dims;
  for (int k = 0; k < N; ++k) {
    p.strides[k].assign(dims.size(), 0);
    int64_t acc = 1;
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      if (bcast[d][k]) continue;
      p.strides[k][d] = acc;
      acc *= dims[d];
    }
  }
  return p;
}

// Calls body(out_offset, in_offsets, inner_n, inner_strides) once per innermost run; the
// inner strides are each 0 or 1 and the output is contiguous along the run.
template <int N, typename Body>
void for_each_run(const BroadcastPlan<N>& p, Body&& body) {
  const int r = static_cast<int>(p.dims.size());
  const int64_t inner = p.dims[r - 1];
  std::array<int64_t, N> inner_st{}, off{};
  for (int k = 0; k < N; ++k) inner_st[k] = p.strides[k][r - 1];
  int64_t outer = 1;
  for (int d = 0; d < r - 1; ++d) outer *= p.dims[d];
  std::vector<int64_t> idx(r, 0);
  for (int64_t o = 0; o < outer; ++o) {
    body(o * inner, off.data(), inner, inner_st.data());
    // Advance the outer multi-index (dims 0..r-2) and the input offsets with it.
    for (int d = r - 2; d >= 0; --d) {
      ++idx[d];
      for (int k = 0; k < N; ++k) off[k] += p.strides[k][d];
      if (idx[d] < p.dims[d]) break;
      for (int k = 0; k < N; ++k) off[k] -= p.strides[k][d] * p.dims[d];
      idx[d] = 0;
    }
  }
}

// o[i] = op(a[ia], b[ib]) over the broadcast output shape `os`; `op` sees storage values.
// Fast paths: neither side broadcast (an input with the output's element count can differ
// from it only by size-1 dims, so linear indices coincide), or one side a single element.
template <typename TA, typename TB, typename TO, typename Op>
void binary_loop(const TA* a, const Shape& as, const TB* b, const Shape& bs, TO* o, const Shape& os, Op&& op) {
  const int64_t n = shape_numel(os);
  if (n == 0) return;
  const int64_t na = shape_numel(as), nb = shape_numel(bs);
  if (na == n && nb == n) {
    for (int64_t i = 0; i < n; ++i) o[i] = op(a[i], b[i]);
    return;
  }
  if (nb == 1 && na == n) {
    const TB bv = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = op(a[i], bv);
    return;
  }
  if (na == 1 && nb == n) {
    const TA av = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = op(av, b[i]);
    return;
  }
  const BroadcastPlan<2> plan = make_broadcast_plan<2>(os, {&as, &bs});
  for_each_run<2>(plan, [&](int64_t oo, const int64_t* off, int64_t m, const int64_t* st) {
    const TA* pa = a + off[0];
    const TB* pb = b + off[1];
    TO* po = o + oo;
    if (st[0] == 1 && st[1] == 1) {
      for (int64_t i = 0; i < m; ++i) po[i] = op(pa[i], pb[i]);
    } else if (st[0] == 1) {
      const TB bv = *pb;
      for (int64_t i = 0; i < m; ++i) po[i] = op(pa[i], bv);
    } else if (st[1] == 1) {
      const TA av = *pa;
      for (int64_t i = 0; i < m; ++i) po[i] = op(av, pb[i]);
    } else {
      const TO v = op(*pa, *pb);
      for (int64_t i = 0; i < m; ++i) po[i] = v;
    }
  });
}

// Copies `in` broadcast to `os` (used to seed variadic folds).
template <typename T>
void broadcast_copy(const T* in, const Shape& is, T* o, const Shape& os) {
  const BroadcastPlan<1> plan = make_broadcast_plan<1>(os, {&is});
  if (shape_numel(os) == 0) return;
  for_each_run<1>(plan, [&](int64_t oo, const int64_t* off, int64_t m, const int64_t* st) {
    const T* p = in + off[0];
    for (int64_t i = 0; i < m; ++i) o[oo + i] = p[i * st[0]];
  });
}

// ---- unary kernels ----

enum class UnaryTypes { kFloat, kNumeric };

// Builds an op functor, from the node's attributes when it takes them.
template <typename Op>
Op make_op(const KernelContext& ctx) {
  if constexpr (std::is_constructible_v<Op, const KernelContext&>) return Op(ctx);
  else return Op{};
}

// y = op(x) elementwise, same dtype and shape; `Op::operator()` sees compute values (float
// for fp16/bf16). Dtypes outside `S` give a clean "unsupported" error.
template <typename Op, UnaryTypes S>
Status unary_kernel(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x = ctx.in(0);
  const Op op = make_op<Op>(ctx);
  Tensor y(x.dtype(), x.shape());
  auto body = [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) py[i] = store_c<T>(op(load_c(px[i])));
    return Status::Ok();
  };
  Status s;
  if constexpr (S == UnaryTypes::kFloat) s = dispatch_float(x.dtype(), body);
  else s = dispatch_numeric(x.dtype(), body);
  if (!s.ok()) return ctx.unsupported_here(s.message());
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

}  // namespace kiln::cpu
