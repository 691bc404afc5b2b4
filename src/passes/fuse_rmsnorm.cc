// RMSNorm as exporters decompose it (T5, LLaMA: x * rsqrt(mean(x^2, -1) + eps) * w), recognised
// as one RMSNormalization layer (ONNX "Operator RMSNormalization, since version 23"; Kiln's
// internal op of that name, ops.def):
//   ms = ReduceMean(x^2 | x*x, [-1]);  s = Sqrt(ms + eps)
//   y = x / s  |  x * Reciprocal(s)  |  x * (1 / s)        [y = y * w | w * y]
//     -> RMSNormalization(x, w | ones[D]){axis=-1, epsilon=eps}
// torch.rsqrt exports as Reciprocal(Sqrt); ONNX has no Rsqrt. The reduction runs over the last
// axis only with keepdims=1; w is a constant of x's dtype with D values on the last axis; every
// intermediate feeds only the next layer (x itself may have other readers, such as a residual).
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln::passes {

namespace {

namespace pt = pattern;
using ir::OpKind;

// Anchored at the ReduceMean of the square.
bool try_fuse(ir::Graph& g, const pt::Consumers& c, ir::Node& rm) {
  if (rm.inputs.empty() || rm.outputs.size() != 1) return false;
  const ir::ValueId sqv = rm.inputs[0];
  if (!pt::single_use(g, c, sqv) || g.value(sqv).producer < 0) return false;
  ir::Node& sq = g.node(g.value(sqv).producer);
  if (sq.removed || sq.inputs.size() != 2) return false;
  const ir::ValueId x = sq.inputs[0];
  const int rank = pt::rank_of(g, x);
  const bool is_square = (sq.op == OpKind::kMul && sq.inputs[1] == x) ||
                         (sq.op == OpKind::kPow && pt::is_const_near(g, sq.inputs[1], rank, 2.0));
  const DataType dt = g.value(x).dtype;
  if (!is_square || !pt::is_float_dtype(dt) || rank < 1 || !(*g.value(x).shape)[rank - 1].is_known()) return false;
  const int64_t dim = (*g.value(x).shape)[rank - 1].value;
  if (!pt::mean_over_last_axis(g, rm, rank)) return false;
  ir::Node* add_eps = pt::sole_consumer(g, c, rm.outputs[0], OpKind::kAdd);
  if (!add_eps) return false;
  double eps;
  if (!pt::scalar_constant(g, pt::other_input(*add_eps, rm.outputs[0]), rank, &eps) || eps < 0) return false;
  ir::Node* sqrt = pt::sole_consumer(g, c, add_eps->outputs[0], OpKind::kSqrt);
  if (!sqrt) return false;
  // Another reader of x normalizes by the Sqrt (x may also feed a residual Add).
  ir::Node* norm = nullptr;
  std::vector<ir::Node*> chain;
  for (ir::NodeId id : c[x]) {
    ir::Node& n = g.node(id);
    if (&n == &sq || n.removed) continue;
    ir::ValueId s = ir::kNoValue;
    std::vector<ir::Node*> ch;
    if (pt::normalizer_of(g, c, n, x, &s, &ch) && s == sqrt->outputs[0]) {
      norm = &n;
      chain = ch;
    }
  }
  if (!norm || !pt::single_use(g, c, sqrt->outputs[0])) return false;
  std::vector<ir::Node*> matched = {&sq, add_eps, sqrt};
  matched.insert(matched.end(), chain.begin(), chain.end());
  matched.push_back(norm);
  ir::ValueId y = norm->outputs[0];
  std::optional<Tensor> w;
  if (ir::Node* mul = pt::sole_consumer(g, c, y, OpKind::kMul)) {
    const ir::ValueId p = pt::other_input(*mul, y);
    if (p != ir::kNoValue && p != y && (w = pt::last_axis_param(g, p, dt, rank, dim))) {
      matched.push_back(mul);
      y = mul->outputs[0];
    }
  }
  const auto wv = pt::add_last_axis_constant(g, rm.name + "_rms_scale", dt, dim, std::move(w));
  if (!wv) return false;
  pt::rewrite_as_last_axis_norm(g, rm, OpKind::kRMSNormalization, 23, {x, *wv}, eps, y, matched);
  return true;
}

}  // namespace

Status fuse_rmsnorm(ir::Graph& g, const PassOptions&) {
  auto consumers = g.consumers();
  for (auto& n : g.nodes) {
    if (n.removed || n.op != OpKind::kReduceMean) continue;
    if (try_fuse(g, consumers, n)) consumers = g.consumers();
  }
  return Status::Ok();
}

}  // namespace kiln::passes
