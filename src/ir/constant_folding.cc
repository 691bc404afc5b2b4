// Constant folding of one layer with a ConstantEvaluator (see constant_folding.h).
#include "ir/constant_folding.h"

#include <memory>
#include <utility>

namespace kiln::ir {
namespace {

// A subgraph that reads no value of an enclosing graph and holds no control flow of its own (a
// nested Loop could be unbounded work at build time): its results depend on its node's inputs
// only, at the cost of one pass over its nodes.
bool closed(const Graph& g) {
  if (!g.outer_refs.empty()) return false;
  for (const Node& n : g.nodes)
    for (const auto& [k, a] : n.attrs)
      if (a.kind == Attribute::Kind::kGraph) return false;
  return true;
}

bool foldable(const Graph& g, const Node& n) {
  if (op_writes_memory(n.op)) return false;
  // Subgraphs may read outer-scope values that are not the node's inputs; an If whose branches
  // are closed is a function of its condition (it runs one branch once, so folding is cheap).
  // Loop and Scan stay: their trip counts are unbounded work at build time.
  for (const auto& [k, a] : n.attrs)
    if (a.kind == Attribute::Kind::kGraph && !(n.op == OpKind::kIf && a.g && closed(*a.g))) return false;
  bool any_input = false;
  for (ValueId v : n.inputs) {
    if (v == kNoValue) continue;
    if (!g.value(v).constant) return false;
    any_input = true;
  }
  return any_input || n.op == OpKind::kRange || n.op == OpKind::kEyeLike;
}

}  // namespace

void make_constant(Graph& g, ValueId v, Tensor t) {
  Value& val = g.value(v);
  val.shape = SymShape{};
  for (int64_t d : t.shape()) val.shape->push_back(Dim::known(d));
  val.dtype = t.dtype();
  val.constant = std::make_shared<Tensor>(std::move(t));
  val.producer = -1;
}

bool fold_constant_node(Graph& g, Node& n, const ConstantEvaluator& eval, size_t max_bytes) {
  if (n.removed || !eval.supports(n.op) || !foldable(g, n)) return false;
  // A one-node graph whose inputs are the constants themselves.
  Graph mini;
  mini.opset_imports = g.opset_imports;
  Node copy = n;
  copy.inputs.clear();
  copy.outputs.clear();
  for (ValueId v : n.inputs) {
    if (v == kNoValue) { copy.inputs.push_back(kNoValue); continue; }
    ValueId mv = mini.add_value(g.value(v).name, g.value(v).dtype);
    mini.value(mv).constant = g.value(v).constant;
    copy.inputs.push_back(mv);
  }
  for (ValueId v : n.outputs) {
    if (v == kNoValue) { copy.outputs.push_back(kNoValue); continue; }
    ValueId mv = mini.add_value(g.value(v).name, g.value(v).dtype);
    copy.outputs.push_back(mv);
    mini.outputs.push_back(mv);
  }
  mini.add_node(std::move(copy));
  auto outs = eval.evaluate(mini);
  if (!outs.ok()) return false;  // leave it to run time, where the error names the layer
  size_t bytes = 0;
  bool tensors_only = true;  // sequence/optional values stay run-time values
  for (const auto& t : *outs) {
    bytes += t.nbytes();
    tensors_only = tensors_only && t.is_tensor();
  }
  if (!tensors_only || bytes > max_bytes) return false;
  size_t k = 0;
  for (ValueId v : n.outputs) {
    if (v == kNoValue) continue;
    make_constant(g, v, (*outs)[k++]);
  }
  n.removed = true;
  return true;
}

void fold_constant_nodes(Graph& g, const ConstantEvaluator& eval, size_t max_bytes) {
  for (Node& n : g.nodes) fold_constant_node(g, n, eval, max_bytes);
}

}  // namespace kiln::ir
