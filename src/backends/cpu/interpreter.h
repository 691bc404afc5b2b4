// The CPU reference interpreter: runs an ir::Graph node by node on the CPU kernels,
// freeing each intermediate after its last use. Used by the CPU engine, by constant
// folding (through reference_evaluator()), and as the reference for `kiln compare` and backend
// tests.
#pragma once

#include <functional>
#include <vector>

#include "core/tensor.h"
#include "ir/constant_evaluator.h"
#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln {

// Values of enclosing graphs that a subgraph may read (by name).
struct Scope {
  const ir::Graph* graph = nullptr;
  const std::vector<Tensor>* env = nullptr;  // indexed by ValueId of `graph`
  const Scope* parent = nullptr;
  const Tensor* lookup(const std::string& name) const;
};

struct InterpreterOptions {
  // Called after each node with its outputs (for per-layer timing or debugging dumps).
  std::function<void(const ir::Node&, const std::vector<Tensor>&, double ms)> on_node;
};

// Runs `g` with one tensor per g.inputs (in order); returns one tensor per g.outputs.
// Errors name the failing node. Input dtypes must match the graph's declared input dtypes.
StatusOr<std::vector<Tensor>> interpret(const ir::Graph& g, const std::vector<Tensor>& inputs,
                                        const Scope* outer = nullptr, const InterpreterOptions& opts = {});

// The constant evaluator backed by the CPU reference kernels (supports: the op has a kernel;
// evaluate: interpret(g, {})), for ir::infer_shapes and passes::PassOptions::evaluator. One
// stateless instance for the process; thread-safe.
const ir::ConstantEvaluator& reference_evaluator();

}  // namespace kiln
