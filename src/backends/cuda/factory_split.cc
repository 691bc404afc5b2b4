// Split: outputs that are contiguous slices of a row-major input (outer dims 1) at 256-byte
// aligned offsets are views of it (no copy); a channel split of NHWC activations is one split
// layer (outer = N*H*W); anything else is one strided copy per output (gpu_ops.h plan_split).
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {
namespace {

Status lower_split_strided(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  std::vector<Shape> outs;
  for (ir::ValueId v : n.outputs) {
    if (v == ir::kNoValue) return unsupported(where + "Split with an omitted output");
    outs.push_back(ctx.shape(v));
  }
  KILN_ASSIGN_OR_RETURN(auto descs, plan_split(n, ctx.shape(n.inputs[0]), outs));
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  const int eb = static_cast<int>(storage_bytes(ctx.storage()));
  for (size_t k = 0; k < descs.size(); ++k)
    ctx.add_layer(make_strided_copy_layer("Split", descs[k], eb), n.name + ":" + std::to_string(k), {x},
                  {ctx.new_output(n, k)}, n.origin);
  return Status::Ok();
}

}  // namespace

Status lower_split(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& x = ctx.shape(n.inputs[0]);
  const int64_t r = static_cast<int64_t>(x.size());
  int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return unsupported(where + "axis out of range");
  KILN_ASSIGN_OR_RETURN(int xa, ctx.activation(n.inputs[0]));
  const bool nhwc = ctx.nhwc(n, ctx.value_nhwc(xa)) && x.size() == 4 && !layout_free(x) && axis == 1;
  if (!nhwc) xa = ctx.as_layout(xa, false);
  const StorageType type = ctx.value_type(xa);
  const int eb = static_cast<int>(storage_bytes(type));
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x[i];
  if (nhwc) outer = x[0] * x[2] * x[3];
  const int64_t total = shape_numel(x) / std::max<int64_t>(outer, 1);
  std::vector<int64_t> inner, starts;
  int64_t sum = 0;
  for (ir::ValueId v : n.outputs) {
    if (v == ir::kNoValue) return unsupported(where + "omitted output");
    starts.push_back(sum);
    inner.push_back(shape_numel(ctx.shape(v)) / std::max<int64_t>(outer, 1));
    sum += inner.back();
  }
  if (sum != total) return unsupported(where + "parts do not add up to the input");
  bool views = !nhwc && outer == 1;
  for (int64_t st : starts) views = views && (st * eb) % 256 == 0;
  if (!nhwc && !views) return lower_split_strided(ctx, n, where);
  std::vector<int> outs;
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    const int o = ctx.new_value(ctx.graph().value(n.outputs[k]).name, ctx.shape(n.outputs[k]), type, nhwc);
    if (views) ctx.alias(o, xa, starts[k] * eb);
    outs.push_back(o);
    ctx.bind(n.outputs[k], o);
  }
  if (!views) ctx.add_layer(make_split_layer(outer, inner, eb), n.name, {xa}, outs, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
