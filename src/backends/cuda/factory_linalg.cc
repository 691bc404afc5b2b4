// Det (ONNX Operators.md "Det", version 11): input [..., m, m] read in float32 (a 16-bit activation
// through a cast layer), one determinant per matrix in the layer's storage; DFT (versions 17 / 20)
// with a constant dft_length and axis (kernels_linalg.h).
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_linalg.h"
#include "backends/cuda/layer_factory.h"
#include "core/numerics.h"

namespace kiln::cuda {

Status lower_det(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& x = ctx.shape(n.inputs.at(0));
  if (x.size() < 2 || x[x.size() - 1] != x[x.size() - 2])
    return invalid_argument(where + "input must be [..., M, M], got " + shape_str(x));
  const int64_t m = x.back();
  if (m < 1 || m > kDetMaxDim)
    return unsupported(where + "matrices of " + std::to_string(m) + " x " + std::to_string(m) + " (1 to " +
                       std::to_string(kDetMaxDim) + " rows on the GPU)");
  const int64_t count = dims_product(x, 0, x.size() - 2);
  KILN_ASSIGN_OR_RETURN(int xv, ctx.operand_as(n.inputs[0], StorageType::kF32));
  const StorageType t = ctx.storage();
  auto layer = make_kernel_layer("Det", "kiln.det", [=](ExecState& s, const Layer& l) {
    return launch_det(static_cast<const float*>(s.ptr(l.ins[0])), s.ptr(l.outs[0]), count, m, t, s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, {xv}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

namespace {

// Optional scalar input `k` of `n`: a constant's value into `*v` (kept when absent or empty);
// Unsupported when it is computed at run time.
Status const_scalar(LowerContext& ctx, const ir::Node& n, size_t k, const std::string& what, const std::string& where,
                    int64_t* v) {
  if (k >= n.inputs.size() || n.inputs[k] == ir::kNoValue) return Status::Ok();
  const auto& c = ctx.graph().value(n.inputs[k]).constant;
  if (!c) return unsupported(where + what + " must be a constant on the GPU path");
  if (c->numel() == 0) return Status::Ok();
  if (c->numel() != 1) return invalid_argument(where + what + " must hold one value");
  *v = load_as_int64(c->dtype(), c->raw(), 0);
  return Status::Ok();
}

}  // namespace

Status lower_dft(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& x = ctx.shape(n.inputs.at(0));
  const int64_t r = static_cast<int64_t>(x.size());
  if (r < 2 || (x.back() != 1 && x.back() != 2))
    return invalid_argument(where + "input must end in a dim of 1 (real) or 2 (complex), got " + shape_str(x));
  int64_t axis = n.attr_int("axis", 1);
  if (n.opset >= 20) {
    axis = -2;
    KILN_RETURN_IF_ERROR(const_scalar(ctx, n, 2, "axis", where, &axis));
  }
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r - 2) return invalid_argument(where + "axis is out of range for input " + shape_str(x));
  const int64_t n_in = x[axis];
  int64_t len = n_in;
  KILN_RETURN_IF_ERROR(const_scalar(ctx, n, 1, "dft_length", where, &len));
  if (len <= 0) return invalid_argument(where + "dft_length must be positive, got " + std::to_string(len));
  const bool inverse = n.attr_int("inverse", 0) != 0;
  const bool onesided = n.attr_int("onesided", 0) != 0;
  const int64_t out_len = onesided ? len / 2 + 1 : len;
  const int64_t outer = dims_product(x, 0, static_cast<size_t>(axis));
  const int64_t inner = dims_product(x, static_cast<size_t>(axis) + 1, x.size() - 1);
  const int comps = static_cast<int>(x.back());
  KILN_ASSIGN_OR_RETURN(int xv, ctx.operand_as(n.inputs[0], StorageType::kF32));
  const StorageType t = ctx.storage();
  auto layer = make_kernel_layer("DFT", "kiln.dft", [=](ExecState& s, const Layer& l) {
    return launch_dft(static_cast<const float*>(s.ptr(l.ins[0])), s.ptr(l.outs[0]), outer, n_in, inner, comps, len,
                      out_len, inverse, t, s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, {xv}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
