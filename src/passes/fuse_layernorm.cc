// LayerNorm as exporters decompose it, recognised as one LayerNormalization layer:
//   d = x - ReduceMean(x, [-1]);  v = ReduceMean(d^2 | d*d, [-1])
//   y = d / Sqrt(v + eps)  |  d * Reciprocal(Sqrt(v + eps))  |  d * (1 / Sqrt(v + eps))
//   [y = y * gamma] [y = y + beta]
//     -> LayerNormalization(x, gamma | ones[D], beta){axis=-1, epsilon=eps}
// (ONNX "Operator LayerNormalization, since version 17".) The reductions must run over the last
// axis only with keepdims=1 (axes as attribute below opset 18, as a constant input from 18);
// gamma/beta are constants of x's dtype with D values on the last axis; every intermediate
// feeds only the next layer of the pattern, except d, which feeds the square and the division.
// RMSNorm (no mean subtracted) is fuse_rmsnorm's.
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln::passes {

namespace {

namespace pt = pattern;
using ir::OpKind;

// Tries the pattern rooted at the first ReduceMean; rewrites it into LayerNormalization.
bool try_fuse(ir::Graph& g, const pt::Consumers& c, ir::Node& rm1) {
  if (rm1.inputs.empty() || rm1.outputs.size() != 1) return false;
  const ir::ValueId x = rm1.inputs[0];
  const DataType dt = g.value(x).dtype;
  const int rank = pt::rank_of(g, x);
  if (!pt::is_float_dtype(dt) || rank < 1 || !(*g.value(x).shape)[rank - 1].is_known()) return false;
  const int64_t dim = (*g.value(x).shape)[rank - 1].value;
  if (!pt::mean_over_last_axis(g, rm1, rank)) return false;
  // d = x - mean
  ir::Node* sub = pt::sole_consumer(g, c, rm1.outputs[0], OpKind::kSub);
  if (!sub || sub->inputs.size() != 2 || sub->inputs[0] != x || sub->inputs[1] != rm1.outputs[0]) return false;
  const ir::ValueId d = sub->outputs[0];
  if (c[d].size() != 2 || std::count(g.outputs.begin(), g.outputs.end(), d)) return false;
  // One reader of d squares it, the other divides by the standard deviation.
  ir::Node* sq = nullptr;
  ir::Node* norm = nullptr;
  ir::ValueId s = ir::kNoValue;
  std::vector<ir::Node*> norm_chain;
  for (ir::NodeId id : c[d]) {
    ir::Node& n = g.node(id);
    const bool is_square = n.inputs.size() == 2 && n.inputs[0] == d &&
                           ((n.op == OpKind::kMul && n.inputs[1] == d) ||
                            (n.op == OpKind::kPow && pt::is_const_near(g, n.inputs[1], rank, 2.0)));
    if (is_square && !sq) {
      sq = &n;
    } else if (!norm && pt::normalizer_of(g, c, n, d, &s, &norm_chain)) {
      norm = &n;
    }
  }
  if (!sq || !norm) return false;
  // var = ReduceMean(d^2); std = Sqrt(var + eps)
  ir::Node* rm2 = pt::sole_consumer(g, c, sq->outputs[0], OpKind::kReduceMean);
  if (!rm2 || !pt::mean_over_last_axis(g, *rm2, rank)) return false;
  ir::Node* add_eps = pt::sole_consumer(g, c, rm2->outputs[0], OpKind::kAdd);
  if (!add_eps) return false;
  double eps;
  if (!pt::scalar_constant(g, pt::other_input(*add_eps, rm2->outputs[0]), rank, &eps) || eps < 0) return false;
  ir::Node* sqrt = pt::sole_consumer(g, c, add_eps->outputs[0], OpKind::kSqrt);
  if (!sqrt || sqrt->outputs[0] != s || !pt::single_use(g, c, s)) return false;
  if (!norm_chain.empty() && pt::sole_consumer(g, c, s, norm_chain[0]->op) != norm_chain[0]) return false;

  std::vector<ir::Node*> matched = {sub, sq, rm2, add_eps, sqrt};
  matched.insert(matched.end(), norm_chain.begin(), norm_chain.end());
  matched.push_back(norm);
  ir::ValueId y = norm->outputs[0];
  // Optional affine tail: * gamma, + beta.
  std::optional<Tensor> gamma, beta;
  if (ir::Node* mul = pt::sole_consumer(g, c, y, OpKind::kMul)) {
    const ir::ValueId p = pt::other_input(*mul, y);
    if (p != ir::kNoValue && p != y && (gamma = pt::last_axis_param(g, p, dt, rank, dim))) {
      matched.push_back(mul);
      y = mul->outputs[0];
    }
  }
  if (ir::Node* add = pt::sole_consumer(g, c, y, OpKind::kAdd)) {
    const ir::ValueId p = pt::other_input(*add, y);
    if (p != ir::kNoValue && p != y && (beta = pt::last_axis_param(g, p, dt, rank, dim))) {
      matched.push_back(add);
      y = add->outputs[0];
    }
  }
  const auto scale = pt::add_last_axis_constant(g, rm1.name + "_ln_scale", dt, dim, std::move(gamma));
  if (!scale) return false;
  std::optional<ir::ValueId> bias;
  if (beta && !(bias = pt::add_last_axis_constant(g, rm1.name + "_ln_bias", dt, dim, std::move(beta)))) return false;
  std::vector<ir::ValueId> inputs = {x, *scale};
  if (bias) inputs.push_back(*bias);
  pt::rewrite_as_last_axis_norm(g, rm1, OpKind::kLayerNormalization, 17, std::move(inputs), eps, y, matched);
  return true;
}

}  // namespace

Status fuse_layernorm(ir::Graph& g, const PassOptions&) {
  auto consumers = g.consumers();
  for (auto& n : g.nodes) {
    if (n.removed || n.op != OpKind::kReduceMean) continue;
    if (try_fuse(g, consumers, n)) consumers = g.consumers();
  }
  return Status::Ok();
}

}  // namespace kiln::passes
