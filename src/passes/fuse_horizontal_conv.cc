// Horizontal fusion of sibling convolutions (TensorRT's "horizontal layer fusion"; the 1x1
// reductions of GoogLeNet/Inception branches):
//   {y_i = act(Conv(x, W_i, b_i))}_{i=1..n}
//     ->  [y_1..y_n] = Split(act(Conv(x, W, b)), axis=1, split=[K_1..K_n]),
//         W = concat_0(W_1..W_n) ([sum K_i, C, kh, kw]), b = concat_0(b_1..b_n) (0 where absent)
//   and, when one Concat(axis=1) is the only reader of every y_i and reads exactly them:
//     Concat(y_1..y_n) -> act(Conv(x, W, b)) with the branches ordered as the Concat reads them.
// Conditions: same input x, group 1, equal strides/pads/dilations/auto_pad and kernel shape, the
// same activation (Conv = none) and no residual input; W and b constant float32. Output
// channel k of the fused conv is output channel k - sum_{j<i} K_j of branch i: each output
// channel only reads its own filter and bias (ONNX Conv), so the rewrite is exact.
#include <algorithm>
#include <cstring>
#include <map>

#include "passes/passes.h"

namespace kiln::passes {

namespace {

// Everything two convs must share to become one (besides the input value).
struct ConvSignature {
  std::vector<int64_t> w_tail;  // W dims after K: C/group and the kernel extent
  std::vector<int64_t> strides, pads, dilations;
  std::string auto_pad, activation;
  float act_alpha = 0, act_beta = 0;
  bool operator==(const ConvSignature& o) const {
    return w_tail == o.w_tail && strides == o.strides && pads == o.pads && dilations == o.dilations &&
           auto_pad == o.auto_pad && activation == o.activation && act_alpha == o.act_alpha && act_beta == o.act_beta;
  }
};

// The signature of a fusable conv, or false (grouped, residual, non-constant or non-f32 weights).
bool signature_of(const ir::Graph& g, const ir::Node& n, ConvSignature* sig) {
  if (n.removed || (n.op != ir::OpKind::kConv && n.op != ir::OpKind::kFusedConv)) return false;
  if (n.inputs.size() < 2 || n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue) return false;
  if (n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue) return false;  // residual
  if (n.attr_int("group", 1) != 1) return false;
  const Tensor* w = const_f32(g, n.inputs[1]);
  if (!w || w->rank() < 3 || w->dim(0) <= 0) return false;
  if (n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue) {
    const Tensor* b = const_f32(g, n.inputs[2]);
    if (!b || b->rank() != 1 || b->dim(0) != w->dim(0)) return false;
  }
  const size_t nd = static_cast<size_t>(w->rank() - 2);
  sig->w_tail.assign(w->shape().begin() + 1, w->shape().end());
  if (n.has_attr("kernel_shape") && n.attr_ints("kernel_shape") != std::vector<int64_t>(w->shape().begin() + 2, w->shape().end()))
    return false;
  sig->strides = n.attr_ints("strides", std::vector<int64_t>(nd, 1));
  sig->pads = n.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  sig->dilations = n.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  sig->auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (sig->auto_pad == "VALID") {  // VALID is explicit zero padding
    sig->auto_pad = "NOTSET";
    sig->pads.assign(2 * nd, 0);
  }
  const bool fused = n.op == ir::OpKind::kFusedConv;
  sig->activation = fused ? n.attr_string("activation", "") : "";
  sig->act_alpha = fused && !sig->activation.empty() ? n.attr_float("act_alpha", 0) : 0;
  sig->act_beta = fused && !sig->activation.empty() ? n.attr_float("act_beta", 0) : 0;
  return true;
}

ir::ValueId add_constant(ir::Graph& g, const std::string& name, Tensor t) {
  const ir::ValueId v = g.add_value(name, t.dtype());
  ir::SymShape s;
  for (int64_t d : t.shape()) s.push_back(ir::Dim::known(d));
  g.value(v).shape = s;
  g.value(v).constant = std::make_shared<const Tensor>(std::move(t));
  return v;
}

// If one live Concat on axis 1 reads exactly the branch outputs (each once, and nothing else
// reads them), returns it and reorders `group` to its input order; else nullptr.
ir::Node* sole_concat(ir::Graph& g, const std::vector<std::vector<ir::NodeId>>& consumers,
                      const std::set<std::string>& reads, std::vector<ir::Node*>* group) {
  ir::Node* concat = nullptr;
  for (ir::Node* n : *group) {
    const ir::ValueId y = n->outputs[0];
    if (consumers[y].size() != 1 || std::count(g.outputs.begin(), g.outputs.end(), y) || reads.count(g.value(y).name))
      return nullptr;
    ir::Node& c = g.node(consumers[y][0]);
    if (c.removed || c.op != ir::OpKind::kConcat || (concat && concat != &c)) return nullptr;
    concat = &c;
  }
  if (!concat || concat->inputs.size() != group->size() || concat->outputs.size() != 1) return nullptr;
  if (reads.count(g.value(concat->outputs[0]).name)) return nullptr;  // subgraphs read it by name
  const int64_t rank = const_f32(g, group->front()->inputs[1])->rank();  // Conv keeps X's rank
  int64_t axis = concat->attr_int("axis", 1);
  if (axis < 0) axis += rank;
  if (axis != 1) return nullptr;
  std::vector<ir::Node*> ordered;
  for (ir::ValueId v : concat->inputs) {
    auto it = std::find_if(group->begin(), group->end(), [&](ir::Node* n) { return n->outputs[0] == v; });
    if (it == group->end() || std::count(ordered.begin(), ordered.end(), *it)) return nullptr;
    ordered.push_back(*it);
  }
  *group = std::move(ordered);
  return concat;
}

// Fuses `group` (>= 2 convs with one signature, reading the same x) into one conv.
void fuse_group(ir::Graph& g, const std::vector<std::vector<ir::NodeId>>& consumers, const std::set<std::string>& reads,
                std::vector<ir::Node*> group) {
  // g.add_node below may move the nodes: keep ids and copies, not pointers, past it.
  const ir::Node* concat_node = sole_concat(g, consumers, reads, &group);
  const ir::NodeId concat = concat_node ? concat_node->id : -1;
  const ir::Node first = *group.front();
  // Weights [sum K, ...] and bias [sum K]: row-major, so concatenating along dim 0 appends bytes.
  int64_t total_k = 0;
  bool any_bias = false;
  std::vector<int64_t> ks;
  for (ir::Node* n : group) {
    ks.push_back(const_f32(g, n->inputs[1])->dim(0));
    total_k += ks.back();
    any_bias |= n->inputs.size() > 2 && n->inputs[2] != ir::kNoValue;
  }
  Shape w_shape = const_f32(g, first.inputs[1])->shape();
  w_shape[0] = total_k;
  Tensor w(DataType::kFloat32, w_shape);
  Tensor b(DataType::kFloat32, {total_k});  // zero-filled: branches without a bias add 0
  int64_t w_off = 0, b_off = 0;
  for (ir::Node* n : group) {
    const Tensor* wi = const_f32(g, n->inputs[1]);
    std::memcpy(w.data<float>() + w_off, wi->data<float>(), wi->nbytes());
    w_off += wi->numel();
    if (n->inputs.size() > 2 && n->inputs[2] != ir::kNoValue) {
      const Tensor* bi = const_f32(g, n->inputs[2]);
      std::memcpy(b.data<float>() + b_off, bi->data<float>(), bi->nbytes());
    }
    b_off += wi->dim(0);
  }
  const std::string name = first.name + "_hfused";
  // Geometry from the first branch (all agree); a FusedConv member brings the activation.
  ir::Node conv = first;
  for (ir::Node* n : group)
    if (n->op == ir::OpKind::kFusedConv) conv = *n;
  conv.id = -1;
  conv.name = name;
  conv.opset = first.opset;
  conv.attrs.erase("kernel_shape");
  conv.inputs = {first.inputs[0], add_constant(g, name + "_W", std::move(w))};
  if (any_bias) conv.inputs.push_back(add_constant(g, name + "_B", std::move(b)));
  conv.origin.clear();
  for (ir::Node* n : group) conv.origin.insert(conv.origin.end(), n->origin.begin(), n->origin.end());
  const ir::ValueId y = g.add_value(name + "_out", DataType::kFloat32);
  if (const auto& s = g.value(first.outputs[0]).shape) {
    ir::SymShape ys = *s;
    if (ys.size() > 1) ys[1] = ir::Dim::known(total_k);
    g.value(y).shape = ys;
  }
  conv.outputs = {y};
  std::vector<ir::ValueId> branch_outputs;
  for (ir::Node* n : group) {
    branch_outputs.push_back(n->outputs[0]);
    n->removed = true;
  }
  // The branches' own W and b now live in the fused constants: drop those nobody else reads, or
  // the plan would store them twice.
  for (ir::Node* n : group)
    for (size_t k = 1; k < n->inputs.size() && k < 3; ++k) {
      const ir::ValueId v = n->inputs[k];
      if (v == ir::kNoValue || std::count(g.outputs.begin(), g.outputs.end(), v) || reads.count(g.value(v).name))
        continue;
      const bool unread = std::all_of(consumers[v].begin(), consumers[v].end(),
                                      [&](ir::NodeId c) { return g.node(c).removed; });
      if (unread) g.value(v).constant.reset();
    }
  g.add_node(std::move(conv));
  if (concat >= 0 && replace_all_uses(g, g.node(concat).outputs[0], y)) {
    g.node(concat).removed = true;
    return;
  }
  // Split the channels back out; its outputs keep the branches' value ids, names and readers.
  ir::Node split;
  split.name = name + "_split";
  split.op = ir::OpKind::kSplit;
  split.opset = first.opset;
  auto it = g.opset_imports.find("");
  if (it != g.opset_imports.end()) split.opset = static_cast<int>(it->second);
  split.attrs["axis"] = ir::Attribute::of_int(1);
  split.inputs = {y};
  if (split.opset >= 13) {
    Tensor sizes(DataType::kInt64, {static_cast<int64_t>(ks.size())});
    std::copy(ks.begin(), ks.end(), sizes.data<int64_t>());
    split.inputs.push_back(add_constant(g, name + "_split_sizes", std::move(sizes)));
  } else {
    split.attrs["split"] = ir::Attribute::of_ints(ks);
  }
  split.outputs = branch_outputs;
  g.add_node(std::move(split));
}

}  // namespace

Status fuse_horizontal_conv(ir::Graph& g, const PassOptions&) {
  const auto reads = subgraph_reads(g);
  const auto consumers = g.consumers();
  // Candidates by input value, in node order; each input's candidates split into signature classes.
  std::map<ir::ValueId, std::vector<std::pair<ConvSignature, ir::NodeId>>> by_input;
  for (const ir::Node& n : g.nodes) {
    ConvSignature sig;
    if (signature_of(g, n, &sig)) by_input[n.inputs[0]].emplace_back(std::move(sig), n.id);
  }
  for (auto& [x, cands] : by_input) {
    std::vector<bool> used(cands.size(), false);
    for (size_t i = 0; i < cands.size(); ++i) {
      if (used[i]) continue;
      std::vector<ir::Node*> group = {&g.node(cands[i].second)};
      for (size_t j = i + 1; j < cands.size(); ++j)
        if (!used[j] && cands[j].first == cands[i].first) {
          used[j] = true;
          group.push_back(&g.node(cands[j].second));
        }
      // fuse_group appends nodes, which may reallocate g.nodes: keep ids, not pointers, across groups.
      if (group.size() >= 2) fuse_group(g, consumers, reads, std::move(group));
    }
  }
  return Status::Ok();
}

}  // namespace kiln::passes
