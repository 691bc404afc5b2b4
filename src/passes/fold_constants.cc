// Constant folding: a layer whose inputs are all constants is evaluated once at build time
// with the CPU reference kernels and replaced by its outputs.
//   y = f(c1, ..., cn), all ci constant  ->  y := constant f(c1, ..., cn)
// Layers with subgraphs are left alone, and so are outputs above kMaxFoldedBytes (folding a
// ConstantOfShape into a huge weight would bloat the plan).
#include "passes/passes.h"
#include "runtime/interpreter.h"

namespace kiln::passes {

namespace {
constexpr size_t kMaxFoldedBytes = 64u << 20;  // bytes

bool foldable(const ir::Graph& g, const ir::Node& n) {
  for (const auto& [k, a] : n.attrs)
    if (a.kind == ir::Attribute::Kind::kGraph) return false;
  bool any_input = false;
  for (ir::ValueId v : n.inputs) {
    if (v == ir::kNoValue) continue;
    if (!g.value(v).constant) return false;
    any_input = true;
  }
  return any_input || n.op == ir::OpKind::kRange || n.op == ir::OpKind::kEyeLike;
}

}  // namespace

Status fold_constants(ir::Graph& g, const PassOptions&) {
  for (auto& n : g.nodes) {
    if (n.removed || !foldable(g, n)) continue;
    // A one-node graph whose inputs are the constants themselves.
    ir::Graph mini;
    mini.opset_imports = g.opset_imports;
    ir::Node copy = n;
    copy.inputs.clear();
    copy.outputs.clear();
    for (ir::ValueId v : n.inputs) {
      if (v == ir::kNoValue) { copy.inputs.push_back(ir::kNoValue); continue; }
      ir::ValueId mv = mini.add_value(g.value(v).name, g.value(v).dtype);
      mini.value(mv).constant = g.value(v).constant;
      copy.inputs.push_back(mv);
    }
    for (ir::ValueId v : n.outputs) {
      if (v == ir::kNoValue) { copy.outputs.push_back(ir::kNoValue); continue; }
      ir::ValueId mv = mini.add_value(g.value(v).name, g.value(v).dtype);
      copy.outputs.push_back(mv);
      mini.outputs.push_back(mv);
    }
    mini.add_node(std::move(copy));
    auto outs = interpret(mini, {});
    if (!outs.ok()) continue;  // leave it to run time, where the error names the layer
    size_t bytes = 0;
    bool tensors_only = true;  // sequence/optional values stay run-time values
    for (const auto& t : *outs) {
      bytes += t.nbytes();
      tensors_only = tensors_only && t.is_tensor();
    }
    if (!tensors_only) continue;
    if (bytes > kMaxFoldedBytes) continue;
    size_t k = 0;
    for (ir::ValueId v : n.outputs) {
      if (v == ir::kNoValue) continue;
      ir::Value& val = g.value(v);
      val.constant = std::make_shared<Tensor>((*outs)[k++]);
      val.dtype = val.constant->dtype();
      ir::SymShape s;
      for (int64_t d : val.constant->shape()) s.push_back(ir::Dim::known(d));
      val.shape = s;
      val.producer = -1;
    }
    n.removed = true;
  }
  return Status::Ok();
}

}  // namespace kiln::passes
