// CumSum (ONNX CumSum-14, exclusive / reverse attributes) along a constant axis, as a
// [outer, n, inner] scan in the output's storage (int32 / int64 exactly; float storage
// accumulating in float): kernels_exact.h launch_cumsum. Position ids from an attention mask
// (CumSum(mask) * mask - 1) run here.
#include "backends/cuda/exact_layers.h"
#include "backends/cuda/layer_factory.h"
#include "core/numerics.h"

namespace kiln::cuda {

Status lower_cumsum(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.inputs.size() != 2 || n.inputs[1] == ir::kNoValue) return invalid_argument(where + "expects x and axis");
  const auto& ax = ctx.graph().value(n.inputs[1]).constant;
  if (!ax || ax->numel() != 1) return unsupported(where + "the axis must be a constant scalar on the GPU path");
  const Shape& s = ctx.shape(n.inputs[0]);
  const int64_t r = static_cast<int64_t>(s.size());
  int64_t axis = static_cast<int64_t>(load_as_double(ax->dtype(), ax->raw(), 0));
  if (axis < -r || axis >= r) return invalid_argument(where + "axis " + std::to_string(axis) + " out of range");
  if (axis < 0) axis += r;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= s[i];
  for (int64_t i = axis + 1; i < r; ++i) inner *= s[i];
  const StorageType t = ctx.storage();
  KILN_ASSIGN_OR_RETURN(int x, ctx.operand_as(n.inputs[0], t));
  ctx.add_layer(make_cumsum_layer(outer, s[axis], inner, n.attr_int("exclusive", 0) != 0, n.attr_int("reverse", 0) != 0, t),
                n.name, {x}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
