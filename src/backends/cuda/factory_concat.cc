// Concat (ONNX Operators.md Concat, any axis): one copy layer, each input's slice of inner[i]
// elements per outer index. A channel concat of NHWC activations stays NHWC (outer = N*H*W, inner
// = channels: no reformat round trip; the plan's "layout" attribute decides when present); other
// concats are row-major. Parts that are constants (the ViT class token once the batch is concrete)
// are uploaded row-major as weights and copied like the others. Activation concats are marked for
// concat elimination, which lets producers write into their slice (docs/decisions/0009).
#include <algorithm>

#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {
namespace {

bool has_constant_input(const ir::Graph& g, const ir::Node& n) {
  for (ir::ValueId v : n.inputs)
    if (v != ir::kNoValue && g.value(v).constant) return true;
  return false;
}

Status lower_concat_with_constants(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& out_s = ctx.shape(n.outputs[0]);
  int64_t axis = n.attr_int("axis", 1);
  if (axis < 0) axis += static_cast<int64_t>(out_s.size());
  if (axis < 0 || axis >= static_cast<int64_t>(out_s.size())) return invalid_argument(where + "axis out of range");
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= out_s[i];
  std::vector<int> ins;
  std::vector<int64_t> inner;
  for (ir::ValueId v : n.inputs) {
    KILN_ASSIGN_OR_RETURN(int a, ctx.row_major_operand(v));
    ins.push_back(a);
    inner.push_back(shape_numel(ctx.shape(v)) / std::max<int64_t>(outer, 1));
  }
  ctx.add_layer(make_concat_layer(outer, inner, static_cast<int>(storage_bytes(ctx.storage()))), n.name, ins,
                {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace

Status lower_concat(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const ir::Graph& g = ctx.graph();
  if (has_constant_input(g, n)) return lower_concat_with_constants(ctx, n, where);
  const StorageType st = ctx.storage();
  const Shape& out_s = ctx.shape(n.outputs[0]);
  int64_t axis = n.attr_int("axis", 1);
  if (axis < 0) axis += static_cast<int64_t>(out_s.size());
  const bool nhwc = storage_is_float(st) && ctx.nhwc(n, st != StorageType::kF32) && out_s.size() == 4 && axis == 1 &&
                    !layout_free(out_s);
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= out_s[i];
  if (nhwc) outer = out_s[0] * out_s[2] * out_s[3];
  std::vector<int> ins;
  std::vector<int64_t> inner;
  for (ir::ValueId v : n.inputs) {
    KILN_ASSIGN_OR_RETURN(int a, ctx.activation(v));
    ins.push_back(ctx.as_layout(a, nhwc));
    inner.push_back(shape_numel(ctx.shape(v)) / std::max<int64_t>(outer, 1));
  }
  const int out = ctx.new_value(g.value(n.outputs[0]).name, out_s, st, nhwc);
  const int elem_bytes = static_cast<int>(storage_bytes(st));
  ctx.add_layer(make_concat_layer(outer, inner, elem_bytes), n.name, ins, {out}, n.origin);
  ctx.mark_concat(outer, inner, elem_bytes);
  ctx.bind(n.outputs[0], out);
  return Status::Ok();
}

}  // namespace kiln::cuda
