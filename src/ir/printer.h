// A stable text dump of the IR, for tests, `--dump-after=<pass>` and bug reports: one line per
// node, attributes sorted by name, the same text for the same graph on every run.
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln::ir {

// graph main(%x:float32[batch,3,224,224]) {
//   %y:float32[batch,64,112,112] = Conv(%x, %w:const[64,3,7,7]) {pads=[3,3,3,3], strides=[2,2]}  # conv1
//   return %y
// }
// Omitted optional inputs/outputs print as `_`; an unknown rank as `[...]`; an unknown dtype as
// `?`. Subgraph attributes print as `@name` and their bodies follow the node, indented.
std::string print_graph(const Graph& g);

}  // namespace kiln::ir
