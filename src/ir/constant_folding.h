// Folding one layer whose inputs are all constants into constant outputs, with a
// ConstantEvaluator: shared by the fold_constants pass and the CUDA lowering (which folds shape
// computations at concrete input shapes), so neither backend code nor ir calls a pass.
#pragma once

#include <cstddef>

#include "core/tensor.h"
#include "ir/constant_evaluator.h"
#include "ir/graph.h"

namespace kiln::ir {

// Folded outputs above this many bytes stay computed at run time (folding a ConstantOfShape
// into a huge weight would bloat the plan).
constexpr size_t kMaxFoldedBytes = 64u << 20;

// Turns value `v` into the constant `t` (known shape and dtype, no producer).
void make_constant(Graph& g, ValueId v, Tensor t);

// Evaluates live node `n` of `g` when every input is a constant (Range/EyeLike also without
// inputs), it has no subgraph attribute (except an If whose branches read no value of an
// enclosing graph and hold no subgraphs: it then runs the chosen branch) and `eval` supports its
// op; on success its outputs
// become constants and `n` is marked removed. Leaves the node alone (false) when evaluation
// fails (the run-time error will name the layer), an output is a sequence/optional, or the
// outputs exceed `max_bytes`.
bool fold_constant_node(Graph& g, Node& n, const ConstantEvaluator& eval, size_t max_bytes = kMaxFoldedBytes);

// fold_constant_node over every live node, in order (fold a topologically sorted graph in one
// sweep).
void fold_constant_nodes(Graph& g, const ConstantEvaluator& eval, size_t max_bytes = kMaxFoldedBytes);

}  // namespace kiln::ir
