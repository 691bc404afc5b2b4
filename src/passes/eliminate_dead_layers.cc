// Dead-layer elimination: a layer none of whose outputs reaches a graph output is removed, and
// so is the data of constants no live layer reads any more (weights a fusion replaced, inputs of
// folded layers), which would otherwise be written into the plan.
//   y = f(x), y unused and not a graph output  ->  (nothing)
//   constant c read by no live layer, not a graph input/output  ->  c without data
// Kiln's ops have no side effects, so this is always legal — but PagedAttention
// (ir::op_writes_memory), which appends to the KV pool: the step graph always reads its output, so
// it is live whenever the append matters.
#include <algorithm>

#include "passes/passes.h"

namespace kiln::passes {

Status eliminate_dead_layers(ir::Graph& g, const PassOptions&) {
  remove_dead_nodes(g);
  std::vector<char> read(g.values.size(), 0);
  for (const auto& n : g.nodes) {
    if (n.removed) continue;
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue) read[v] = 1;
  }
  for (ir::ValueId v : g.inputs) read[v] = 1;
  for (ir::ValueId v : g.outputs) read[v] = 1;
  for (const auto& name : subgraph_reads(g)) {
    const ir::ValueId v = g.find_value(name);
    if (v != ir::kNoValue) read[v] = 1;
  }
  for (auto& v : g.values)
    if (v.constant && !read[v.id] && v.producer < 0) v.constant.reset();
  return Status::Ok();
}

}  // namespace kiln::passes
