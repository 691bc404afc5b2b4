// Det (ONNX Operators.md "Det", version 11): input [..., m, m] read in float32 (a 16-bit activation
// through a cast layer), one determinant per matrix in the layer's storage (kernels_linalg.h).
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_linalg.h"
#include "backends/cuda/layer_factory.h"

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

}  // namespace kiln::cuda
