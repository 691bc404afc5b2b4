// fuse_gated_gemm: a gated MLP's activation joins the horizontally fused gate/up GEMM before it
// (docs/decisions/0092; "GLU Variants Improve Transformer", Shazeer 2020):
//   P = MatMul(A, [Wg | Wu]) or MatMulBias(A, [Wg | Wu], b, -, S?);  g, u = Split(P, axis = -1, [N, N]);
//   Y = FusedPointwise(g, u){program}
//     -> Y = MatMulBias(A, [Wg | Wu], b, -, S?){gate = program}       (ops.def MatMulBias, attribute gate)
// and the same for an 8-bit QuantLinear(A, [Wg; Wu], w_scale, b?) (an FP8 plan's gate/up layer):
//     -> Y = QuantLinear(...){gate = program}
// after fuse_horizontal_gemm made the wide GEMM + Split and fuse_pointwise the program. Only the
// program the GPU's gated GEMM computes with constant opcodes joins: silu(g) * u
// (ir::pw_is_silu_gate; the halves in either input order — the program is rewritten to read
// in0 = the first half). P, g and u must be read by the layer after each alone, and none of them
// be a graph output or read by a subgraph; the GEMM has no residual and no activation. The CPU
// reference computes the product, the bias and the program over the halves in float32 — the
// unfused layers' arithmetic; the GPU's skinny GEMM evaluates the gate in its epilogue (no Split,
// no [M, 2N] round trip, no launch) and its cuBLASLt tactics run one gate kernel over the
// workspace's product.
#include <algorithm>

#include "ir/pointwise_program.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln::passes {

namespace pt = pattern;

namespace {

// The two equal split sizes of a Split of P's last axis into 2 outputs; false otherwise.
bool halves(const ir::Graph& g, const ir::Node& split, int rank, int64_t n) {
  if (split.outputs.size() != 2 || n <= 0 || n % 2 != 0) return false;
  const int64_t axis = split.attr_int("axis", 0);
  if (axis != -1 && axis != rank - 1) return false;
  std::vector<int64_t> sizes;
  if (split.inputs.size() > 1 && split.inputs[1] != ir::kNoValue) {
    const auto& t = g.value(split.inputs[1]).constant;
    if (!t || t->dtype() != DataType::kInt64 || t->numel() != 2) return false;
    sizes = {t->data<int64_t>()[0], t->data<int64_t>()[1]};
  } else if (split.attrs.count("split")) {
    sizes = split.attrs.at("split").ints;
  } else {
    sizes = {n / 2, n / 2};
  }
  return sizes.size() == 2 && sizes[0] == n / 2 && sizes[1] == n / 2;
}

}  // namespace

Status fuse_gated_gemm(ir::Graph& g, const PassOptions&) {
  const std::set<std::string> pinned = subgraph_reads(g);
  const pt::Consumers consumers = g.consumers();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node& mm = g.nodes[i];
    if (mm.removed || mm.outputs.size() != 1 || mm.inputs.size() < 2) continue;
    const bool plain = mm.op == ir::OpKind::kMatMul && mm.inputs.size() == 2;
    const bool biased = mm.op == ir::OpKind::kMatMulBias && mm.inputs.size() >= 3 &&
                        (mm.inputs.size() < 4 || mm.inputs[3] == ir::kNoValue);
    const bool quant = mm.op == ir::OpKind::kQuantLinear && mm.inputs.size() >= 3;
    if ((!plain && !biased && !quant) || mm.attrs.count("gate") || !mm.attr_string("activation", "").empty()) continue;
    const std::shared_ptr<const Tensor> w = g.value(mm.inputs[1]).constant;
    // The product's width: W [K, N] float32, or QuantLinear's 8-bit W [N, K].
    if (!w || w->rank() != 2 || (!quant && w->dtype() != DataType::kFloat32)) continue;
    const int64_t width = quant ? w->dim(0) : w->dim(1);
    const ir::ValueId p = mm.outputs[0];
    const int rank = pt::rank_of(g, p);
    if (rank < 2 || !pt::is_float_dtype(g.value(p).dtype) || pinned.count(g.value(p).name)) continue;
    ir::Node* split = pt::sole_consumer(g, consumers, p, ir::OpKind::kSplit);
    if (!split || split->inputs.empty() || split->inputs[0] != p || !halves(g, *split, rank, width)) continue;
    const ir::ValueId lo = split->outputs[0], hi = split->outputs[1];
    if (lo == ir::kNoValue || hi == ir::kNoValue || pinned.count(g.value(lo).name) || pinned.count(g.value(hi).name))
      continue;
    ir::Node* f = pt::sole_consumer(g, consumers, lo, ir::OpKind::kFusedPointwise);
    if (!f || pt::sole_consumer(g, consumers, hi, ir::OpKind::kFusedPointwise) != f || f->inputs.size() != 2 ||
        f->outputs.size() != 1 || g.value(f->outputs[0]).dtype != g.value(p).dtype)
      continue;
    if (!((f->inputs[0] == lo && f->inputs[1] == hi) || (f->inputs[0] == hi && f->inputs[1] == lo))) continue;
    // No broadcast: Y has the halves' shape.
    if (!g.value(f->outputs[0]).shape || g.value(f->outputs[0]).shape != g.value(lo).shape) continue;
    StatusOr<ir::PwProgram> prog = ir::parse_pw_program(f->attr_string("program", ""));
    if (!prog.ok()) continue;
    ir::PwProgram gate = f->inputs[0] == lo ? *prog : ir::pw_swap_inputs01(*prog);
    if (!ir::pw_is_silu_gate(gate)) continue;
    if (plain) KILN_RETURN_IF_ERROR(pt::to_matmul_bias(g, mm, w->dim(1)));
    mm.attrs["gate"] = ir::Attribute::of_string(ir::pw_program_text(gate));
    mm.outputs[0] = f->outputs[0];
    g.value(f->outputs[0]).producer = mm.id;
    g.value(p).producer = -1;
    g.value(lo).producer = -1;
    g.value(hi).producer = -1;
    if (mm.origin.empty()) mm.origin.push_back(mm.name);
    pt::absorb(mm, {split, f});
    if (f->origin.empty()) mm.origin.push_back(f->name);
  }
  return Status::Ok();
}

}  // namespace kiln::passes
