// Horizontal GEMM fusion: parallel projections of one input (a transformer's Q/K/V) become one
// wider GEMM whose output is split back:
//   y_i = op(X, W_i [K, N_i], b_i [N_i]),  i = 1..n, n >= 2, op in {MatMul, MatMulBias, Gemm}
//     -> Y = op(X, [W_1 | ... | W_n], [b_1 | ... | b_n]);  y_1..y_n = Split(Y, axis=-1, [N_1..N_n])
// One GEMM of width sum(N_i) reads X once and fills the machine better than n narrow ones. All
// members share X, the op, a float32 dtype and K; Gemm members have alpha = beta = 1, transA = 0
// and either transB (concatenation is along N of the [K, N] view). On the CPU reference the Split
// copies its outputs; a backend may instead hand out views of Y (a layout decision for that
// backend's lowering, not the plan's). Conv branches are fuse_horizontal_conv's business.
// 8-bit linear layers (QuantLinear, docs/decisions/0055) group the same way when they also share
// x_scale, x_zero_point, the weight's 8-bit type, the activation and whether they have a bias:
//   W = [W_1; ...; W_n] ([sum N_i, K], rows concatenated, codes unchanged), w_scale and bias
//   concatenated — each output channel keeps its own scale, so the fused layer computes exactly
//   the members' values (X is quantized once instead of n times).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "core/parallel.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln::passes {

namespace {

struct Member {
  ir::Node* node;
  Tensor w;  // [K, N_i] (transposed when the Gemm had transB = 1)
  Tensor b;  // [N_i] or undefined (MatMul)
};

// Member description of n reading x, or false when n is not a fusable projection.
bool as_member(const ir::Graph& g, ir::Node& n, ir::ValueId x, Member* m) {
  if (n.removed || n.inputs.size() < 2 || n.inputs[0] != x || n.outputs.size() != 1) return false;
  const Tensor* w = const_f32(g, n.inputs[1]);
  if (!w || w->rank() != 2 || n.inputs[1] == x) return false;
  const Tensor* b = n.inputs.size() > 2 ? const_f32(g, n.inputs[2]) : nullptr;
  switch (n.op) {
    case ir::OpKind::kMatMul:
      if (n.inputs.size() != 2) return false;
      m->w = *w;
      return true;
    case ir::OpKind::kMatMulBias:
      if (!b || b->numel() != w->dim(1)) return false;
      m->w = *w;
      m->b = b->reshaped({b->numel()});
      return true;
    case ir::OpKind::kGemm: {
      if (n.attr_int("transA", 0) != 0 || n.attr_float("alpha", 1.f) != 1.f || n.attr_float("beta", 1.f) != 1.f)
        return false;
      const bool tb = n.attr_int("transB", 0) != 0;
      const int64_t nn = w->dim(tb ? 0 : 1), k = w->dim(tb ? 1 : 0);
      if (!b || b->numel() != nn) return false;  // a broadcast [1] bias would need expanding: rare
      if (tb) {
        Tensor t(DataType::kFloat32, {k, nn});
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < nn; ++j) t.data<float>()[i * nn + j] = w->data<float>()[j * k + i];
        m->w = std::move(t);
      } else {
        m->w = *w;
      }
      m->b = b->reshaped({nn});
      return true;
    }
    default:
      return false;
  }
}

// Fuses one group (same op, same input) in place: the first member becomes the wide GEMM.
void fuse_group(ir::Graph& g, std::vector<Member>& group) {
  const int64_t k = group[0].w.dim(0);
  int64_t total = 0;
  for (const Member& m : group) total += m.w.dim(1);
  Tensor w(DataType::kFloat32, {k, total});
  Tensor b(DataType::kFloat32, {total});
  std::vector<int64_t> sizes;
  int64_t off = 0;
  for (const Member& m : group) {
    const int64_t n = m.w.dim(1);
    // Rows copied on several threads: an LLM's q/k/v and gate/up weights are GiBs.
    parallel_for(k, k * n, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        std::copy(m.w.data<float>() + i * n, m.w.data<float>() + (i + 1) * n, w.data<float>() + i * total + off);
    });
    for (int64_t j = 0; j < n; ++j) b.data<float>()[off + j] = m.b.defined() ? m.b.data<float>()[j] : 0.f;
    sizes.push_back(n);
    off += n;
  }
  ir::Node& head = *group[0].node;
  const std::string base = head.name + "_hfused";
  const ir::ValueId wv = pattern::add_constant(g, base + "_W", std::move(w));
  // The wide output: the first member's output shape with the summed last dim.
  const ir::ValueId first_out = head.outputs[0];
  std::string yname = base + "_out";
  while (g.find_value(yname) != ir::kNoValue) yname += "_";
  const ir::ValueId y = g.add_value(yname, DataType::kFloat32);
  if (g.value(first_out).shape) {
    ir::SymShape s = *g.value(first_out).shape;
    s.back() = ir::Dim::known(total);
    g.value(y).shape = s;
  }
  std::vector<ir::ValueId> outs;
  for (const Member& m : group) outs.push_back(m.node->outputs[0]);
  head.inputs[1] = wv;
  if (head.op == ir::OpKind::kGemm) {
    head.attrs.erase("transB");
    head.inputs[2] = pattern::add_constant(g, base + "_b", std::move(b));
  } else if (head.op == ir::OpKind::kMatMulBias) {
    head.inputs[2] = pattern::add_constant(g, base + "_b", std::move(b));
  }
  head.outputs = {y};
  g.value(y).producer = head.id;
  for (size_t i = 1; i < group.size(); ++i) {
    head.origin.insert(head.origin.end(), group[i].node->origin.begin(), group[i].node->origin.end());
    group[i].node->removed = true;
  }
  ir::Node split;
  split.name = base + "_split";
  split.op = ir::OpKind::kSplit;
  const int64_t opset = g.opset_imports.count("") ? g.opset_imports.at("") : 13;
  split.opset = static_cast<int>(std::max<int64_t>(opset, 13));  // split sizes as an input
  Tensor st(DataType::kInt64, {static_cast<int64_t>(sizes.size())});
  std::copy(sizes.begin(), sizes.end(), st.data<int64_t>());
  split.inputs = {y, pattern::add_constant(g, base + "_sizes", std::move(st))};
  split.outputs = outs;
  split.attrs["axis"] = ir::Attribute::of_int(-1);
  split.origin = {};
  g.add_node(std::move(split));
}

// QuantLinear members of one input: the key of what must be equal to share one wide layer.
std::string quant_key(const ir::Graph& g, const ir::Node& n, ir::ValueId x) {
  if (n.removed || n.op != ir::OpKind::kQuantLinear || n.inputs.size() < 3 || n.inputs[0] != x ||
      n.outputs.size() != 1)
    return "";
  const auto& w = g.value(n.inputs[1]).constant;
  const auto& sc = g.value(n.inputs[2]).constant;
  const bool has_b = n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue;
  const auto& b = has_b ? g.value(n.inputs[3]).constant : nullptr;
  if (!w || w->rank() != 2 || !sc || sc->dtype() != DataType::kFloat32 || sc->numel() != w->dim(0)) return "";
  if (has_b && (!b || b->dtype() != DataType::kFloat32 || b->numel() != w->dim(0))) return "";
  if (n.inputs[1] == x || n.inputs[2] == x || (has_b && n.inputs[3] == x)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(n.attr_float("x_scale", 0.f)));
  return std::string(buf) + "|" + std::to_string(n.attr_int("x_zero_point", 0)) + "|" +
         std::to_string(static_cast<int>(w->dtype())) + "|" + std::to_string(w->dim(1)) + "|" +
         n.attr_string("activation", "") + "|" + (has_b ? "b" : "");
}

// Fuses one QuantLinear group in place (the first member becomes the wide layer) + a Split.
void fuse_quant_group(ir::Graph& g, std::vector<ir::Node*>& group) {
  const ir::Node& h0 = *group[0];
  const Tensor& w0 = *g.value(h0.inputs[1]).constant;
  const int64_t k = w0.dim(1);
  const size_t esize = w0.nbytes() / static_cast<size_t>(w0.numel());
  const bool has_b = h0.inputs.size() > 3 && h0.inputs[3] != ir::kNoValue;
  int64_t total = 0;
  for (const ir::Node* n : group) total += g.value(n->inputs[1]).constant->dim(0);
  Tensor w(w0.dtype(), {total, k}), sc(DataType::kFloat32, {total}), b(DataType::kFloat32, {total});
  std::vector<int64_t> sizes;
  int64_t off = 0;
  for (const ir::Node* n : group) {
    const Tensor& wi = *g.value(n->inputs[1]).constant;
    const int64_t ni = wi.dim(0);
    std::memcpy(static_cast<uint8_t*>(w.raw()) + static_cast<size_t>(off * k) * esize, wi.raw(), wi.nbytes());
    std::memcpy(sc.data<float>() + off, g.value(n->inputs[2]).constant->raw(), static_cast<size_t>(ni) * 4);
    if (has_b) std::memcpy(b.data<float>() + off, g.value(n->inputs[3]).constant->raw(), static_cast<size_t>(ni) * 4);
    sizes.push_back(ni);
    off += ni;
  }
  ir::Node& head = *group[0];
  const std::string base = head.name + "_hfused";
  std::vector<ir::ValueId> outs;
  for (const ir::Node* n : group) outs.push_back(n->outputs[0]);
  std::string yname = base + "_out";
  while (g.find_value(yname) != ir::kNoValue) yname += "_";
  const ir::ValueId y = g.add_value(yname, g.value(head.outputs[0]).dtype);
  if (g.value(head.outputs[0]).shape) {
    ir::SymShape s = *g.value(head.outputs[0]).shape;
    s.back() = ir::Dim::known(total);
    g.value(y).shape = s;
  }
  head.inputs[1] = pattern::add_constant(g, base + "_W", std::move(w));
  head.inputs[2] = pattern::add_constant(g, base + "_w_scale", std::move(sc));
  if (has_b) head.inputs[3] = pattern::add_constant(g, base + "_b", std::move(b));
  head.outputs = {y};
  g.value(y).producer = head.id;
  // Each member's nodes stay named in the fused layer's origin (its own name where it has none:
  // a graph built in code, e.g. the LLM step graph's projections).
  if (head.origin.empty()) head.origin.push_back(head.name);
  for (size_t i = 1; i < group.size(); ++i) {
    if (group[i]->origin.empty()) head.origin.push_back(group[i]->name);
    head.origin.insert(head.origin.end(), group[i]->origin.begin(), group[i]->origin.end());
    group[i]->removed = true;
  }
  ir::Node split;
  split.name = base + "_split";
  split.op = ir::OpKind::kSplit;
  const int64_t opset = g.opset_imports.count("") ? g.opset_imports.at("") : 13;
  split.opset = static_cast<int>(std::max<int64_t>(opset, 13));
  Tensor st(DataType::kInt64, {static_cast<int64_t>(sizes.size())});
  std::copy(sizes.begin(), sizes.end(), st.data<int64_t>());
  split.inputs = {y, pattern::add_constant(g, base + "_sizes", std::move(st))};
  split.outputs = outs;
  split.attrs["axis"] = ir::Attribute::of_int(-1);
  g.add_node(std::move(split));
}

}  // namespace

Status fuse_horizontal_gemm(ir::Graph& g, const PassOptions&) {
  const std::set<std::string> pinned = subgraph_reads(g);
  const auto consumers = g.consumers();
  // Each group adds one Split and has >= 2 members, so at most n/2 layers are added; reserving
  // keeps the Member pointers valid while they are.
  g.nodes.reserve(g.nodes.size() + g.nodes.size() / 2 + 1);
  std::vector<std::vector<Member>> groups;
  std::vector<std::vector<ir::Node*>> quant_groups;
  for (size_t x = 0; x < consumers.size(); ++x) {
    if (consumers[x].size() < 2) continue;
    std::map<std::string, std::vector<ir::Node*>> by_quant;
    for (ir::NodeId id : consumers[x]) {
      ir::Node& n = g.node(id);
      const std::string key = quant_key(g, n, static_cast<ir::ValueId>(x));
      if (key.empty() || pinned.count(g.value(n.outputs[0]).name)) continue;
      auto& v = by_quant[key];
      if (std::find(v.begin(), v.end(), &n) == v.end()) v.push_back(&n);
    }
    for (auto& [key, members] : by_quant)
      if (members.size() >= 2) quant_groups.push_back(members);
    std::map<int, std::vector<Member>> by_kind;  // key: the op
    for (ir::NodeId id : consumers[x]) {
      ir::Node& n = g.node(id);
      Member m{&n, {}, {}};
      if (!as_member(g, n, static_cast<ir::ValueId>(x), &m) || pinned.count(g.value(n.outputs[0]).name)) continue;
      // A layer reading x twice is listed twice among its consumers.
      bool dup = false;
      for (const Member& o : by_kind[static_cast<int>(n.op)]) dup |= o.node == &n;
      if (!dup) by_kind[static_cast<int>(n.op)].push_back(std::move(m));
    }
    for (auto& [op, members] : by_kind) {
      if (members.size() < 2) continue;
      // One K for all (the first member's); others of another K stay as they are.
      std::vector<Member> group;
      const int64_t k0 = members[0].w.dim(0);
      for (auto& m : members)
        if (m.w.dim(0) == k0) group.push_back(std::move(m));
      if (group.size() >= 2) groups.push_back(std::move(group));
    }
  }
  for (auto& gr : groups) fuse_group(g, gr);
  for (auto& gr : quant_groups) fuse_quant_group(g, gr);
  return Status::Ok();
}

}  // namespace kiln::passes
