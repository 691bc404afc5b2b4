// fuse_rmsnorm_gemm: an RMSNorm read only by the GEMM after it becomes that GEMM's prologue
// (docs/decisions/0092) — a decoder layer's input_layernorm -> q/k/v and post_attention_layernorm
// -> gate/up:
//   Y = MatMul(RMSNormalization(X, S){axis = last, epsilon}, W)
//     -> Y = MatMulBias(X, W, 0, -, S){norm_epsilon = epsilon}
//   Y = MatMulBias(RMSNormalization(X, S), W, b, R?) -> MatMulBias(X, W, b, R?, S){norm_epsilon}
// (ops.def MatMulBias input 4). The norm's output must be read by that GEMM alone, as its A (not as
// the residual), and be neither a graph output nor read by a subgraph; W a constant 2-D float32
// weight, S a constant of X's last dim (K values). The product reads the normalized A exactly as
// the RMSNormalization layer stored it: the CPU reference runs that kernel first; the GPU's skinny
// GEMM normalizes each row in its prologue (no launch, no [M, K] round trip through memory) and
// its cuBLASLt tactics run the norm kernel into their workspace.
#include <algorithm>

#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln::passes {

namespace pt = pattern;

Status fuse_rmsnorm_gemm(ir::Graph& g, const PassOptions&) {
  const std::set<std::string> pinned = subgraph_reads(g);
  const pt::Consumers consumers = g.consumers();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node& norm = g.nodes[i];
    if (norm.removed || norm.op != ir::OpKind::kRMSNormalization || norm.inputs.size() != 2 || norm.outputs.size() != 1)
      continue;
    const ir::ValueId x = norm.inputs[0], y = norm.outputs[0];
    const int rank = pt::rank_of(g, x);
    if (rank < 2 || !pt::is_float_dtype(g.value(x).dtype) || g.value(y).dtype != g.value(x).dtype) continue;
    const int64_t axis = norm.attr_int("axis", -1);
    if (axis != -1 && axis != rank - 1) continue;
    const ir::Dim kd = g.value(x).shape->back();
    const std::shared_ptr<const Tensor> sc = g.value(norm.inputs[1]).constant;
    if (!kd.is_known() || !sc || sc->dtype() != DataType::kFloat32 || sc->numel() != kd.value) continue;
    if (pinned.count(g.value(y).name) || !pt::single_use(g, consumers, y)) continue;
    ir::Node& mm = g.node(consumers[y][0]);
    if (mm.removed || mm.outputs.size() != 1 || mm.inputs.size() < 2 || mm.inputs[0] != y) continue;
    const std::shared_ptr<const Tensor> w = g.value(mm.inputs[1]).constant;
    if (mm.inputs[1] == y || !w || w->rank() != 2 || w->dtype() != DataType::kFloat32 || w->dim(0) != kd.value) continue;
    const bool plain = mm.op == ir::OpKind::kMatMul && mm.inputs.size() == 2;
    const bool biased = mm.op == ir::OpKind::kMatMulBias && (mm.inputs.size() == 3 || mm.inputs.size() == 4);
    if (!plain && !biased) continue;
    if (biased && (mm.inputs[2] == y || (mm.inputs.size() == 4 && mm.inputs[3] == y))) continue;
    // The scale as [K] (a [1, K] or other all-ones-but-last constant reads the same values).
    ir::ValueId s = norm.inputs[1];
    if (sc->rank() != 1) s = pt::add_constant(g, g.value(s).name + "_k", sc->reshaped({kd.value}));
    if (plain) KILN_RETURN_IF_ERROR(pt::to_matmul_bias(g, mm, w->dim(1)));
    if (mm.inputs.size() == 3) mm.inputs.push_back(ir::kNoValue);  // no residual
    mm.inputs[0] = x;
    mm.inputs.push_back(s);
    mm.attrs["norm_epsilon"] = ir::Attribute::of_float(norm.attr_float("epsilon", 1e-5f));
    // The norm's names first: it runs first.
    std::vector<std::string> origin = norm.origin.empty() ? std::vector<std::string>{norm.name} : norm.origin;
    if (mm.origin.empty()) mm.origin.push_back(mm.name);
    origin.insert(origin.end(), mm.origin.begin(), mm.origin.end());
    mm.origin = std::move(origin);
    g.value(y).producer = -1;
    norm.removed = true;
  }
  return Status::Ok();
}

}  // namespace kiln::passes
