// Graph bookkeeping: ids, names, consumers, topological order.
#include "ir/graph.h"

#include <algorithm>
#include <queue>

namespace kiln::ir {

std::string sym_shape_str(const SymShape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ",";
    r += s[i].is_known() ? std::to_string(s[i].value) : (s[i].symbol.empty() ? "?" : s[i].symbol);
  }
  return r + "]";
}

int64_t Node::attr_int(const std::string& k, int64_t dflt) const {
  auto it = attrs.find(k);
  return it == attrs.end() ? dflt : it->second.i;
}
float Node::attr_float(const std::string& k, float dflt) const {
  auto it = attrs.find(k);
  if (it == attrs.end()) return dflt;
  return it->second.kind == Attribute::Kind::kInt ? static_cast<float>(it->second.i) : it->second.f;
}
std::string Node::attr_string(const std::string& k, const std::string& dflt) const {
  auto it = attrs.find(k);
  return it == attrs.end() ? dflt : it->second.s;
}
std::vector<int64_t> Node::attr_ints(const std::string& k, std::vector<int64_t> dflt) const {
  auto it = attrs.find(k);
  return it == attrs.end() ? dflt : it->second.ints;
}
std::vector<float> Node::attr_floats(const std::string& k, std::vector<float> dflt) const {
  auto it = attrs.find(k);
  return it == attrs.end() ? dflt : it->second.floats;
}
std::string Node::describe() const { return "node '" + name + "' (" + op_name(op) + ")"; }

ValueId Graph::add_value(const std::string& name, DataType dtype) {
  Value v;
  v.id = static_cast<ValueId>(values.size());
  v.name = name;
  v.dtype = dtype;
  values.push_back(std::move(v));
  if (!name.empty()) by_name_[name] = values.back().id;
  return values.back().id;
}

NodeId Graph::add_node(Node n) {
  n.id = static_cast<NodeId>(nodes.size());
  for (ValueId o : n.outputs)
    if (o != kNoValue) value(o).producer = n.id;
  if (n.origin.empty() && !n.name.empty()) n.origin.push_back(n.name);
  nodes.push_back(std::move(n));
  return nodes.back().id;
}

void Graph::rename_value(ValueId id, const std::string& name) {
  auto it = by_name_.find(value(id).name);
  if (it != by_name_.end() && it->second == id) by_name_.erase(it);
  value(id).name = name;
  if (!name.empty()) by_name_[name] = id;
}

ValueId Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? kNoValue : it->second;
}

std::vector<std::vector<NodeId>> Graph::consumers() const {
  std::vector<std::vector<NodeId>> c(values.size());
  for (const Node& n : nodes) {
    if (n.removed) continue;
    for (ValueId v : n.inputs)
      if (v != kNoValue && (c[v].empty() || c[v].back() != n.id)) c[v].push_back(n.id);
  }
  return c;
}

void Graph::compact() {
  std::vector<Node> kept;
  for (Node& n : nodes)
    if (!n.removed) kept.push_back(std::move(n));
  nodes = std::move(kept);
  for (Value& v : values) v.producer = -1;
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].id = static_cast<NodeId>(i);
    for (ValueId o : nodes[i].outputs)
      if (o != kNoValue) values[o].producer = nodes[i].id;
  }
}

Status Graph::topo_sort() {
  compact();
  const size_t n = nodes.size();
  std::vector<int> indeg(n, 0);
  std::vector<std::vector<size_t>> succ(n);
  for (size_t i = 0; i < n; ++i) {
    for (ValueId v : nodes[i].inputs) {
      if (v == kNoValue) continue;
      NodeId p = values[v].producer;
      if (p >= 0) { succ[p].push_back(i); ++indeg[i]; }
    }
  }
  // Kahn's algorithm with a min-heap on the old index keeps sorted graphs unchanged.
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i)
    if (indeg[i] == 0) ready.push(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t s : succ[i])
      if (--indeg[s] == 0) ready.push(s);
  }
  if (order.size() != n) return invalid_model("graph '" + name + "' has a cycle");
  std::vector<Node> sorted;
  sorted.reserve(n);
  for (size_t i : order) sorted.push_back(std::move(nodes[i]));
  nodes = std::move(sorted);
  compact();
  return Status::Ok();
}

}  // namespace kiln::ir
