// Runs one CPU reference kernel outside any graph, for the kernel tests in tests/ops/.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernel.h"

namespace kiln::cpu::testing {

struct OpRun {
  Status status;
  std::vector<Tensor> outputs;
};

// Runs the kernel of `op` on `inputs` (nullptr = omitted) with `attrs`, producing `n_out`
// outputs; the node is named "test_node" (errors name it).
inline OpRun run_op(ir::OpKind op, int opset, const std::vector<const Tensor*>& inputs,
                    std::map<std::string, ir::Attribute> attrs = {}, int n_out = 1) {
  ir::Node node;
  node.name = "test_node";
  node.op = op;
  node.opset = opset;
  node.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i) node.inputs.push_back(inputs[i] ? static_cast<ir::ValueId>(i) : ir::kNoValue);
  for (int i = 0; i < n_out; ++i) node.outputs.push_back(static_cast<ir::ValueId>(100 + i));
  OpRun r;
  r.outputs.resize(n_out);
  KernelContext ctx(node, inputs, &r.outputs, nullptr);
  KernelFn fn = KernelRegistry::get().find(op);
  r.status = fn ? fn(ctx) : unsupported("no kernel");
  return r;
}

// A tensor of dtype `dt` whose storage elements (of C++ type T) are `values`, in order.
template <typename T>
Tensor make(DataType dt, const Shape& shape, const std::vector<T>& values) {
  Tensor t(dt, shape);
  for (size_t i = 0; i < values.size(); ++i) t.data<T>()[i] = values[i];
  return t;
}

}  // namespace kiln::cpu::testing
