// Helpers shared by passes: use rewiring and dead-node removal.
#include "passes/pass.h"

#include <algorithm>

#include "core/numerics.h"

namespace kiln::passes {

int live_layers(const ir::Graph& g) {
  int n = 0;
  for (const auto& node : g.nodes) n += !node.removed;
  return n;
}

bool replace_all_uses(ir::Graph& g, ir::ValueId from, ir::ValueId to) {
  const bool from_is_output = std::count(g.outputs.begin(), g.outputs.end(), from) > 0;
  if (from_is_output) {
    const bool to_is_io = std::count(g.outputs.begin(), g.outputs.end(), to) > 0 ||
                          std::count(g.inputs.begin(), g.inputs.end(), to) > 0 || g.value(to).constant ||
                          g.value(to).producer < 0;
    if (to_is_io) return false;
    // `to` takes over the graph output's name so users still find it.
    const std::string out_name = g.value(from).name, inner_name = g.value(to).name;
    g.rename_value(from, "");
    g.rename_value(to, out_name);
    g.rename_value(from, inner_name);
    for (auto& o : g.outputs)
      if (o == from) o = to;
  }
  for (auto& n : g.nodes) {
    if (n.removed) continue;
    for (auto& v : n.inputs)
      if (v == from) v = to;
  }
  return true;
}

bool constant_ints(const ir::Graph& g, ir::ValueId v, std::vector<int64_t>* out) {
  if (v == ir::kNoValue) return false;
  const auto& t = g.value(v).constant;
  if (!t || (t->dtype() != DataType::kInt64 && t->dtype() != DataType::kInt32) || t->rank() > 1) return false;
  out->clear();
  for (int64_t i = 0; i < t->numel(); ++i) out->push_back(load_as_int64(t->dtype(), t->raw(), i));
  return true;
}

bool known_shape(const ir::Graph& g, ir::ValueId v, std::vector<int64_t>* out) {
  if (v == ir::kNoValue) return false;
  const ir::Value& val = g.value(v);
  if (val.kind != ir::ValueKind::kTensor || !val.shape) return false;
  out->clear();
  for (const ir::Dim& d : *val.shape) {
    if (!d.is_known()) return false;
    out->push_back(d.value);
  }
  return true;
}

std::set<std::string> subgraph_reads(const ir::Graph& g) {
  std::set<std::string> names;
  for (const auto& n : g.nodes)
    for (const auto& [k, a] : n.attrs) {
      if (a.kind != ir::Attribute::Kind::kGraph || !a.g) continue;
      for (ir::ValueId v : a.g->outer_refs) names.insert(a.g->value(v).name);
      for (const auto& inner : subgraph_reads(*a.g)) names.insert(inner);
    }
  return names;
}

const Tensor* const_f32(const ir::Graph& g, ir::ValueId v) {
  if (v == ir::kNoValue) return nullptr;
  const auto& t = g.value(v).constant;
  return (t && t->dtype() == DataType::kFloat32) ? t.get() : nullptr;
}

int remove_dead_nodes(ir::Graph& g) {
  int removed = 0;
  bool changed = true;
  while (changed) {
    changed = false;
    std::vector<int> uses(g.values.size(), 0);
    for (const auto& n : g.nodes) {
      if (n.removed) continue;
      for (auto v : n.inputs)
        if (v != ir::kNoValue) ++uses[v];
    }
    for (auto v : g.outputs) ++uses[v];
    // Subgraphs read enclosing values by name; those reads keep their producers alive.
    for (const auto& name : subgraph_reads(g)) {
      const ir::ValueId v = g.find_value(name);
      if (v != ir::kNoValue) ++uses[v];
    }
    for (auto& n : g.nodes) {
      if (n.removed) continue;
      bool used = false;
      for (auto o : n.outputs) used |= (o != ir::kNoValue && uses[o] > 0);
      if (!used) {
        n.removed = true;
        ++removed;
        changed = true;
      }
    }
  }
  return removed;
}

}  // namespace kiln::passes
