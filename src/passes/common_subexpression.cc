// Common-subexpression elimination: Kiln's ops are pure (but those ir::op_writes_memory names,
// left alone), so two layers with the same op, opset, attributes and inputs compute the same value.
//   y1 = f{attrs}(x1..xn), y2 = f{attrs}(x1..xn)  ->  y2 := y1   (the later layer goes)
// Constant inputs count as equal when their dtype, shape and bytes are. Layers with subgraphs
// and outputs a subgraph reads by name are left alone. (ops.def has no random ops; one added
// there must be excluded here.)
#include <cstring>
#include <map>

#include "passes/passes.h"

namespace kiln::passes {

namespace {

constexpr size_t kMaxComparedBytes = 4096;  // bytes; larger constants are equal only to themselves

void append_bytes(std::string* key, const void* p, size_t n) { key->append(static_cast<const char*>(p), n); }

template <typename T>
void append_pod(std::string* key, const T& v) {
  append_bytes(key, &v, sizeof v);
}

void append_tensor(std::string* key, const Tensor& t) {
  append_pod(key, t.dtype());
  append_pod(key, t.rank());
  for (int64_t d : t.shape()) append_pod(key, d);
  append_bytes(key, t.raw(), t.nbytes());
}

// A byte string equal for two nodes exactly when they compute the same thing; false for nodes
// that must not be merged.
bool node_key(const ir::Node& n, const std::vector<ir::ValueId>& canonical, std::string* key) {
  if (ir::op_writes_memory(n.op)) return false;  // two appends to the KV pool are two writes
  append_pod(key, n.op);
  append_pod(key, n.opset);
  append_pod(key, n.inputs.size());
  for (ir::ValueId v : n.inputs) append_pod(key, v == ir::kNoValue ? v : canonical[v]);
  // Which optional outputs exist matters: a node cannot stand in for an output it lacks.
  append_pod(key, n.outputs.size());
  for (ir::ValueId v : n.outputs) key->push_back(v == ir::kNoValue ? '0' : '1');
  for (const auto& [name, a] : n.attrs) {
    if (a.kind == ir::Attribute::Kind::kGraph) return false;
    key->append(name);
    key->push_back('\0');
    append_pod(key, a.kind);
    switch (a.kind) {
      case ir::Attribute::Kind::kInt: append_pod(key, a.i); break;
      case ir::Attribute::Kind::kFloat: append_pod(key, a.f); break;
      case ir::Attribute::Kind::kString: append_pod(key, a.s.size()); key->append(a.s); break;
      case ir::Attribute::Kind::kInts:
        append_pod(key, a.ints.size());
        append_bytes(key, a.ints.data(), a.ints.size() * sizeof(int64_t));
        break;
      case ir::Attribute::Kind::kFloats:
        append_pod(key, a.floats.size());
        append_bytes(key, a.floats.data(), a.floats.size() * sizeof(float));
        break;
      case ir::Attribute::Kind::kStrings:
        append_pod(key, a.strings.size());
        for (const auto& s : a.strings) {
          append_pod(key, s.size());
          key->append(s);
        }
        break;
      case ir::Attribute::Kind::kTensor:
        if (!a.t) return false;
        append_tensor(key, *a.t);
        break;
      case ir::Attribute::Kind::kType:
        append_pod(key, a.type_kind);
        append_pod(key, a.type_dtype);
        break;
      case ir::Attribute::Kind::kGraph: return false;
    }
  }
  return true;
}

}  // namespace

Status common_subexpression(ir::Graph& g, const PassOptions&) {
  const std::set<std::string> pinned = subgraph_reads(g);
  // Equal constants map to the first of them, so layers reading copies of one constant match.
  std::vector<ir::ValueId> canonical(g.values.size());
  std::map<std::string, ir::ValueId> constants;
  for (const ir::Value& v : g.values) {
    canonical[v.id] = v.id;
    // Large weights are rarely duplicated and hashing them costs build time: they keep their id.
    if (!v.constant || v.kind != ir::ValueKind::kTensor || v.constant->nbytes() > kMaxComparedBytes) continue;
    std::string key;
    append_tensor(&key, *v.constant);
    canonical[v.id] = constants.emplace(std::move(key), v.id).first->second;
  }
  std::map<std::string, ir::NodeId> seen;
  // Nodes are in topological order, so an earlier twin's inputs are already rewired.
  for (auto& n : g.nodes) {
    if (n.removed) continue;
    std::string key;
    if (!node_key(n, canonical, &key)) continue;
    auto [it, inserted] = seen.emplace(std::move(key), n.id);
    if (inserted) continue;
    const ir::Node& first = g.node(it->second);
    bool pinned_output = false;
    for (ir::ValueId o : n.outputs) pinned_output |= o != ir::kNoValue && pinned.count(g.value(o).name) > 0;
    // The twin's output may be renamed (to take over a graph output's name).
    for (ir::ValueId o : first.outputs) pinned_output |= o != ir::kNoValue && pinned.count(g.value(o).name) > 0;
    if (pinned_output) continue;
    bool all_replaced = true;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k] == ir::kNoValue) continue;
      all_replaced &= replace_all_uses(g, n.outputs[k], first.outputs[k]);
    }
    // An output that is itself a graph output beside its twin keeps the layer (both are outputs).
    if (all_replaced) {
      n.removed = true;
    }
  }
  return Status::Ok();
}

}  // namespace kiln::passes
