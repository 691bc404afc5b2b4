// The exporters' head transposes folded into the Attention layer (docs/decisions/0065):
//   Y = Transpose(Attention(Transpose(Q', p), Transpose(K', p), Transpose(V', p)[, M]), p),
//   p = [0, 2, 1, 3]
//     -> Y = Attention{head_layout = "bshd"}(Q', K', V'[, M])
// Q' [B, Sq, Hq, D], K' [B, Sk, Hkv, D], V' [B, Sk, Hkv, Dv] are the Reshapes of the projections
// ([B, S, H*D] -> [B, S, H, D]) and Y [B, Sq, Hq, Dv] the tensor the output Reshape merges back:
// the kernels read and write that layout through strides, so the four copies disappear (ops.def
// Attention; the mask keeps indexing [B, Hq, Sq, Sk]). Only where every piece matches: a rank-4
// Attention in today's layout, its output read only by one such Transpose (not a graph output),
// and each of Q, K, V either the single-use output of a Transpose with that perm or — rotary
// embeddings (RoPE, Su et al. 2021, "RoFormer", eq. 34: x·cos + rotate_half(x)·sin, as Llama and
// Qwen2 apply it after the transpose) — a region of layers between such a Transpose and the
// Attention that commutes with swapping axes 1 and 2: Mul / Add / Sub / Div / Neg, Slice and
// Concat on the last axis, whose other operands are of rank 4 (given the swap: a constant
// transposed into a new constant, anything else through a new Transpose, one per value) or of
// rank <= 1; and Rope (ops.def) with head_axis 1 or 2, which becomes 2 or 1 (its positions
// [B, S] index both forms alike).
// Every value inside the region is read only inside it (the last one only by the Attention), so
// the region then computes the same numbers in [B, S, H, D]. Anything else (K^T through
// something fuse_attention re-permuted into another perm, ...) keeps today's form.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "core/numerics.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln::passes {

namespace {

namespace pt = pattern;
using ir::OpKind;

const std::vector<int64_t> kSwapHeadsSeq = {0, 2, 1, 3};

// The live Transpose of perm [0, 2, 1, 3] of a rank-4 value producing v; else nullptr.
ir::Node* head_transpose(ir::Graph& g, ir::ValueId v) {
  ir::Node* t = pt::producer(g, v, OpKind::kTranspose);
  if (!t || t->inputs.size() != 1 || t->attr_ints("perm") != kSwapHeadsSeq || pt::rank_of(g, t->inputs[0]) != 4)
    return nullptr;
  return t;
}

// Whether the constant int tensor v holds only the last axis of a rank-4 tensor (3 or -1).
bool last_axis_only(const ir::Graph& g, ir::ValueId v) {
  if (v == ir::kNoValue) return false;
  const auto& t = g.value(v).constant;
  if (!t || (t->dtype() != DataType::kInt64 && t->dtype() != DataType::kInt32) || t->numel() == 0) return false;
  for (double a : tensor_to_doubles(*t))
    if (a != 3 && a != -1) return false;
  return true;
}

// One operand of Q, K or V in [B, H, S, D] that becomes [B, S, H, D]: the Transpose it comes
// from and the layers between (the region; empty for a plain Transpose).
struct Operand {
  ir::Node* transpose = nullptr;
  std::vector<ir::Node*> region;  // topological order
};

bool region_op(OpKind op) {
  return op == OpKind::kMul || op == OpKind::kAdd || op == OpKind::kSub || op == OpKind::kDiv || op == OpKind::kNeg ||
         op == OpKind::kSlice || op == OpKind::kConcat || op == OpKind::kRope;
}

// Whether region layer n commutes with swapping axes 1 and 2 of its rank-4 values, given which
// of its inputs come from the region (`inside`); the other rank-4 inputs get the swap too.
bool commutes(const ir::Graph& g, const ir::Node& n, const std::set<ir::ValueId>& inside) {
  if (n.outputs.size() != 1 || pt::rank_of(g, n.outputs[0]) != 4) return false;
  switch (n.op) {
    case OpKind::kMul: case OpKind::kAdd: case OpKind::kSub: case OpKind::kDiv:
      if (n.inputs.size() != 2) return false;
      for (ir::ValueId x : n.inputs) {
        // rank <= 1 broadcasts over the last axis alone and rank 4 is given the swap; rank 2 or
        // 3 would broadcast against other axes after it.
        const int r = pt::rank_of(g, x);
        if (r < 0 || r == 2 || r == 3) return false;
      }
      return true;
    case OpKind::kNeg:
      return n.inputs.size() == 1 && inside.count(n.inputs[0]);
    case OpKind::kSlice:
      if (n.opset < 10 || n.inputs.size() < 4 || !inside.count(n.inputs[0]) || !last_axis_only(g, n.inputs[3])) return false;
      for (size_t k = 1; k < n.inputs.size(); ++k)
        if (n.inputs[k] != ir::kNoValue && !g.value(n.inputs[k]).constant) return false;
      return true;
    case OpKind::kRope: {  // X rotates; positions and the tables are not rank 4 (never swapped)
      const int64_t axis = n.attr_int("head_axis", 1);
      if (n.inputs.size() < 3 || !inside.count(n.inputs[0]) || (axis != 1 && axis != 2)) return false;
      for (size_t k = 1; k < n.inputs.size(); ++k)
        if (inside.count(n.inputs[k]) || pt::rank_of(g, n.inputs[k]) == 4) return false;
      return true;
    }
    case OpKind::kConcat: {
      const int64_t axis = n.attr_int("axis", 0);
      if (axis != 3 && axis != -1) return false;
      for (ir::ValueId x : n.inputs)
        if (pt::rank_of(g, x) != 4) return false;
      return true;
    }
    default:
      return false;
  }
}

// v (read by the Attention alone) as an Operand; false when it is neither form. The region is
// every layer on a path from a head Transpose to v: reached forward from the Transpose through
// region ops and backward from v; its layers' other inputs are outside operands.
bool match_operand(ir::Graph& g, const pt::Consumers& c, ir::ValueId v, Operand* out) {
  if (!pt::single_use(g, c, v)) return false;
  if (ir::Node* t = head_transpose(g, v)) {
    out->transpose = t;
    return true;
  }
  // Backward from v through region ops: the candidate layers and the head Transposes they reach.
  std::set<ir::NodeId> back;
  std::vector<ir::NodeId> stack = {g.value(v).producer};
  ir::Node* root = nullptr;
  while (!stack.empty()) {
    const ir::NodeId id = stack.back();
    stack.pop_back();
    if (id < 0 || back.count(id)) continue;
    ir::Node& n = g.node(id);
    if (n.removed) continue;
    if (head_transpose(g, n.outputs.empty() ? ir::kNoValue : n.outputs[0]) == &n) {
      if (root && root != &n) return false;  // two head Transposes: not one operand's rotation
      root = &n;
      continue;
    }
    if (!region_op(n.op)) continue;  // an outside operand's producer
    back.insert(id);
    for (ir::ValueId x : n.inputs)
      if (x != ir::kNoValue && pt::rank_of(g, x) == 4) stack.push_back(g.value(x).producer);
  }
  if (!root || back.empty()) return false;
  // Forward from the root through those layers: the region (on a path root -> v).
  std::set<ir::NodeId> region;
  std::set<ir::ValueId> inside = {root->outputs[0]};
  for (const ir::Node& n : g.nodes) {  // topological order
    if (n.removed || !back.count(n.id)) continue;
    bool reached = false;
    for (ir::ValueId x : n.inputs) reached |= inside.count(x) > 0;
    if (!reached) continue;
    region.insert(n.id);
    inside.insert(n.outputs[0]);
  }
  if (!inside.count(v)) return false;
  for (ir::NodeId id : region)
    if (!commutes(g, g.node(id), inside)) return false;
  // Closed: the root's output and every region value but v are read inside the region only, and
  // none is a graph output.
  for (ir::ValueId x : inside) {
    if (x == v) continue;
    if (std::count(g.outputs.begin(), g.outputs.end(), x)) return false;
    for (ir::NodeId r : c[static_cast<size_t>(x)])
      if (!region.count(r)) return false;
  }
  out->transpose = root;
  for (const ir::Node& n : g.nodes)
    if (region.count(n.id)) out->region.push_back(&g.node(n.id));
  return true;
}

// The [B, S, H, D] form of an outside rank-4 operand of a region: a constant transposed on the
// host into a new constant value, anything else (cos / sin computed at run time under a dynamic
// profile) through a new Transpose layer — a [B, 1, S, D] copy, once per value for every layer
// that reads it (`made`).
ir::ValueId swapped_operand(ir::Graph& g, ir::ValueId x, std::map<ir::ValueId, ir::ValueId>* made) {
  if (auto it = made->find(x); it != made->end()) return it->second;
  std::string name = g.value(x).name + "_bshd";
  while (g.find_value(name) != ir::kNoValue) name += "_";
  const ir::ValueId y = g.add_value(name, g.value(x).dtype);
  ir::SymShape s = *g.value(x).shape;
  std::swap(s[1], s[2]);
  g.value(y).shape = s;
  const auto& k = g.value(x).constant;
  const size_t eb = k && k->numel() > 0 ? k->nbytes() / static_cast<size_t>(k->numel()) : 0;
  if (k && eb > 0 && k->nbytes() == eb * static_cast<size_t>(k->numel())) {  // (not a sub-byte type)
    const Shape& in = k->shape();
    Tensor t(k->dtype(), {in[0], in[2], in[1], in[3]});
    const auto* src = static_cast<const uint8_t*>(k->raw());
    auto* dst = static_cast<uint8_t*>(t.raw());
    for (int64_t a = 0; a < in[0]; ++a)
      for (int64_t b = 0; b < in[2]; ++b)
        for (int64_t h = 0; h < in[1]; ++h)
          std::memcpy(dst + (((a * in[2] + b) * in[1] + h) * in[3]) * eb, src + (((a * in[1] + h) * in[2] + b) * in[3]) * eb,
                      static_cast<size_t>(in[3]) * eb);
    g.value(y).constant = std::make_shared<Tensor>(std::move(t));
  } else {
    ir::Node t;
    t.name = name + "_transpose";
    t.op = OpKind::kTranspose;
    t.opset = g.opset_imports.count("") ? static_cast<int>(g.opset_imports.at("")) : 13;
    t.inputs = {x};
    t.outputs = {y};
    t.attrs["perm"] = ir::Attribute::of_ints(kSwapHeadsSeq);
    g.add_node(std::move(t));
  }
  (*made)[x] = y;
  return y;
}

bool try_fold(ir::Graph& g, const pt::Consumers& c, ir::Node& att, std::map<ir::ValueId, ir::ValueId>* made) {
  if (att.inputs.size() < 3 || att.outputs.size() != 1 || att.attr_string("head_layout", "bhsd") != "bhsd") return false;
  const ir::ValueId y = att.outputs[0];
  if (pt::rank_of(g, y) != 4) return false;
  ir::Node* out = pt::sole_consumer(g, c, y, OpKind::kTranspose);
  if (!out || out->outputs.size() != 1 || out->attr_ints("perm") != kSwapHeadsSeq) return false;
  Operand in[3];
  for (int i = 0; i < 3; ++i)  // (two inputs that are one value read it twice: not single-use)
    if (!match_operand(g, c, att.inputs[static_cast<size_t>(i)], &in[i])) return false;
  // The ids of the matched layers: g.nodes may grow (new Transposes of outside operands).
  std::vector<ir::NodeId> absorbed = {out->id};
  for (int i = 0; i < 3; ++i) {
    absorbed.push_back(in[i].transpose->id);
    const ir::ValueId t = in[i].transpose->outputs[0], x = in[i].transpose->inputs[0];
    if (in[i].region.empty()) {
      att.inputs[static_cast<size_t>(i)] = x;
      continue;
    }
    std::vector<ir::NodeId> region;
    for (ir::Node* n : in[i].region) region.push_back(n->id);
    for (ir::NodeId id : region) {
      for (size_t k = 0; k < g.node(id).inputs.size(); ++k) {
        const ir::ValueId v = g.node(id).inputs[k];
        if (v == t) {
          g.node(id).inputs[k] = x;
        } else if (v != ir::kNoValue && pt::rank_of(g, v) == 4 && g.node(id).op != OpKind::kSlice) {
          const ir::NodeId p = g.value(v).producer;  // an outside operand: given the swap
          if (p < 0 || !std::count(region.begin(), region.end(), p)) g.node(id).inputs[k] = swapped_operand(g, v, made);
        }
      }
      if (g.node(id).op == OpKind::kRope)
        g.node(id).attrs["head_axis"] = ir::Attribute::of_int(3 - g.node(id).attr_int("head_axis", 1));
      auto& s = g.value(g.node(id).outputs[0]).shape;
      std::swap((*s)[1], (*s)[2]);
    }
  }
  ir::Node& a = g.node(att.id);
  const ir::ValueId y2 = g.node(absorbed[0]).outputs[0];
  a.outputs = {y2};
  g.value(y2).producer = a.id;
  a.attrs["head_layout"] = ir::Attribute::of_string("bshd");
  std::vector<ir::Node*> nodes;
  for (ir::NodeId id : absorbed) nodes.push_back(&g.node(id));
  pt::absorb(a, nodes);
  return true;
}

}  // namespace

Status fold_attention_transposes(ir::Graph& g, const PassOptions&) {
  // Readers that reach no output do not count against the single-use checks: with a dynamic
  // profile the dynamo exporter reads Shape(K) for the K^T arithmetic fuse_attention made dead.
  remove_dead_nodes(g);
  auto consumers = g.consumers();
  // A fold adds at most one layer per value (a Transpose of an outside operand): reserving keeps
  // the Node references of a match valid.
  g.nodes.reserve(g.nodes.size() + g.values.size());
  std::map<ir::ValueId, ir::ValueId> made;  // outside operands of RoPE regions, given the swap once
  const size_t n = g.nodes.size();  // layers a fold adds (Transposes of outside operands) are not anchors
  for (size_t i = 0; i < n; ++i)
    if (!g.nodes[i].removed && g.nodes[i].op == OpKind::kAttention && try_fold(g, consumers, g.nodes[i], &made))
      consumers = g.consumers();
  return Status::Ok();
}

}  // namespace kiln::passes
