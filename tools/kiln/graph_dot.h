// The engine's layer graph as Graphviz DOT, for `kiln inspect PLAN --graph out.svg`: one box
// per layer (name, op, tactic, how many ONNX nodes it absorbed — fused layers are filled),
// one ellipse per engine input/output, an edge per tensor passed between them (labelled with
// its shape). Weights are not drawn.
#pragma once

#include <string>

#include "kiln/runtime.h"
#include "kiln/status.h"

namespace kiln::cli {

std::string engine_dot(const Engine& e);
// Writes `path`: DOT text for *.dot, otherwise renders with Graphviz's `dot -T<ext>` (svg, png, pdf).
Status write_graph(const Engine& e, const std::string& path);

}  // namespace kiln::cli
