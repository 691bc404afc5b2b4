// Q/DQ moved across the layers that commute with it, so a quantized layer's DequantizeLinear sits
// directly at its input (TensorRT's explicit-quantization "Q/DQ propagation": DQ moves toward
// the outputs and Q toward the inputs across commuting layers; docs/decisions/0056).
// With FQ(x) = DQ(Q(x; s, z); s, z) — both nodes with the same constant parameters, Q saturating:
//   P(FQ(x), c...)                 ->  FQ'(P(x, c...))           (activations: the pair moves)
//   P(DQ(Wq; s, z), c...)          ->  DQ'(P(Wq, c...); s, z)    (Wq constant: P evaluated at build)
//   Concat(FQ(x1), ..., FQ(xn))    ->  FQ(Concat(x1, ..., xn))   (all n pairs with equal parameters)
// FQ' / DQ' are FQ / DQ with the quantization axis renamed to where P moves it. P is one of:
//   Reshape, Flatten, Squeeze, Unsqueeze: move every element unchanged; per tensor always, per
//       axis a when some output axis b has out[b] = in[a] and prod(out[:b]) = prod(in[:a])
//       (every element then keeps its channel; needs both shapes known);
//   Transpose(perm): per tensor, or per axis a -> b with perm[b] = a;
//   Slice, Gather (data input 0, any indices): pick elements; per tensor only (a per-axis scale
//       would have to be sliced too);
//   MaxPool (one output; Indices would see the ties FQ makes): FQ is monotone non-decreasing
//       (s > 0 — annotate_qdq refuses other scales —, round and saturate are), and max_i f(x_i) = f(max_i x_i) for such f; padded
//       positions are skipped by both; per tensor, or per axis along the channels (axis 1);
//   Pad: edge / reflect / wrap copy elements; constant mode pads with v where FQ(Pad(x, v)) pads
//       with FQ(v), equal for v = +0 (FQ(0) = 0); per tensor only;
//   Relu: FQ(0) = (z - z) s = 0, FQ(x) <= 0 for x < 0 and >= 0 for x > 0 (monotone), so
//       Relu(FQ(x)) = FQ(Relu(x)) for every zero point; per tensor or per axis.
// (Moving DQ alone below Relu, Relu(DQ(q)) = DQ(max(q, 0)), or Q alone above it,
//  max(Q(x), 0) = Q(Relu(x)), holds only for z = 0 — Relu(DQ(z)) = 0 but DQ(max(z, 0)) = -z s
//  for z < 0 — which is why activations move as pairs and a lone integer Relu is never made.)
// The equalities hold for NaN-free x (a NaN's quantized code is the kernel's choice). The pair
// moves, never DQ alone, so no 8-bit tensor is left for a data-movement layer at run time
// (the GPU stores no 8-bit activations yet, docs/decisions/0055). The old Q/DQ nodes stay for
// their other readers (eliminate_dead_layers drops them when none is left). Repeats until no
// layer moves, so chains (FQ -> Reshape -> Transpose -> MatMul) end with FQ at the MatMul;
// annotate_qdq runs again at the end for the new quantized values.
#include <cmath>
#include <numeric>

#include "ir/constant_folding.h"
#include "passes/passes.h"
#include "passes/qdq_pairs.h"

namespace kiln::passes {
namespace {

using qdq::Granularity;

bool commutes(ir::OpKind op) {
  switch (op) {
    case ir::OpKind::kReshape:
    case ir::OpKind::kFlatten:
    case ir::OpKind::kSqueeze:
    case ir::OpKind::kUnsqueeze:
    case ir::OpKind::kTranspose:
    case ir::OpKind::kSlice:
    case ir::OpKind::kGather:
    case ir::OpKind::kMaxPool:
    case ir::OpKind::kRelu:
    case ir::OpKind::kPad:
      return true;
    default:
      return false;
  }
}

bool reshape_like(ir::OpKind op) {
  return op == ir::OpKind::kReshape || op == ir::OpKind::kFlatten || op == ir::OpKind::kSqueeze ||
         op == ir::OpKind::kUnsqueeze;
}

// Where P moves quantization axis `axis` of its input 0, or -1 when a per-axis scale does not
// follow P (see the header's conditions).
int64_t moved_axis(const ir::Graph& g, const ir::Node& p, int64_t axis) {
  if (p.op == ir::OpKind::kRelu) return axis;
  if (p.op == ir::OpKind::kMaxPool) return axis == 1 ? 1 : -1;
  if (p.op == ir::OpKind::kTranspose) {
    std::vector<int64_t> perm = p.attr_ints("perm");
    const auto& s = g.value(p.inputs[0]).shape;
    if (perm.empty() && s) {
      perm.resize(s->size());
      std::iota(perm.rbegin(), perm.rend(), 0);
    }
    for (size_t b = 0; b < perm.size(); ++b)
      if (perm[b] == axis) return static_cast<int64_t>(b);
    return -1;
  }
  if (!reshape_like(p.op)) return -1;
  std::vector<int64_t> in, out;
  if (!known_shape(g, p.inputs[0], &in) || !known_shape(g, p.outputs[0], &out)) return -1;
  if (axis >= static_cast<int64_t>(in.size())) return -1;
  int64_t prefix_in = 1;
  for (int64_t i = 0; i < axis; ++i) prefix_in *= in[i];
  int64_t prefix_out = 1;
  for (size_t b = 0; b < out.size(); ++b) {
    if (prefix_out == prefix_in && out[b] == in[axis]) return static_cast<int64_t>(b);
    prefix_out *= out[b];
  }
  return -1;
}

// A copy of Q/DQ node `tmpl` reading `in` and writing `out`, its axis set to `axis` when per axis.
void add_qdq_copy(ir::Graph& g, const ir::Node& tmpl, const std::string& name, ir::ValueId in, ir::ValueId out,
                  int64_t axis) {
  ir::Node n;
  n.name = name;
  n.op = tmpl.op;
  n.opset = tmpl.opset;
  n.inputs = tmpl.inputs;
  n.inputs[0] = in;
  n.outputs = {out};
  n.attrs = tmpl.attrs;
  if (axis >= 0) n.attrs["axis"] = ir::Attribute::of_int(axis);
  n.origin = tmpl.origin;
  g.add_node(std::move(n));
}

// `base`, or a variant of it that no node has yet (`names`: every node name; the new one joins).
std::string unique_node_name(std::set<std::string>* names, std::string base) {
  while (names->count(base)) base += "_";
  names->insert(base);
  return base;
}

// Pad in a mode that copies elements, or with the constant +0 (attribute before opset 11, input
// 2 from 11 on).
bool pad_commutes(const ir::Graph& g, const ir::Node& p) {
  if (p.attr_string("mode", "constant") != "constant") return true;
  if (p.opset < 11) {
    const float v = p.attr_float("value", 0.f);
    return v == 0.f && !std::signbit(v);
  }
  const ir::ValueId cv = qdq::input_or_none(p, 2);
  if (cv == ir::kNoValue) return true;
  const Tensor* t = g.value(cv).constant.get();
  if (!t) return false;
  for (double v : tensor_to_doubles(*t))
    if (v != 0 || std::signbit(v)) return false;
  return true;
}

// The FQ pair producing `d`: its Q and DQ, when they state the same parameters and Q saturates.
bool fq_pair(ir::Graph& g, ir::ValueId d, ir::Node** q, ir::Node** dq) {
  *dq = qdq::producer_of(g, d, ir::OpKind::kDequantizeLinear);
  if (!*dq || (*dq)->inputs.empty()) return false;
  *q = qdq::producer_of(g, (*dq)->inputs[0], ir::OpKind::kQuantizeLinear);
  // x must be float (Q also takes int32, which MaxPool cannot) and of DQ's output type, so the
  // moved layer runs on the type it ran on (and Pad's constant value still matches).
  return *q && !(*q)->inputs.empty() && dtype_is_float(g.value((*q)->inputs[0]).dtype) &&
         g.value((*q)->inputs[0]).dtype == g.value(d).dtype &&
         (*q)->attr_int("saturate", 1) != 0 && qdq::same_params(g, **q, **dq);
}

// MaxPool's Indices output, when present, must be unread.
bool extra_outputs_unread(const ir::Graph& g, const ir::Node& p, const std::vector<std::vector<ir::NodeId>>& consumers) {
  for (size_t i = 1; i < p.outputs.size(); ++i) {
    const ir::ValueId o = p.outputs[i];
    if (o == ir::kNoValue) continue;
    if (static_cast<size_t>(o) >= consumers.size()) return false;
    if (!consumers[o].empty() || std::count(g.outputs.begin(), g.outputs.end(), o)) return false;
  }
  return true;
}

// The axis the new Q/DQ pair needs after P (-1: per tensor); false when it does not follow P.
bool new_axis(const ir::Graph& g, const ir::Node& p, const qdq::Params& prm, int64_t* axis) {
  *axis = -1;
  if (prm.granularity == Granularity::kNone) return false;
  if (prm.granularity == Granularity::kPerTensor) return true;
  *axis = moved_axis(g, p, prm.axis);
  return *axis >= 0;
}

// P(FQ(x), c...) -> FQ'(P(x, c...)). `pid` is P's id (node references move as nodes are added).
bool move_pair(ir::Graph& g, ir::NodeId pid, const std::vector<std::vector<ir::NodeId>>& consumers,
               std::set<std::string>* names) {
  ir::Node* q;
  ir::Node* dq;
  const ir::Node& p0 = g.node(pid);
  if (p0.inputs.empty() || p0.outputs.empty() || p0.outputs[0] == ir::kNoValue) return false;
  if (!fq_pair(g, p0.inputs[0], &q, &dq)) return false;
  if (!extra_outputs_unread(g, p0, consumers)) return false;
  if (p0.op == ir::OpKind::kPad && !pad_commutes(g, p0)) return false;
  int64_t axis;
  if (!new_axis(g, p0, qdq::params_of(g, *dq, p0.inputs[0]), &axis)) return false;
  const ir::Node q_tmpl = *q, dq_tmpl = *dq;
  const ir::ValueId x = q_tmpl.inputs[0], y = p0.outputs[0];
  const ir::ValueId pf = qdq::fresh_value(g, g.value(y).name + "_float", g.value(x).dtype, y);
  const ir::ValueId pq = qdq::fresh_value(g, g.value(y).name + "_quantized", g.value(q_tmpl.outputs[0]).dtype, y);
  ir::Node& p = g.node(pid);
  p.inputs[0] = x;
  p.outputs[0] = pf;
  g.value(pf).producer = pid;
  const std::string base = p.name;
  add_qdq_copy(g, q_tmpl, unique_node_name(names, base + "/quantize"), pf, pq, axis);
  add_qdq_copy(g, dq_tmpl, unique_node_name(names, base + "/dequantize"), pq, y, axis);
  return true;
}

// P(DQ(Wq), c...) -> DQ'(P(Wq, c...)) with Wq and c... constant, P folded at build.
bool move_dq_of_constant(ir::Graph& g, ir::NodeId pid, const PassOptions& opts, std::set<std::string>* names) {
  if (!opts.evaluator) return false;
  const ir::Node& p0 = g.node(pid);
  if (p0.op != ir::OpKind::kTranspose && !reshape_like(p0.op) && p0.op != ir::OpKind::kSlice &&
      p0.op != ir::OpKind::kGather)
    return false;
  if (p0.inputs.empty() || p0.outputs.size() != 1 || p0.outputs[0] == ir::kNoValue) return false;
  ir::Node* dq = qdq::producer_of(g, p0.inputs[0], ir::OpKind::kDequantizeLinear);
  if (!dq || dq->inputs.empty() || !g.value(dq->inputs[0]).constant) return false;
  for (size_t i = 1; i < p0.inputs.size(); ++i)
    if (p0.inputs[i] != ir::kNoValue && !g.value(p0.inputs[i]).constant) return false;
  int64_t axis;
  if (!new_axis(g, p0, qdq::params_of(g, *dq, p0.inputs[0]), &axis)) return false;
  const ir::Node dq_tmpl = *dq;
  const ir::ValueId wq = dq_tmpl.inputs[0], y = p0.outputs[0];
  const ir::ValueId pw = qdq::fresh_value(g, g.value(y).name + "_quantized", g.value(wq).dtype, y);
  ir::Node& p = g.node(pid);
  p.inputs[0] = wq;
  p.outputs[0] = pw;
  g.value(pw).producer = pid;
  if (!ir::fold_constant_node(g, p, *opts.evaluator)) {  // the kernel refused: undo
    p.inputs[0] = dq_tmpl.outputs[0];
    p.outputs[0] = y;
    g.value(pw).producer = -1;
    return false;
  }
  const std::string base = g.node(pid).name;
  add_qdq_copy(g, dq_tmpl, unique_node_name(names, base + "/dequantize"), pw, y, axis);
  return true;
}

// Concat(FQ(x1), ..., FQ(xn)) -> FQ(Concat(x1, ..., xn)), per tensor, all pairs equal.
bool move_concat(ir::Graph& g, ir::NodeId cid, std::set<std::string>* names) {
  const ir::Node& c0 = g.node(cid);
  if (c0.inputs.empty() || c0.outputs.size() != 1) return false;
  std::vector<ir::ValueId> xs;
  const ir::Node* first_q = nullptr;
  const ir::Node* first_dq = nullptr;
  for (ir::ValueId in : c0.inputs) {
    ir::Node* q;
    ir::Node* dq;
    if (in == ir::kNoValue || !fq_pair(g, in, &q, &dq)) return false;
    if (qdq::params_of(g, *dq, in).granularity != Granularity::kPerTensor) return false;
    if (first_q && (!qdq::same_params(g, *first_q, *q) || q->attr_int("output_dtype", 0) != first_q->attr_int("output_dtype", 0) ||
                    dq->attr_int("output_dtype", 0) != first_dq->attr_int("output_dtype", 0)))
      return false;
    if (!first_q) {
      first_q = q;
      first_dq = dq;
    }
    xs.push_back(q->inputs[0]);
  }
  for (ir::ValueId x : xs)
    if (g.value(x).dtype != g.value(xs[0]).dtype) return false;
  const ir::Node q_tmpl = *first_q, dq_tmpl = *first_dq;
  const ir::ValueId y = c0.outputs[0];
  const ir::ValueId cf = qdq::fresh_value(g, g.value(y).name + "_float", g.value(xs[0]).dtype, y);
  const ir::ValueId cq = qdq::fresh_value(g, g.value(y).name + "_quantized", g.value(q_tmpl.outputs[0]).dtype, y);
  ir::Node& c = g.node(cid);
  c.inputs = xs;
  c.outputs[0] = cf;
  g.value(cf).producer = cid;
  const std::string base = c.name;
  add_qdq_copy(g, q_tmpl, unique_node_name(names, base + "/quantize"), cf, cq, -1);
  add_qdq_copy(g, dq_tmpl, unique_node_name(names, base + "/dequantize"), cq, y, -1);
  return true;
}

}  // namespace

Status propagate_qdq(ir::Graph& g, const PassOptions& opts) {
  // No value is renamed (a moved layer's output keeps its name, only its producer changes), so
  // values that subgraphs read by name need no pinning.
  std::set<std::string> names;
  for (const ir::Node& n : g.nodes) names.insert(n.name);
  bool changed = true, any = false;
  for (int round = 0; changed && round < 64; ++round) {
    changed = false;
    const auto consumers = g.consumers();
    const size_t n_nodes = g.nodes.size();  // nodes added in this round are visited next round
    for (size_t i = 0; i < n_nodes; ++i) {
      if (g.nodes[i].removed) continue;
      const ir::NodeId id = g.nodes[i].id;
      const ir::OpKind op = g.nodes[i].op;
      bool moved = false;
      if (op == ir::OpKind::kConcat) moved = move_concat(g, id, &names);
      else if (commutes(op)) moved = move_pair(g, id, consumers, &names) || move_dq_of_constant(g, id, opts, &names);
      changed = changed || moved;
    }
    any = any || changed;
    if (changed) KILN_RETURN_IF_ERROR(g.topo_sort());
  }
  return any ? annotate_qdq(g, opts) : Status::Ok();
}

}  // namespace kiln::passes
