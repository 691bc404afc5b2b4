// The constant evaluator: how build-time code (shape inference, constant folding) computes the
// value of a layer whose inputs are all constants, without depending on a backend. ir and
// passes declare and call it; the CPU reference backend implements it
// (kiln::reference_evaluator(), backends/cpu/interpreter.h) and the builder passes that in.
// docs/decisions/0030-module-targets.md.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln::ir {

class ConstantEvaluator {
 public:
  virtual ~ConstantEvaluator() = default;
  // Whether layers of op `op` can be evaluated at all (false: the caller leaves them alone).
  virtual bool supports(OpKind op) const = 0;
  // Runs `g`, a graph with no inputs whose nodes read only constants (Value::constant) or
  // values computed inside `g`, and returns one tensor per g.outputs, in order. Errors are the
  // failing kernel's, naming the node; callers treat them as "not foldable", never as fatal.
  virtual StatusOr<std::vector<Tensor>> evaluate(const Graph& g) const = 0;
};

}  // namespace kiln::ir
