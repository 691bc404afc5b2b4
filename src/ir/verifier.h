// The IR verifier: structural invariants every pass must keep (ids, single producers,
// topological order, graph outputs defined, op arity and required attributes), checked
// recursively into subgraphs. Used by tests and by the `--verify-passes` hook.
#pragma once

#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln::ir {

// Ok, or the first problem found, naming the graph and node: "graph 'main': node 'conv1'
// (Conv): input 0 ('x') is used before it is defined".
Status verify(const Graph& g);

}  // namespace kiln::ir
