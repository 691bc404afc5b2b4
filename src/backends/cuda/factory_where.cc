// Where (ONNX Where-16, numpy broadcasting over the three operands, row-major). A constant
// condition with float branches (the masks exporters fold) is one select kernel over operands in
// the storage dtype, the condition stored as 0/1 in that dtype (kernels_more.h launch_where). A
// condition computed at run time (an attention mask, a NaN guard: Where(IsNaN(p), 0, p)), or
// integer / bool branches, is the bit-copying select of kernels_exact.h: the condition as bool,
// both branches in the output's storage.
#include "backends/cuda/exact_layers.h"
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {
namespace {

Status lower_where_constant(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& out_s = ctx.shape(n.outputs[0]);
  BroadcastDesc d;
  d.rank = static_cast<int>(out_s.size());
  for (int i = 0; i < d.rank; ++i) d.out_dims[i] = out_s[i];
  std::vector<int> ins;
  std::vector<int64_t> strides[3];
  for (size_t k = 0; k < 3; ++k) {
    Shape phys;
    KILN_ASSIGN_OR_RETURN(int a, ctx.pointwise_operand(n.inputs[k], out_s, false, &phys));
    ins.push_back(a);
    strides[k].assign(kMaxRank, 0);
    int64_t stride = 1;
    for (int i = d.rank - 1; i >= 0; --i) {
      strides[k][i] = phys[i] == 1 ? 0 : stride;
      stride *= phys[i];
    }
  }
  for (int i = 0; i < d.rank; ++i) {
    d.a_strides[i] = strides[1][i];
    d.b_strides[i] = strides[2][i];
  }
  if (d.rank == 0) {
    d.rank = 1;
    d.out_dims[0] = 1;
  }
  ctx.add_layer(make_where_layer(d, strides[0], ctx.storage()), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace

Status lower_where(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.inputs.size() != 3) return invalid_argument(where + "expects 3 inputs");
  const Shape& out_s = ctx.shape(n.outputs[0]);
  if (out_s.size() > static_cast<size_t>(kMaxRank)) return unsupported(where + "rank above " + std::to_string(kMaxRank));
  const StorageType t = ctx.storage();
  if (ctx.graph().value(n.inputs[0]).constant && storage_is_float(t)) return lower_where_constant(ctx, n, where);
  if (ctx.dtype(n.inputs[0]) != DataType::kBool)
    return unsupported(where + "condition dtype " + dtype_name(ctx.dtype(n.inputs[0])));
  std::vector<int> ins;
  KILN_ASSIGN_OR_RETURN(int c, ctx.operand_as(n.inputs[0], StorageType::kBool));
  ins.push_back(c);
  for (size_t k = 1; k < 3; ++k) {
    KILN_ASSIGN_OR_RETURN(int a, ctx.operand_as(n.inputs[k], t));
    ins.push_back(a);
  }
  SelectDesc sd;
  auto d = broadcast_desc(ctx.shape(n.inputs[1]), ctx.shape(n.inputs[2]), out_s);
  if (!d.ok()) return unsupported(where + d.status().message());
  sd.d = *d;
  auto cs = broadcast_strides(ctx.shape(n.inputs[0]), out_s);
  if (!cs.ok()) return unsupported(where + cs.status().message());
  for (size_t i = 0; i < cs->size(); ++i) sd.c_strides[i] = (*cs)[i];
  ctx.add_layer(make_select_layer(sd, t), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
