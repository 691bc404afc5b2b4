// Q/DQ round trips that change nothing, dropped (docs/decisions/0056):
//   R1  Q(DQ(q; s1, z1); s2, z2)                   ->  q            (Q's output type = q's type)
//         when Q(DQ(c)) = c for every code c of q's type;
//   R2  DQ(Q(DQ(q; s1, z1); s2, z2); s3, z3)       ->  DQ(q; s1, z1)
//         when DQ3(Q2(DQ1(c))) = DQ1(c) for every code c of q's type.
// R2 covers a Q->DQ pair whose result feeds another identical Q->DQ pair
// (FQ(FQ(x)) -> FQ(x), FQ = DQ(Q(.)) with q = Q1(x)), which exporters and propagate_qdq leave.
// The conditions are checked, not assumed: every code of q's type (8- and 16-bit integer and
// float8 types; per tensor, or per axis with one channel count) is run through the nodes' own
// CPU reference kernels (PassOptions::evaluator) and compared bit for bit (NaN = NaN). For equal
// parameters, an integer type and a float32 scale they always hold: with a = c - z, |a| <= 2^16,
// fl(fl(a s) / s) is within 2^-22 |a| < 1/2 of a (two roundings of relative 2^-24; a product
// below 2^-126 is exact), so round() gives back a — unless a s overflows (s > FLT_MAX / |a|),
// which the check catches; with a float16 / bfloat16 scale (11- / 8-bit significands, and DQ's
// output in that type) the bound no longer stays below 1/2, so only the check decides. Without
// an evaluator nothing is dropped. Q/DQ nodes whose outputs subgraphs read by name stay.
#include <cmath>
#include <cstring>

#include "passes/passes.h"
#include "passes/qdq_pairs.h"

namespace kiln::passes {
namespace {

using qdq::Granularity;

// The codes of `t`'s type, [n] (per tensor) or [channels, n]; nullopt for other types.
std::optional<Tensor> all_codes(DataType t, int64_t channels) {
  const int bits = dtype_bits(t);
  const bool float8 = dtype_is_float(t) && bits == 8;
  if (!(bits == 8 || bits == 16) || !(dtype_is_integer(t) || float8)) return std::nullopt;
  const int64_t n = int64_t{1} << bits;
  Tensor codes = channels > 0 ? Tensor(t, {channels, n}) : Tensor(t, {n});
  for (int64_t c = 0; c < std::max<int64_t>(channels, 1); ++c)
    for (int64_t i = 0; i < n; ++i) {
      if (bits == 8) codes.data<uint8_t>()[c * n + i] = static_cast<uint8_t>(i);
      else codes.data<uint16_t>()[c * n + i] = static_cast<uint16_t>(i);
    }
  return codes;
}

bool same_values(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const std::vector<double> x = tensor_to_doubles(a), y = tensor_to_doubles(b);
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) && std::isnan(y[i])) continue;
    if (x[i] != y[i] || std::signbit(x[i]) != std::signbit(y[i])) return false;
  }
  return true;
}

// Runs the chain `nodes` (each reads the previous one's output; the first reads every code of
// `code_type`) through the evaluator; returns the first and the last output. The nodes' scales
// and zero points are copied; a per-axis chain runs with the codes as [channels, n], axis 0.
std::optional<std::pair<Tensor, Tensor>> run_on_codes(const ir::Graph& g, const std::vector<const ir::Node*>& nodes,
                                                      DataType code_type, const PassOptions& opts) {
  int64_t channels = 0;
  for (const ir::Node* n : nodes) {
    const qdq::Params p = qdq::params_of(g, *n, n->inputs[0]);
    if (p.granularity == Granularity::kNone) return std::nullopt;
    if (p.granularity == Granularity::kPerAxis) {
      const int64_t c = g.value(n->inputs[1]).constant->numel();
      if (channels && c != channels) return std::nullopt;
      channels = c;
    }
  }
  // Per-axis nodes must name one axis of one tensor shape (the chain keeps shapes).
  int64_t axis = -1;
  for (const ir::Node* n : nodes) {
    const qdq::Params p = qdq::params_of(g, *n, n->inputs[0]);
    if (p.granularity != Granularity::kPerAxis) continue;
    if (axis >= 0 && p.axis != axis) return std::nullopt;
    axis = p.axis;
  }
  auto codes = all_codes(code_type, channels);
  if (!codes) return std::nullopt;
  ir::Graph e;
  e.opset_imports = g.opset_imports;
  auto constant = [&e](const std::string& name, std::shared_ptr<const Tensor> t) {
    const ir::ValueId v = e.add_value(name, t->dtype());
    ir::SymShape s;
    for (int64_t d : t->shape()) s.push_back(ir::Dim::known(d));
    e.value(v).shape = s;
    e.value(v).constant = std::move(t);
    return v;
  };
  ir::ValueId prev = constant("codes", std::make_shared<Tensor>(*codes));
  std::vector<ir::ValueId> outs;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const ir::Node& src = *nodes[k];
    ir::Node n;
    n.name = "n" + std::to_string(k);
    n.op = src.op;
    n.opset = src.opset;
    n.attrs = src.attrs;
    if (qdq::params_of(g, src, src.inputs[0]).granularity == Granularity::kPerAxis)
      n.attrs["axis"] = ir::Attribute::of_int(0);
    n.inputs = {prev};
    for (size_t i = 1; i < src.inputs.size(); ++i)
      n.inputs.push_back(src.inputs[i] == ir::kNoValue
                             ? ir::kNoValue
                             : constant(n.name + "_in" + std::to_string(i), g.value(src.inputs[i]).constant));
    const ir::ValueId out = e.add_value(n.name + "_out", g.value(src.outputs[0]).dtype);
    e.value(out).shape = e.value(prev).shape;
    n.outputs = {out};
    e.add_node(std::move(n));
    outs.push_back(out);
    prev = out;
  }
  e.outputs = {outs.front(), outs.back()};
  auto r = opts.evaluator->evaluate(e);
  if (!r.ok() || r->size() != 2) return std::nullopt;
  // A one-node chain's "first output" is the codes themselves (R1 compares with them).
  if (nodes.size() == 1) return std::make_pair(*codes, (*r)[1]);
  return std::make_pair((*r)[0], (*r)[1]);
}

bool unpinned(const ir::Graph& g, const std::set<std::string>& pinned, ir::ValueId v) {
  return !pinned.count(g.value(v).name);
}

// R1: Q(DQ(q)) -> q.
bool drop_q_of_dq(ir::Graph& g, ir::Node& q2, const std::set<std::string>& pinned, const PassOptions& opts) {
  if (q2.inputs.empty() || q2.outputs.size() != 1 || !unpinned(g, pinned, q2.outputs[0])) return false;
  ir::Node* dq1 = qdq::producer_of(g, q2.inputs[0], ir::OpKind::kDequantizeLinear);
  if (!dq1 || dq1->inputs.empty()) return false;
  const ir::ValueId q = dq1->inputs[0];
  if (g.value(q).dtype != g.value(q2.outputs[0]).dtype) return false;
  // Q2(DQ1(c)) against c: a chain of DQ1, Q2 whose "first output" must be the codes.
  std::vector<const ir::Node*> chain = {dq1, &q2};
  auto r = run_on_codes(g, chain, g.value(q).dtype, opts);
  if (!r) return false;
  auto codes = all_codes(g.value(q).dtype, r->second.rank() == 2 ? r->second.dim(0) : 0);
  if (!codes || !same_values(*codes, r->second)) return false;
  if (!replace_all_uses(g, q2.outputs[0], q)) return false;
  q2.removed = true;
  return true;
}

// R2: DQ3(Q2(DQ1(q))) -> DQ1(q).
bool drop_fq_of_dq(ir::Graph& g, ir::Node& dq3, const std::set<std::string>& pinned, const PassOptions& opts) {
  if (dq3.inputs.empty() || dq3.outputs.size() != 1 || !unpinned(g, pinned, dq3.outputs[0])) return false;
  ir::Node* q2 = qdq::producer_of(g, dq3.inputs[0], ir::OpKind::kQuantizeLinear);
  if (!q2 || q2->inputs.empty()) return false;
  ir::Node* dq1 = qdq::producer_of(g, q2->inputs[0], ir::OpKind::kDequantizeLinear);
  if (!dq1 || dq1->inputs.empty()) return false;
  if (g.value(dq1->outputs[0]).dtype != g.value(dq3.outputs[0]).dtype) return false;
  auto r = run_on_codes(g, {dq1, q2, &dq3}, g.value(dq1->inputs[0]).dtype, opts);
  if (!r || !same_values(r->first, r->second)) return false;
  if (!replace_all_uses(g, dq3.outputs[0], dq1->outputs[0])) return false;
  dq3.removed = true;
  return true;
}

}  // namespace

Status eliminate_redundant_qdq(ir::Graph& g, const PassOptions& opts) {
  if (!opts.evaluator) return Status::Ok();
  const std::set<std::string> pinned = subgraph_reads(g);
  // R2 first: it drops a whole pair where R1 would leave two DQs of one code tensor. Topological
  // order: a chain of pairs collapses in one sweep (each rewrite rewires the readers).
  for (ir::Node& n : g.nodes)
    if (!n.removed && n.op == ir::OpKind::kDequantizeLinear) drop_fq_of_dq(g, n, pinned, opts);
  // (A Q that R2 left unread goes with eliminate_dead_layers.)
  for (ir::Node& n : g.nodes)
    if (!n.removed && n.op == ir::OpKind::kQuantizeLinear) drop_q_of_dq(g, n, pinned, opts);
  return Status::Ok();
}

}  // namespace kiln::passes
