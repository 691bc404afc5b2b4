// GatherND and GatherElements (ONNX Operators.md sections of those names) of a row-major input of
// any storage type — registered in the float table and in the exact one (docs/decisions/0051):
// the kernels copy elements by size. Constant indices are checked and normalized at build (out
// of range: an error naming the node, as Gather) and uploaded as int64; indices from an int32 /
// int64 activation (mask and position indexing in current exports) are read on the device, an
// out-of-range one giving zeros (kernels_gather.h). gather_indexed.h plans the descriptors.
#include "backends/cuda/gather_indexed.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {
namespace {

// The layer's indices operand: `*idx_64` says whether it is int64 (else int32). Constant
// indices are read exactly, checked by `normalize` and uploaded as int64.
template <typename Normalize>
StatusOr<int> indices_operand(LowerContext& ctx, const ir::Node& n, const std::string& where, Normalize normalize,
                              bool* idx_64) {
  const ir::ValueId v = n.inputs[1];
  if (const auto& c = ctx.graph().value(v).constant) {
    if (c->dtype() != DataType::kInt64 && c->dtype() != DataType::kInt32)
      return invalid_argument(where + "indices of dtype " + dtype_name(c->dtype()) + " (int32 or int64 expected)");
    std::vector<int64_t> idx(static_cast<size_t>(c->numel()));
    for (int64_t i = 0; i < c->numel(); ++i)
      idx[i] = c->dtype() == DataType::kInt64 ? c->data<int64_t>()[i] : c->data<int32_t>()[i];
    KILN_RETURN_IF_ERROR(normalize(&idx));
    *idx_64 = true;
    return ctx.upload_raw(n.name + ":indices", c->shape(), idx.data(), idx.size() * sizeof(int64_t),
                          "indices of '" + n.name + "'");
  }
  KILN_ASSIGN_OR_RETURN(int a, ctx.activation(v));
  const StorageType t = ctx.value_type(a);
  if (t != StorageType::kI64 && t != StorageType::kI32)
    return unsupported(where + "indices stored as " + storage_name(t) + " (int32 or int64 expected)");
  *idx_64 = t == StorageType::kI64;
  return ctx.as_layout(a, false);
}

}  // namespace

Status lower_gather_nd(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.inputs.size() < 2 || n.inputs[1] == ir::kNoValue) return invalid_argument(where + "indices are required");
  KILN_ASSIGN_OR_RETURN(GatherNDDesc d, plan_gather_nd(n, ctx.shape(n.inputs[0]), ctx.shape(n.inputs[1])));
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  bool idx_64 = true;
  KILN_ASSIGN_OR_RETURN(int idx, indices_operand(
                                     ctx, n, where,
                                     [&](std::vector<int64_t>* i) { return normalize_gather_nd_indices(n, d, i); },
                                     &idx_64));
  const int elem_bytes = static_cast<int>(storage_bytes(ctx.storage()));
  ctx.add_layer(make_gather_nd_layer(d, elem_bytes, idx_64), n.name, {x, idx}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

Status lower_gather_elements(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.inputs.size() < 2 || n.inputs[1] == ir::kNoValue) return invalid_argument(where + "indices are required");
  KILN_ASSIGN_OR_RETURN(GatherElementsDesc d,
                        plan_gather_elements(n, ctx.shape(n.inputs[0]), ctx.shape(n.inputs[1])));
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  bool idx_64 = true;
  KILN_ASSIGN_OR_RETURN(
      int idx, indices_operand(
                   ctx, n, where, [&](std::vector<int64_t>* i) { return normalize_gather_elements_indices(n, d, i); },
                   &idx_64));
  const int elem_bytes = static_cast<int>(storage_bytes(ctx.storage()));
  ctx.add_layer(make_gather_elements_layer(d, elem_bytes, idx_64), n.name, {x, idx}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
