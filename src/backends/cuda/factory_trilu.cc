// Trilu (ONNX Trilu-14): the upper (j - i >= k) or lower (j - i <= k) triangle of the last two
// axes, the rest zero, for any element type (bool causal masks included): kernels_exact.h
// launch_trilu. k is a constant (0 when omitted) or an int64 scalar computed at run time.
#include "backends/cuda/exact_layers.h"
#include "backends/cuda/layer_factory.h"
#include "core/numerics.h"

namespace kiln::cuda {

Status lower_trilu(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& s = ctx.shape(n.inputs[0]);
  if (s.size() < 2) return invalid_argument(where + "input rank below 2");
  int64_t k = 0;
  int k_dev = -1;  // the engine value of a k computed at run time
  if (n.inputs.size() > 1 && n.inputs[1] != ir::kNoValue) {
    if (shape_numel(ctx.shape(n.inputs[1])) != 1) return invalid_argument(where + "k must be a scalar");
    if (const auto& kc = ctx.graph().value(n.inputs[1]).constant) {
      k = kc->dtype() == DataType::kInt64 ? kc->data<int64_t>()[0]
                                          : static_cast<int64_t>(load_as_double(kc->dtype(), kc->raw(), 0));
    } else {
      KILN_ASSIGN_OR_RETURN(k_dev, ctx.operand_as(n.inputs[1], StorageType::kI64));
    }
  }
  const int64_t rows = s[s.size() - 2], cols = s.back();
  const int64_t batch = rows * cols == 0 ? 0 : shape_numel(s) / (rows * cols);
  const StorageType t = ctx.storage();
  KILN_ASSIGN_OR_RETURN(int x, ctx.operand_as(n.inputs[0], t));
  std::vector<int> ins = {x};
  if (k_dev >= 0) ins.push_back(k_dev);
  ctx.add_layer(make_trilu_layer(batch, rows, cols, k, k_dev >= 0, n.attr_int("upper", 1) != 0, t), n.name, ins,
                {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
