// CPU kernels for Softmax, LogSoftmax and Hardmax. Opsets < 13 coerce the input to 2-D at
// `axis` (default 1) and normalize each row of the flattened [prod(d[:axis]), prod(d[axis:])]
// matrix; opsets >= 13 normalize along the single dim `axis` (default -1). ONNX "Operator
// Softmax, since version 1" / "since version 13" (likewise LogSoftmax and Hardmax).
#include <cmath>

#include "backends/cpu/ops_nn_common.h"

namespace kiln::cpu::nn {
namespace {

enum class Kind { kSoftmax, kLogSoftmax, kHardmax };

// Applies the op to `outer` x `inner` independent vectors of length `len` (stride `inner`).
template <typename T>
void run_softmax(Kind kind, const T* x, T* y, int64_t outer, int64_t len, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const T* xp = x + o * len * inner + i;
      T* yp = y + o * len * inner + i;
      double mx = -INFINITY;
      int64_t arg = 0;
      for (int64_t k = 0; k < len; ++k)
        if (xp[k * inner] > mx) {
          mx = xp[k * inner];
          arg = k;
        }
      if (kind == Kind::kHardmax) {
        for (int64_t k = 0; k < len; ++k) yp[k * inner] = static_cast<T>(k == arg ? 1 : 0);
        continue;
      }
      double sum = 0;
      for (int64_t k = 0; k < len; ++k) sum += std::exp(static_cast<double>(xp[k * inner]) - mx);
      if (kind == Kind::kSoftmax) {
        for (int64_t k = 0; k < len; ++k) yp[k * inner] = static_cast<T>(std::exp(xp[k * inner] - mx) / sum);
      } else {
        const double lse = std::log(sum);
        for (int64_t k = 0; k < len; ++k) yp[k * inner] = static_cast<T>(xp[k * inner] - mx - lse);
      }
    }
}

Status softmax_family(KernelContext& ctx, Kind kind) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x0 = ctx.in(0);
  const bool legacy = ctx.opset() < 13;
  const int rank = x0.rank();
  int axis = 0;
  // A rank-0 input is a single vector of length 1.
  if (rank > 0 && !normalize_axis(ctx.attr_int("axis", legacy ? 1 : -1), rank, &axis))
    return ctx.fail("axis out of range for rank " + std::to_string(rank));
  int64_t outer = 1, len = 1, inner = 1;
  for (int d = 0; d < rank; ++d) {
    if (d < axis) outer *= x0.dim(d);
    else if (d == axis || legacy) len *= x0.dim(d);
    else inner *= x0.dim(d);
  }
  KILN_ASSIGN_OR_RETURN(Tensor x, to_compute(ctx, x0));
  Tensor y(x.dtype(), x.shape());
  if (x.dtype() == DataType::kFloat32) run_softmax<float>(kind, x.data<float>(), y.data<float>(), outer, len, inner);
  else run_softmax<double>(kind, x.data<double>(), y.data<double>(), outer, len, inner);
  KILN_ASSIGN_OR_RETURN(Tensor out, from_compute(y, x0.dtype()));
  ctx.set_output(0, out);
  return Status::Ok();
}

Status softmax(KernelContext& ctx) { return softmax_family(ctx, Kind::kSoftmax); }
Status log_softmax(KernelContext& ctx) { return softmax_family(ctx, Kind::kLogSoftmax); }
Status hardmax(KernelContext& ctx) { return softmax_family(ctx, Kind::kHardmax); }

}  // namespace

void register_softmax_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kSoftmax, softmax);
  r.add(ir::OpKind::kLogSoftmax, log_softmax);
  r.add(ir::OpKind::kHardmax, hardmax);
}

}  // namespace kiln::cpu::nn
