// CPU reference kernels: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss. Both gather
// -logp[n][target][d] * weight[target] over [N, C, D] (D = product of the trailing dims), then
// reduce ("none" | "sum" | "mean"); SoftmaxCrossEntropyLoss first takes log_softmax over C.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/ops_reduce_internal.h"

namespace kiln::cpu {
namespace {

// What both losses read from the node once shapes are checked.
struct LossSetup {
  int64_t n = 0, c = 0, d = 1;     // input viewed as [N, C, D]
  std::vector<int64_t> target;     // N*D class indices
  std::optional<int64_t> ignore_index;
  std::string reduction;
  Shape target_shape;
};

// Checks input (N, C, d1..dk), target (N, d1..dk) and the optional weight (C) input at
// `weight_input`; reads the target and the attributes.
StatusOr<LossSetup> setup_loss(const KernelContext& ctx, int weight_input) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& x = ctx.in(0);
  const Tensor& t = ctx.in(1);
  LossSetup s;
  if (x.rank() < 2) return ctx.fail("input must have rank >= 2 (N, C, ...), got " + shape_str(x.shape()));
  s.n = x.dim(0);
  s.c = x.dim(1);
  Shape want{s.n};
  for (int i = 2; i < x.rank(); ++i) {
    s.d *= x.dim(i);
    want.push_back(x.dim(i));
  }
  if (t.shape() != want)
    return ctx.fail("target shape " + shape_str(t.shape()) + " does not match input " + shape_str(x.shape()) +
                    " (expected " + shape_str(want) + ")");
  s.target_shape = want;
  KILN_ASSIGN_OR_RETURN(s.target, read_int_values(ctx, t, "target"));
  if (ctx.has_attr("ignore_index")) s.ignore_index = ctx.attr_int("ignore_index", 0);
  for (int64_t cls : s.target)
    if ((!s.ignore_index || cls != *s.ignore_index) && (cls < 0 || cls >= s.c))
      return ctx.fail("target class " + std::to_string(cls) + " is outside [0, " + std::to_string(s.c) + ")");
  if (ctx.has_input(weight_input)) {
    const Tensor& w = ctx.in(weight_input);
    if (w.shape() != Shape{s.c}) return ctx.fail("weight shape " + shape_str(w.shape()) + ", expected [" + std::to_string(s.c) + "]");
    if (w.dtype() != x.dtype()) return ctx.fail("weight dtype differs from the input's");
  }
  s.reduction = ctx.attr_string("reduction", "mean");
  if (s.reduction != "none" && s.reduction != "sum" && s.reduction != "mean")
    return ctx.fail("unknown reduction '" + s.reduction + "'");
  return s;
}

// The NLL step on log-probabilities `logp` ([N, C, D], in F) with optional class weights:
// loss[n][d] = -logp[n][t][d] * w[t] (0 where t == ignore_index). "mean" divides the sum by the
// total weight of the non-ignored targets (Operators.md "NegativeLogLikelihoodLoss", since 13).
template <typename T>
Tensor nll_from_logp(const LossSetup& s, const std::vector<AccOf<T>>& logp, const T* weight, DataType dtype) {
  using F = AccOf<T>;
  std::vector<F> loss(static_cast<size_t>(s.n * s.d), 0);
  F total = 0, total_weight = 0;
  for (int64_t i = 0; i < s.n; ++i) {
    for (int64_t j = 0; j < s.d; ++j) {
      const int64_t cls = s.target[i * s.d + j];
      if (s.ignore_index && cls == *s.ignore_index) continue;
      const F w = weight ? load_as<F>(weight[cls]) : F{1};
      const F l = -logp[(i * s.c + cls) * s.d + j] * w;
      loss[i * s.d + j] = l;
      total += l;
      total_weight += w;
    }
  }
  if (s.reduction == "none") {
    Tensor out(dtype, s.target_shape);
    for (size_t k = 0; k < loss.size(); ++k) out.data<T>()[k] = store_as<T>(loss[k]);
    return out;
  }
  // "mean" over a set whose weights sum to zero is 0/0 = NaN, as the spec's formula gives.
  const F r = s.reduction == "sum" ? total : total / total_weight;
  Tensor out(dtype, {});
  out.data<T>()[0] = store_as<T>(r);
  return out;
}

Status nll_kernel(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(LossSetup s, setup_loss(ctx, 2));
  const Tensor& x = ctx.in(0);
  Status st = dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    std::vector<AccOf<T>> logp(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) logp[i] = load_as<AccOf<T>>(x.data<T>()[i]);
    const T* w = ctx.has_input(2) ? ctx.in(2).data<T>() : nullptr;
    ctx.set_output(0, nll_from_logp<T>(s, logp, w, x.dtype()));
    return Status::Ok();
  });
  if (!st.ok()) return ctx.unsupported_here(st.message());
  return Status::Ok();
}

// SoftmaxCrossEntropyLoss (Operators.md, since 12/13): log_prob = log_softmax(scores, axis=1),
// then the NLL step above; output 1 (optional) is log_prob itself.
Status sce_kernel(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(LossSetup s, setup_loss(ctx, 2));
  const Tensor& x = ctx.in(0);
  Status st = dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using F = AccOf<T>;
    const T* in = x.data<T>();
    std::vector<F> logp(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < s.n; ++i) {
      for (int64_t j = 0; j < s.d; ++j) {
        const int64_t base = i * s.c * s.d + j;
        F m = -std::numeric_limits<F>::infinity();
        for (int64_t c = 0; c < s.c; ++c) m = std::max(m, load_as<F>(in[base + c * s.d]));
        F sum = 0;
        for (int64_t c = 0; c < s.c; ++c) sum += std::exp(load_as<F>(in[base + c * s.d]) - m);
        const F shift = m + std::log(sum);
        for (int64_t c = 0; c < s.c; ++c) logp[base + c * s.d] = load_as<F>(in[base + c * s.d]) - shift;
      }
    }
    const T* w = ctx.has_input(2) ? ctx.in(2).data<T>() : nullptr;
    ctx.set_output(0, nll_from_logp<T>(s, logp, w, x.dtype()));
    if (ctx.output_wanted(1)) {
      Tensor lp(x.dtype(), x.shape());
      for (int64_t i = 0; i < x.numel(); ++i) lp.data<T>()[i] = store_as<T>(logp[i]);
      ctx.set_output(1, lp);
    }
    return Status::Ok();
  });
  if (!st.ok()) return ctx.unsupported_here(st.message());
  return Status::Ok();
}

}  // namespace

void register_loss_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kNegativeLogLikelihoodLoss, nll_kernel);
  r.add(ir::OpKind::kSoftmaxCrossEntropyLoss, sce_kernel);
}

}  // namespace kiln::cpu
