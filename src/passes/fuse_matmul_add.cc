// A fully connected layer written as MatMul + Add becomes one Gemm (bias in the GEMM epilogue):
//   MatMul(A[M,K], W[K,N]) + b  ->  Gemm(A, W, b)      (alpha = beta = 1, no transposes)
// W and b are float32 constants, b of shape [N], [1,N], [1] or scalar (Gemm's C broadcasts
// unidirectionally to [M,N]: ONNX "Operator Gemm, since version 13"); A must be 2-D.
// The MatMul must feed only the Add. A of rank > 2 keeps its MatMul (Gemm is 2-D only).
#include <algorithm>

#include "passes/passes.h"

namespace kiln::passes {

namespace {

// b broadcasts to [M,N] without growing the rank of the Add's result.
bool bias_fits(const Tensor& b, int64_t n) {
  if (b.rank() > 2) return false;
  if (b.rank() == 2 && b.dim(0) != 1) return false;
  const int64_t last = b.rank() == 0 ? 1 : b.dim(-1);
  return last == n || last == 1;
}

}  // namespace

Status fuse_matmul_add(ir::Graph& g, const PassOptions&) {
  const std::set<std::string> pinned = subgraph_reads(g);
  const auto consumers = g.consumers();
  for (auto& add : g.nodes) {
    if (add.removed || add.op != ir::OpKind::kAdd || add.opset < 7 || add.inputs.size() != 2) continue;
    for (int side = 0; side < 2; ++side) {
      const ir::ValueId y = add.inputs[side], bias = add.inputs[1 - side];
      if (y == ir::kNoValue || g.value(y).producer < 0) continue;
      ir::Node& mm = g.node(g.value(y).producer);
      if (mm.removed || mm.op != ir::OpKind::kMatMul || mm.inputs.size() != 2) continue;
      if (consumers[y].size() != 1 || std::count(g.outputs.begin(), g.outputs.end(), y) || pinned.count(g.value(y).name))
        continue;
      const Tensor* w = const_f32(g, mm.inputs[1]);
      const Tensor* b = const_f32(g, bias);
      const auto& a_shape = g.value(mm.inputs[0]).shape;
      if (!w || !b || w->rank() != 2 || !a_shape || a_shape->size() != 2) continue;
      // A's dtype must match W's (Gemm's single T); an unknown dtype is not trusted.
      if (g.value(mm.inputs[0]).dtype != DataType::kFloat32 || !bias_fits(*b, w->dim(1))) continue;
      const ir::Dim& k = (*a_shape)[1];
      if (k.is_known() && k.value != w->dim(0)) continue;  // let the MatMul report the mismatch
      // The MatMul becomes the Gemm and produces the Add's output (possibly a graph output).
      mm.op = ir::OpKind::kGemm;
      mm.inputs.push_back(bias);
      mm.outputs[0] = add.outputs[0];
      g.value(add.outputs[0]).producer = mm.id;
      mm.origin.insert(mm.origin.end(), add.origin.begin(), add.origin.end());
      add.removed = true;
      break;
    }
  }
  return Status::Ok();
}

}  // namespace kiln::passes
