// The IR: a graph of layers (Node) and tensors (Value), referenced by integer ids, never raw
// pointers, so passes can rewrite freely. Nodes are kept in a topological order (sorted by
// Graph::topo_sort after rewrites). Shapes are symbolic: each dim is a constant or a name.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/op_kind.h"
#include "kiln/quant_params.h"
#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln::ir {

using ValueId = int32_t;
using NodeId = int32_t;
constexpr ValueId kNoValue = -1;  // an omitted optional input/output

// One dimension: a known extent (value >= 0) or a symbol ("batch"), or unknown (value < 0,
// empty symbol).
struct Dim {
  int64_t value = -1;
  std::string symbol;
  static Dim known(int64_t v) { return Dim{v, {}}; }
  static Dim sym(std::string s) { return Dim{-1, std::move(s)}; }
  bool is_known() const { return value >= 0; }
  bool operator==(const Dim& o) const { return value == o.value && symbol == o.symbol; }
};
using SymShape = std::vector<Dim>;
std::string sym_shape_str(const SymShape& s);  // "[batch,3,224,224]", "?" for unknown dims

class Graph;

// The ONNX type of a value: a tensor (the default), a sequence of tensors, or an optional
// of either. Value::dtype is the (element) tensor dtype for every kind; Value::shape is only
// recorded for tensors.
enum class ValueKind : uint8_t { kTensor, kSequence, kOptionalTensor, kOptionalSequence };

struct Attribute {
  enum class Kind : uint8_t { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor, kGraph, kType };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  std::shared_ptr<const Tensor> t;
  std::shared_ptr<const Graph> g;
  // kType (a TypeProto, e.g. Optional's `type`): the value kind and its element dtype.
  ValueKind type_kind = ValueKind::kTensor;
  DataType type_dtype = DataType::kUndefined;

  static Attribute of_int(int64_t v) { Attribute a; a.kind = Kind::kInt; a.i = v; return a; }
  static Attribute of_float(float v) { Attribute a; a.kind = Kind::kFloat; a.f = v; return a; }
  static Attribute of_string(std::string v) { Attribute a; a.kind = Kind::kString; a.s = std::move(v); return a; }
  static Attribute of_ints(std::vector<int64_t> v) { Attribute a; a.kind = Kind::kInts; a.ints = std::move(v); return a; }
  static Attribute of_graph(std::shared_ptr<const Graph> g) { Attribute a; a.kind = Kind::kGraph; a.g = std::move(g); return a; }
};

struct Value {
  ValueId id = kNoValue;
  std::string name;
  DataType dtype = DataType::kUndefined;
  ValueKind kind = ValueKind::kTensor;
  std::optional<SymShape> shape;            // nullopt: rank unknown
  std::shared_ptr<const Tensor> constant;   // set for initializers / folded constants
  NodeId producer = -1;                     // -1: graph input, initializer or outer-scope value
  // Set when the value holds quantized elements of quant->type (ONNX Q/DQ semantics; dtype is
  // then that type). Absent for plain tensors. docs/decisions/0033-precision-as-data.md.
  std::optional<QuantParams> quant;
};

struct Node {
  NodeId id = -1;
  std::string name;    // ONNX node name (or "<op>_<index>" when the model left it empty)
  OpKind op = OpKind::kIdentity;
  int opset = 0;       // the opset version of the node's domain the model imports
  std::vector<ValueId> inputs;   // kNoValue for omitted optional inputs
  std::vector<ValueId> outputs;  // kNoValue for omitted optional outputs
  std::map<std::string, Attribute> attrs;
  // ONNX node names this layer absorbed (filled by fusion passes; the node itself first).
  std::vector<std::string> origin;
  bool removed = false;  // tombstone; Graph::compact() drops removed nodes

  bool has_attr(const std::string& k) const { return attrs.count(k) != 0; }
  int64_t attr_int(const std::string& k, int64_t dflt) const;
  float attr_float(const std::string& k, float dflt) const;
  std::string attr_string(const std::string& k, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& k, std::vector<int64_t> dflt = {}) const;
  std::vector<float> attr_floats(const std::string& k, std::vector<float> dflt = {}) const;
  // "node 'conv_17' (Conv)": the prefix of every error about this node.
  std::string describe() const;
};

class Graph {
 public:
  std::string name;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<ValueId> inputs;   // runtime inputs (initializers are not listed here)
  std::vector<ValueId> outputs;
  // Values of a subgraph (If/Loop/Scan body) that name a value of an enclosing graph.
  std::vector<ValueId> outer_refs;
  std::map<std::string, int64_t> opset_imports;  // domain ("" = ai.onnx) -> version

  ValueId add_value(const std::string& name, DataType dtype = DataType::kUndefined);
  NodeId add_node(Node node);  // assigns id, sets producers of outputs
  Value& value(ValueId id) { return values.at(static_cast<size_t>(id)); }
  const Value& value(ValueId id) const { return values.at(static_cast<size_t>(id)); }
  Node& node(NodeId id) { return nodes.at(static_cast<size_t>(id)); }
  const Node& node(NodeId id) const { return nodes.at(static_cast<size_t>(id)); }
  // Renames a value and keeps the name index in step.
  void rename_value(ValueId id, const std::string& name);
  // kNoValue if no value has that name.
  ValueId find_value(const std::string& name) const;
  // Consumers of each value (node ids), for passes.
  std::vector<std::vector<NodeId>> consumers() const;
  // Drops removed nodes and renumbers; keeps value ids stable.
  void compact();
  // Reorders nodes topologically (stable for an already sorted graph).
  Status topo_sort();

 private:
  std::map<std::string, ValueId> by_name_;
};

}  // namespace kiln::ir
