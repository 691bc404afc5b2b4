// CPU reference kernels: variadic elementwise ops (ONNX Sum, Mean, Max, Min over N inputs,
// multidirectionally broadcast since opset 8; earlier versions required equal shapes, which
// broadcasting accepts too) and Where (3-way broadcast select).
// The variadic ops fold pairwise into the output: y = in0 (broadcast), y = op(y, in_k).
#include <cmath>
#include <cstring>
#include <type_traits>

#include "backends/cpu/ops_elementwise_broadcast.h"

namespace kiln::cpu {
namespace {

struct SumOp {
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) return static_cast<C>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    else return a + b;
  }
};
// Max/Min propagate NaN (numpy.maximum / numpy.minimum, the spec's reference).
struct MaxOp {
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(a) || std::isnan(b)) return a + b;
    }
    return a < b ? b : a;
  }
};
struct MinOp {
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(a) || std::isnan(b)) return a + b;
    }
    return b < a ? b : a;
  }
};

// Operators Sum (since 13), Mean (since 13), Max (since 13), Min (since 13). Sum and Mean are
// float-only in the spec; Max/Min take every numeric type since version 12.
template <typename Op, bool kMean, UnaryTypes S>
Status variadic_kernel(KernelContext& ctx) {
  const int n = ctx.num_inputs();
  if (n < 1) return ctx.fail("needs at least one input");
  KILN_RETURN_IF_ERROR(ctx.require_inputs(n));
  std::vector<const Shape*> shapes;
  const DataType dt = ctx.in(0).dtype();
  for (int i = 0; i < n; ++i) {
    if (ctx.in(i).dtype() != dt)
      return ctx.fail("input " + std::to_string(i) + " has dtype " + dtype_name(ctx.in(i).dtype()) + ", input 0 has " +
                      dtype_name(dt));
    shapes.push_back(&ctx.in(i).shape());
  }
  auto out_shape = broadcast_shapes(shapes);
  if (!out_shape.ok()) return ctx.fail(out_shape.status().message());
  Tensor y(dt, *out_shape);
  const Op op{};
  auto body = [&](auto tag) -> Status {
    using T = decltype(tag);
    T* py = y.data<T>();
    const Tensor& first = ctx.in(0);
    if (y.numel() == 0) return Status::Ok();
    if (first.numel() == y.numel()) std::memcpy(py, first.data<T>(), first.nbytes());
    else broadcast_copy(first.data<T>(), first.shape(), py, *out_shape);
    for (int i = 1; i < n; ++i) {
      const Tensor& t = ctx.in(i);
      binary_loop(py, *out_shape, t.data<T>(), t.shape(), py, *out_shape,
                  [&op](T u, T v) { return store_c<T>(op(load_c(u), load_c(v))); });
    }
    if constexpr (kMean) {
      using C = compute_t<T>;
      for (int64_t i = 0; i < y.numel(); ++i) py[i] = store_c<T>(load_c(py[i]) / static_cast<C>(n));
    }
    return Status::Ok();
  };
  Status s;
  if constexpr (S == UnaryTypes::kFloat) s = dispatch_float(dt, body);
  else s = dispatch_numeric(dt, body);
  if (!s.ok()) return ctx.unsupported_here(s.message());
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

// Operator Where, since version 16: output = condition ? X : Y, all three broadcast together.
Status where(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(3));
  const Tensor& c = ctx.in(0);
  const Tensor& x = ctx.in(1);
  const Tensor& yv = ctx.in(2);
  if (c.dtype() != DataType::kBool) return ctx.fail(std::string("condition must be bool, got ") + dtype_name(c.dtype()));
  if (x.dtype() != yv.dtype())
    return ctx.fail(std::string("X and Y dtypes differ: ") + dtype_name(x.dtype()) + " and " + dtype_name(yv.dtype()));
  auto out_shape = broadcast_shapes({&c.shape(), &x.shape(), &yv.shape()});
  if (!out_shape.ok()) return ctx.fail(out_shape.status().message());
  const Shape& os = *out_shape;
  Tensor out(x.dtype(), os);
  Status s = dispatch_with_bool(x.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const uint8_t* pc = c.data<uint8_t>();
    const T* px = x.data<T>();
    const T* py = yv.data<T>();
    T* po = out.data<T>();
    if (shape_numel(os) == 0) return Status::Ok();
    if (c.shape() == os && x.shape() == os && yv.shape() == os) {
      for (int64_t i = 0; i < out.numel(); ++i) po[i] = pc[i] ? px[i] : py[i];
      return Status::Ok();
    }
    const BroadcastPlan<3> plan = make_broadcast_plan<3>(os, {&c.shape(), &x.shape(), &yv.shape()});
    for_each_run<3>(plan, [&](int64_t oo, const int64_t* off, int64_t m, const int64_t* st) {
      for (int64_t i = 0; i < m; ++i)
        po[oo + i] = pc[off[0] + i * st[0]] ? px[off[1] + i * st[1]] : py[off[2] + i * st[2]];
    });
    return Status::Ok();
  });
  if (!s.ok()) return ctx.unsupported_here(s.message());
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace

void register_elementwise_variadic_kernels(KernelRegistry& r) {
  using ir::OpKind;
  constexpr UnaryTypes kF = UnaryTypes::kFloat, kN = UnaryTypes::kNumeric;
  // Sum accepts integers too (a superset of the spec, useful after type-changing passes).
  r.add(OpKind::kSum, variadic_kernel<SumOp, false, kN>);
  r.add(OpKind::kMean, variadic_kernel<SumOp, true, kF>);
  r.add(OpKind::kMax, variadic_kernel<MaxOp, false, kN>);
  r.add(OpKind::kMin, variadic_kernel<MinOp, false, kN>);
  r.add(OpKind::kWhere, where);
}

}  // namespace kiln::cpu
