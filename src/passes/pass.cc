// Helpers shared by passes: use rewiring and dead-node removal.
#include "passes/pass.h"

#include <algorithm>

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
