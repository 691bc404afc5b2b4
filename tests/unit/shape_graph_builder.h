// A small ir::Graph builder for the shape-inference tests: inputs with symbolic shapes, int64 /
// float constants, nodes of one opset, and the inferred shape of a value as text.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/shape_inference.h"

namespace kiln::ir::testing {

inline Dim K(int64_t v) { return Dim::known(v); }
inline Dim S(const char* s) { return Dim::sym(s); }

class GraphBuilder {
 public:
  explicit GraphBuilder(int opset = 17) : opset_(opset) { g.opset_imports[""] = opset; }

  ValueId input(const std::string& name, SymShape shape, DataType dt = DataType::kFloat32) {
    ValueId v = g.add_value(name, dt);
    g.value(v).shape = std::move(shape);
    g.inputs.push_back(v);
    return v;
  }
  ValueId ints(const std::string& name, std::vector<int64_t> vals, bool scalar = false) {
    Tensor t(DataType::kInt64, scalar ? Shape{} : Shape{static_cast<int64_t>(vals.size())});
    for (size_t i = 0; i < vals.size(); ++i) t.data<int64_t>()[i] = vals[i];
    ValueId v = g.add_value(name, DataType::kInt64);
    g.value(v).constant = std::make_shared<Tensor>(t);
    return v;
  }
  ValueId floats(const std::string& name, Shape shape) { return constant(name, Tensor(DataType::kFloat32, shape)); }
  ValueId constant(const std::string& name, Tensor t) {
    ValueId v = g.add_value(name, t.dtype());
    g.value(v).constant = std::make_shared<Tensor>(std::move(t));
    return v;
  }
  std::vector<ValueId> node(OpKind op, const std::string& name, std::vector<ValueId> in,
                            std::map<std::string, Attribute> attrs = {}, int n_out = 1, int opset = 0) {
    Node n;
    n.name = name;
    n.op = op;
    n.opset = opset ? opset : opset_;
    n.inputs = std::move(in);
    n.attrs = std::move(attrs);
    for (int k = 0; k < n_out; ++k) n.outputs.push_back(g.add_value(name + "_out" + std::to_string(k)));
    std::vector<ValueId> outs = n.outputs;
    g.add_node(std::move(n));
    return outs;
  }
  ValueId op(OpKind o, const std::string& name, std::vector<ValueId> in, std::map<std::string, Attribute> attrs = {},
             int opset = 0) {
    return node(o, name, std::move(in), std::move(attrs), 1, opset)[0];
  }
  std::string shape(ValueId v) const {
    const auto& s = g.value(v).shape;
    return s ? sym_shape_str(*s) : "norank";
  }

  Graph g;

 private:
  int opset_;
};

}  // namespace kiln::ir::testing
