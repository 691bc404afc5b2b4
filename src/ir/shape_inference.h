// Shape inference: fills Value::dtype and Value::shape (symbolic dims) for every value of a
// graph, in topological order, following the ONNX operator spec for each node's opset. Small
// integer shape tensors are tracked element by element (Shape -> Gather -> Concat -> Reshape
// chains), so Reshape/Expand/Tile targets computed from a symbolic batch still give known shapes.
#pragma once

#include <map>
#include <string>

#include "core/tensor.h"
#include "ir/constant_evaluator.h"
#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln::ir {

// Errors the model causes (incompatible broadcast, rank mismatch, axis out of range) name the
// node: "node 'conv_17' (Conv): weight rank 3, expected 4". Data-dependent output sizes (NonZero,
// Unique, ...) become unknown dims, not errors. `concrete_inputs` (by input name) overrides the
// declared shapes of graph inputs. Shapes the model declared (value_info) fill dims that
// inference leaves unknown. Subgraphs (If/Loop/Scan bodies) are inferred too. With `eval`, nodes
// whose inputs are all constants and whose outputs are small (<= 4096 elements) are evaluated and
// their outputs become constants (the builder passes kiln::reference_evaluator()); without it,
// only the shape-tensor tracking above computes values.
Status infer_shapes(Graph& g, const std::map<std::string, Shape>* concrete_inputs = nullptr,
                    const ConstantEvaluator* eval = nullptr);

// True when every op in ops.def has a shape rule (a coverage test asserts it).
bool every_op_has_shape_rule(std::string* missing = nullptr);

}  // namespace kiln::ir
