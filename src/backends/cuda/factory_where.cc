// Where with a constant condition (the masks exporters fold): one broadcasting select kernel over
// the three operands in row-major order (numpy broadcasting, ONNX Where-16). A condition computed
// at run time is issue 11's (refused here, naming the node).
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_where(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (!ctx.graph().value(n.inputs[0]).constant)
    return unsupported(where + "the condition must be a constant on the GPU path");
  const Shape& out_s = ctx.shape(n.outputs[0]);
  if (out_s.size() > static_cast<size_t>(kMaxRank)) return unsupported(where + "rank above 6");
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

}  // namespace kiln::cuda
