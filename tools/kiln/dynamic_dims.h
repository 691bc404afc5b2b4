// trtexec's habit for models with dynamic input dims and no shapes given: build with 1 for each
// dynamic dim and warn, naming them. Shared by `kiln build` and the Python package's kiln.build.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/builder.h"

namespace kiln::cli {

// For every input of `g` with dynamic dims (known rank) that a profile of `config` does not
// name, sets min = opt = max = its dims with 1 for each dynamic one in that profile (adding a
// profile when there is none). Returns one warning per such input:
// "input 'x' has dynamic dims [batch,3,?,?] and no shapes were given: building with [1,3,1,1]
// (set its shapes: --shapes x:DIMS or --min/--opt/--max-shapes)". Inputs of unknown rank are left
// to the builder's error.
std::vector<std::string> fill_dynamic_dims(const ir::Graph& g, BuilderConfig* config);

}  // namespace kiln::cli
