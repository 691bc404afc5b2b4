// GELU as exporters decompose it, recognised as one Gelu layer (ONNX "Operator Gelu, since
// version 20"):
//   0.5 * x * (1 + Erf(x / 1.4142135 | x * 0.70710678))                -> Gelu(x){approximate="none"}
//   0.5 * x * (1 + Tanh(0.7978846 * (x + 0.044715 * x^3)))             -> Gelu(x){approximate="tanh"}
// with x^3 = Pow(x, 3) | x * (x * x) | (x * x) * x, commuted operands, and the three products
// in the orders exporters emit: (x * a) * 0.5, (x * 0.5) * a, (a * 0.5) * x. Constants match
// within 1e-4 relative, are scalars of rank <= x's (no broadcasting), and every intermediate
// feeds only the next layer of the pattern.
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln::passes {

namespace {

namespace pt = pattern;
using ir::OpKind;

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kTanhCubeCoeff = 0.044715;

// Mul(v, c) or Mul(c, v) with c a scalar constant near ref: the non-constant operand.
ir::ValueId mul_by_const(const ir::Graph& g, const ir::Node& n, int rank, double ref) {
  if (n.op != OpKind::kMul || n.inputs.size() != 2) return ir::kNoValue;
  for (int k = 0; k < 2; ++k)
    if (pt::is_const_near(g, n.inputs[1 - k], rank, ref)) return n.inputs[k];
  return ir::kNoValue;
}

// a = 1 + f(x) has been matched; finds 0.5 * x * a and returns y, adding its layers to *matched.
ir::ValueId match_half_x_times(ir::Graph& g, const pt::Consumers& c, ir::ValueId a, ir::ValueId x, int rank,
                               std::vector<ir::Node*>* matched) {
  ir::Node* m1 = pt::sole_consumer(g, c, a, OpKind::kMul);
  if (!m1) return ir::kNoValue;
  const ir::ValueId o = pt::other_input(*m1, a);
  if (o == ir::kNoValue || o == a) return ir::kNoValue;
  if (o == x || pt::is_const_near(g, o, rank, 0.5)) {
    // (x * a) * 0.5  or  (a * 0.5) * x
    ir::Node* m2 = pt::sole_consumer(g, c, m1->outputs[0], OpKind::kMul);
    if (!m2) return ir::kNoValue;
    const ir::ValueId o2 = pt::other_input(*m2, m1->outputs[0]);
    const bool ok = o == x ? pt::is_const_near(g, o2, rank, 0.5) : o2 == x;
    if (!ok) return ir::kNoValue;
    matched->insert(matched->end(), {m1, m2});
    return m2->outputs[0];
  }
  // (x * 0.5) * a
  ir::Node* h = pt::producer(g, o, OpKind::kMul);
  if (!h || !pt::single_use(g, c, o) || mul_by_const(g, *h, rank, 0.5) != x) return ir::kNoValue;
  matched->insert(matched->end(), {h, m1});
  return m1->outputs[0];
}

// Erf(x / sqrt 2) or Erf(x * (1/sqrt 2)): x, or kNoValue.
ir::ValueId erf_argument(ir::Graph& g, const pt::Consumers& c, const ir::Node& erf, int* rank,
                         std::vector<ir::Node*>* matched) {
  const ir::ValueId u = erf.inputs.empty() ? ir::kNoValue : erf.inputs[0];
  if (!pt::single_use(g, c, u)) return ir::kNoValue;
  if (ir::Node* div = pt::producer(g, u, OpKind::kDiv)) {
    if (div->inputs.size() != 2) return ir::kNoValue;
    *rank = pt::rank_of(g, div->inputs[0]);
    if (!pt::is_const_near(g, div->inputs[1], *rank, kSqrt2)) return ir::kNoValue;
    matched->push_back(div);
    return div->inputs[0];
  }
  if (ir::Node* mul = pt::producer(g, u, OpKind::kMul)) {
    for (int k = 0; k < 2 && mul->inputs.size() == 2; ++k) {
      *rank = pt::rank_of(g, mul->inputs[k]);
      if (pt::is_const_near(g, mul->inputs[1 - k], *rank, 1.0 / kSqrt2)) {
        matched->push_back(mul);
        return mul->inputs[k];
      }
    }
  }
  return ir::kNoValue;
}

// v == x^3 as Pow(x, 3), x * (x * x) or (x * x) * x, v single-use.
bool is_cube_of(ir::Graph& g, const pt::Consumers& c, ir::ValueId v, ir::ValueId x, int rank,
                std::vector<ir::Node*>* matched) {
  if (!pt::single_use(g, c, v)) return false;
  if (ir::Node* pow = pt::producer(g, v, OpKind::kPow)) {
    if (pow->inputs.size() != 2 || pow->inputs[0] != x || !pt::is_const_near(g, pow->inputs[1], rank, 3.0))
      return false;
    matched->push_back(pow);
    return true;
  }
  ir::Node* outer = pt::producer(g, v, OpKind::kMul);
  if (!outer) return false;
  const ir::ValueId sq = pt::other_input(*outer, x);
  if (sq == ir::kNoValue || sq == x || !pt::single_use(g, c, sq)) return false;
  ir::Node* inner = pt::producer(g, sq, OpKind::kMul);
  if (!inner || inner->inputs.size() != 2 || inner->inputs[0] != x || inner->inputs[1] != x) return false;
  matched->insert(matched->end(), {inner, outer});
  return true;
}

// Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)): x, or kNoValue.
ir::ValueId tanh_argument(ir::Graph& g, const pt::Consumers& c, const ir::Node& tanh, int* rank,
                          std::vector<ir::Node*>* matched) {
  const ir::ValueId u = tanh.inputs.empty() ? ir::kNoValue : tanh.inputs[0];
  ir::Node* scale = pt::single_use(g, c, u) ? pt::producer(g, u, OpKind::kMul) : nullptr;
  if (!scale) return ir::kNoValue;
  *rank = pt::rank_of(g, u);
  const ir::ValueId s = mul_by_const(g, *scale, *rank, kSqrt2OverPi);
  ir::Node* add = pt::single_use(g, c, s) ? pt::producer(g, s, OpKind::kAdd) : nullptr;
  if (!add || add->inputs.size() != 2) return ir::kNoValue;
  for (int k = 0; k < 2; ++k) {
    const ir::ValueId x = add->inputs[k], q = add->inputs[1 - k];
    ir::Node* qmul = pt::single_use(g, c, q) ? pt::producer(g, q, OpKind::kMul) : nullptr;
    if (!qmul || x == q) continue;
    std::vector<ir::Node*> cube;
    const ir::ValueId cv = mul_by_const(g, *qmul, *rank, kTanhCubeCoeff);
    if (cv == ir::kNoValue || !is_cube_of(g, c, cv, x, *rank, &cube)) continue;
    matched->insert(matched->end(), cube.begin(), cube.end());
    matched->insert(matched->end(), {qmul, add, scale});
    return x;
  }
  return ir::kNoValue;
}

// Tries both forms anchored at an Erf or Tanh layer, which becomes the Gelu.
bool try_fuse(ir::Graph& g, const pt::Consumers& c, ir::Node& anchor) {
  if (anchor.outputs.size() != 1) return false;
  std::vector<ir::Node*> matched;
  int rank = -1;
  const bool is_erf = anchor.op == OpKind::kErf;
  const ir::ValueId x = is_erf ? erf_argument(g, c, anchor, &rank, &matched) : tanh_argument(g, c, anchor, &rank, &matched);
  if (x == ir::kNoValue || rank < 0 || pt::rank_of(g, x) != rank || !pt::is_float_dtype(g.value(x).dtype)) return false;
  // a = 1 + f
  ir::Node* add1 = pt::sole_consumer(g, c, anchor.outputs[0], OpKind::kAdd);
  if (!add1 || !pt::is_const_near(g, pt::other_input(*add1, anchor.outputs[0]), rank, 1.0)) return false;
  matched.push_back(add1);
  const ir::ValueId y = match_half_x_times(g, c, add1->outputs[0], x, rank, &matched);
  if (y == ir::kNoValue) return false;
  anchor.op = OpKind::kGelu;
  anchor.opset = std::max(anchor.opset, 20);
  anchor.inputs = {x};
  anchor.outputs = {y};
  anchor.attrs.clear();
  anchor.attrs["approximate"] = ir::Attribute::of_string(is_erf ? "none" : "tanh");
  g.value(y).producer = anchor.id;
  pt::absorb(anchor, matched);
  return true;
}

}  // namespace

Status fuse_gelu(ir::Graph& g, const PassOptions&) {
  auto consumers = g.consumers();
  for (auto& n : g.nodes) {
    if (n.removed || (n.op != OpKind::kErf && n.op != OpKind::kTanh)) continue;
    if (try_fuse(g, consumers, n)) consumers = g.consumers();
  }
  return Status::Ok();
}

}  // namespace kiln::passes
