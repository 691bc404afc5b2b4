// Dead-layer elimination: a layer none of whose outputs reaches a graph output is removed.
//   y = f(x), y unused and not a graph output  ->  (nothing)
// Kiln's ops have no side effects, so this is always legal.
#include "passes/passes.h"

namespace kiln::passes {

Status eliminate_dead_layers(ir::Graph& g, const PassOptions&) {
  remove_dead_nodes(g);
  return Status::Ok();
}

}  // namespace kiln::passes
