// Scaled-dot-product attention as exporters write it, recognised as one Attention layer
// (ops.def; docs/decisions/0006-attention-op.md; "Attention Is All You Need", eq. 1):
//   S = MatMul(Q * a, KT * b) * c1 / c2 ...      scalar Mul/Div on either operand or the product
//   S = S + M  |  Where(C, S, f)                  additive float mask / bool mask, f <= -1e4
//   Y = MatMul(Softmax(S, axis=-1), V)
//     -> Attention(Q, K, V[, M | C]){scale = a * b * c1 / c2, is_causal}
// The NaN guard current torch.onnx exporters put after the softmax of scaled_dot_product_attention,
// P = Where(IsNaN(Softmax(S)), 0, Softmax(S)), is absorbed too: it turns the NaN of a row whose
// every key is masked with -inf into zeros, which is what the Attention op gives such rows.
// KT is Transpose(K', p): K = K' when p swaps the last two axes, else the Transpose is given the
// perm that yields K; any other KT gets a new Transpose(KT, swap last two). A constant bool C that
// is lower-triangular over [Sq, Sk] (key j allowed for query i iff j <= i + Sk - Sq, the slice of
// a tril buffer GPT-2 uses) becomes is_causal=1 with no mask input; a mask provably excluding no
// key (all-zero additive, all-true bool: constants through Expand / Where) is dropped. K and V repeated for grouped-
// query attention, Reshape(Expand|Tile(Unsqueeze(X, 2)), [*, Hkv*n, S, D]) (HF repeat_kv), read X
// directly (query head h uses kv head h / n). torch's dynamo exporter writes K^T through 3-D,
// Reshape(Transpose(Reshape(K, [L, S, D]), 0,2,1), [*, D, S]); with GQA its K is the 5-D Expand
// of the repeat, which gets a 4-D view that the repeat then drops from (docs/decisions/0065).
// Every intermediate feeds only the next layer of the pattern; Q, K, V must have one rank >= 3
// and one float dtype.
#include <algorithm>
#include <numeric>
#include <set>

#include "core/numerics.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln::passes {

namespace {

namespace pt = pattern;
using ir::OpKind;

// A fill value this negative makes exp(fill - max) exactly 0 in float32 for any score range an
// attention layer sees, so Where(C, S, fill) equals excluding the key.
constexpr double kMaskedFill = -1e4;

// Peels single-use scalar Mul/Div layers ending at v (v = u * c or u / c), multiplying *scale;
// returns the innermost value and appends the peeled layers to *matched.
ir::ValueId peel_scalars(ir::Graph& g, const pt::Consumers& c, ir::ValueId v, double* scale,
                         std::vector<ir::Node*>* matched) {
  for (;;) {
    if (!pt::single_use(g, c, v) || g.value(v).producer < 0) return v;
    ir::Node& n = g.node(g.value(v).producer);
    if (n.removed || n.inputs.size() != 2 || (n.op != OpKind::kMul && n.op != OpKind::kDiv)) return v;
    const int rank = pt::rank_of(g, v);
    double k;
    if (n.op == OpKind::kDiv) {
      if (!pt::scalar_constant(g, n.inputs[1], rank, &k) || k == 0 || pt::rank_of(g, n.inputs[0]) != rank) return v;
      *scale /= k;
      matched->push_back(&n);
      v = n.inputs[0];
      continue;
    }
    int side = -1;
    for (int s = 0; s < 2; ++s)
      if (pt::scalar_constant(g, n.inputs[1 - s], rank, &k) && pt::rank_of(g, n.inputs[s]) == rank) side = s;
    if (side < 0) return v;
    *scale *= k;
    matched->push_back(&n);
    v = n.inputs[side];
  }
}

// A constant bool mask that allows key j for query i iff j <= i + Sk - Sq, for every leading index.
bool is_causal_mask(const Tensor& m, int64_t sq, int64_t sk) {
  if (m.dtype() != DataType::kBool || m.rank() < 2 || m.dim(-2) != sq || m.dim(-1) != sk) return false;
  const auto* p = static_cast<const uint8_t*>(m.raw());
  const int64_t slices = m.numel() / (sq * sk);
  for (int64_t s = 0; s < slices; ++s)
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < sk; ++j)
        if ((p[(s * sq + i) * sk + j] != 0) != (j <= i + sk - sq)) return false;
  return true;
}

// Whether every element of v is non-zero (`nonzero`; a bool's true) or every one is zero, proved
// from constants: a non-empty constant; Expand(x, shape) of such an x (the shape may be known only
// at run time: Expand copies); Where(c, x, y) with c all true and x such. HF's masks for a model
// without padding are built this way (ViT: Where(Expand(arange(S) >= 0, [B, 1, S, S]), 0, min)).
bool provably_all(const ir::Graph& g, ir::ValueId v, bool nonzero, int depth = 0) {
  if (v == ir::kNoValue || depth > 8) return false;
  const ir::Value& val = g.value(v);
  if (val.constant) {
    const Tensor& t = *val.constant;
    if (t.numel() == 0) return false;
    for (int64_t i = 0; i < t.numel(); ++i)
      if ((load_as_double(t.dtype(), t.raw(), i) != 0) != nonzero) return false;  // NaN counts as non-zero
    return true;
  }
  if (val.producer < 0) return false;
  const ir::Node& n = g.node(val.producer);
  if (n.removed) return false;
  if (n.op == OpKind::kExpand && !n.inputs.empty()) return provably_all(g, n.inputs[0], nonzero, depth + 1);
  if (n.op == OpKind::kWhere && n.inputs.size() == 3)
    return provably_all(g, n.inputs[0], true, depth + 1) && provably_all(g, n.inputs[1], nonzero, depth + 1);
  return false;
}

bool is_swap_last_two(const std::vector<int64_t>& p) {
  const size_t r = p.size();
  if (r < 2) return false;
  for (size_t i = 0; i + 2 < r; ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return p[r - 2] == static_cast<int64_t>(r - 1) && p[r - 1] == static_cast<int64_t>(r - 2);
}

// GQA: X repeated n times per head as Reshape(Expand|Tile(Unsqueeze(X, axis 2 of 5))). Returns X
// when v is that pattern (shapes from inference: [*, H, S, D] -> [*, H, 1, S, D] -> [*, H, n, S, D]
// -> [*, H*n, S, D]), else v. The repeat layers become dead once the Attention reads X.
ir::ValueId unrepeat_heads(ir::Graph& g, const pt::Consumers& c, ir::ValueId v, std::vector<ir::Node*>* absorbed) {
  ir::Node* reshape = pt::single_use(g, c, v) ? pt::producer(g, v, OpKind::kReshape) : nullptr;
  if (!reshape) return v;
  const ir::ValueId e = reshape->inputs[0];
  ir::Node* rep = pt::single_use(g, c, e) ? pt::producer(g, e, OpKind::kExpand) : nullptr;
  if (!rep && pt::single_use(g, c, e)) rep = pt::producer(g, e, OpKind::kTile);
  if (!rep) return v;
  const ir::ValueId u = rep->inputs[0];
  ir::Node* unsq = pt::single_use(g, c, u) ? pt::producer(g, u, OpKind::kUnsqueeze) : nullptr;
  if (!unsq) return v;
  const ir::ValueId x = unsq->inputs[0];
  const auto &xs = g.value(x).shape, &us = g.value(u).shape, &es = g.value(e).shape, &vs = g.value(v).shape;
  if (!xs || !us || !es || !vs || xs->size() < 3 || us->size() != xs->size() + 1 || es->size() != us->size() ||
      vs->size() != xs->size())
    return v;
  const size_t r = xs->size(), h = r - 3;  // head axis of X; the new axis sits right after it
  if (!((*us)[h + 1] == ir::Dim::known(1))) return v;
  for (size_t i = 0; i < r; ++i) {
    const size_t ui = i <= h ? i : i + 1;
    if (!((*us)[ui] == (*xs)[i]) || !((*es)[ui] == (*xs)[i])) return v;
    if (i != h && !((*vs)[i] == (*xs)[i])) return v;
  }
  const ir::Dim &hk = (*xs)[h], &n = (*es)[h + 1], &hq = (*vs)[h];
  if (!hk.is_known() || !n.is_known() || !hq.is_known() || hq.value != hk.value * n.value) return v;
  absorbed->insert(absorbed->end(), {unsq, rep, reshape});
  return x;
}

// GQA through K's new 4-D view (k_through_3d): k = Reshape(X, [*, Hq, S, D]) made by the pass,
// X = Expand|Tile(Unsqueeze(Y, axis 2 of 5)) = [*, Hkv, n, S, D], with Hq = Hkv * n. Returns Y,
// appending the view, the repeat layers and X's other readers that are dead (no reader, not a
// graph output: an exporter's 4-D view left behind by cancel_transpose_reshape) to *absorbed,
// when X is read by nothing else than `r1` (the absorbed first Reshape of K^T) and them; else k.
ir::ValueId unrepeat_view(ir::Graph& g, const pt::Consumers& c, ir::ValueId k, const ir::Node* r1,
                          std::vector<ir::Node*>* absorbed) {
  ir::Node* view = pt::producer(g, k, OpKind::kReshape);
  if (!view) return k;
  const ir::ValueId x = view->inputs[0];
  ir::Node* rep = pt::producer(g, x, OpKind::kExpand);
  if (!rep) rep = pt::producer(g, x, OpKind::kTile);
  if (!rep || static_cast<size_t>(x) >= c.size() || std::count(g.outputs.begin(), g.outputs.end(), x)) return k;
  std::vector<ir::Node*> dead;
  for (ir::NodeId id : c[static_cast<size_t>(x)]) {
    ir::Node& n = g.node(id);
    if (&n == r1 || n.removed) continue;
    for (ir::ValueId o : n.outputs)
      if (o != ir::kNoValue && (!c[static_cast<size_t>(o)].empty() || std::count(g.outputs.begin(), g.outputs.end(), o)))
        return k;
    dead.push_back(&n);
  }
  const ir::ValueId u = rep->inputs[0];
  ir::Node* unsq = pt::single_use(g, c, u) ? pt::producer(g, u, OpKind::kUnsqueeze) : nullptr;
  if (!unsq) return k;
  const ir::ValueId y = unsq->inputs[0];
  const auto &ys = g.value(y).shape, &us = g.value(u).shape, &xs = g.value(x).shape, &ks = g.value(k).shape;
  if (!ys || !us || !xs || !ks || ys->size() < 3 || us->size() != ys->size() + 1 || xs->size() != us->size() ||
      ks->size() != ys->size())
    return k;
  const size_t r = ys->size(), h = r - 3;
  if (!((*us)[h + 1] == ir::Dim::known(1))) return k;
  for (size_t i = 0; i < r; ++i) {
    const size_t ui = i <= h ? i : i + 1;
    if (!((*us)[ui] == (*ys)[i]) || !((*xs)[ui] == (*ys)[i])) return k;
    if (i != h && !((*ks)[i] == (*ys)[i])) return k;
  }
  const ir::Dim &hk = (*ys)[h], &n = (*xs)[h + 1], &hq = (*ks)[h];
  if (!hk.is_known() || !n.is_known() || !hq.is_known() || hq.value != hk.value * n.value) return k;
  absorbed->insert(absorbed->end(), dead.begin(), dead.end());
  absorbed->insert(absorbed->end(), {unsq, rep, view});
  return y;
}

struct Match {
  std::vector<ir::Node*> matched;  // layers the Attention replaces
  std::vector<ir::Node*> absorbed;  // layers that become dead (origin only)
  ir::ValueId q = ir::kNoValue, kt = ir::kNoValue, v = ir::kNoValue;
  ir::ValueId add_mask = ir::kNoValue, keep_mask = ir::kNoValue;  // float additive / bool (Where)
  double scale = 1;
  bool causal = false;
};

// The scores `inner` keep their shape through a mask layer with output `outer`: equal shapes, or
// `outer` only less known (a dim `?` where `inner` has a known or named one). Exporters build the
// mask's shape at run time from Shape/Concat (Expand to [?, ?, S, S] with a dynamic batch), so the
// Add's broadcast output is `?` where the scores say `batch`; the Attention layer checks at the
// concrete shapes that the mask broadcasts to the scores (an error naming the node otherwise).
bool keeps_scores_shape(const ir::Graph& g, ir::ValueId inner, ir::ValueId outer) {
  const auto &a = g.value(inner).shape, &b = g.value(outer).shape;
  if (a == b) return true;
  if (!a || !b || a->size() != b->size()) return false;
  for (size_t i = 0; i < a->size(); ++i) {
    const ir::Dim &x = (*a)[i], &y = (*b)[i];
    if (!(x == y) && (y.is_known() || !y.symbol.empty())) return false;
  }
  return true;
}

// Walks back from the Softmax input: masks, then scalars, then the Q K^T MatMul.
bool match_scores(ir::Graph& g, const pt::Consumers& c, ir::ValueId s, Match* m) {
  const int rank = pt::rank_of(g, s);
  bool have_add = false, have_where = false;
  for (;;) {
    if (!pt::single_use(g, c, s) || g.value(s).producer < 0) return false;
    ir::Node& n = g.node(g.value(s).producer);
    if (n.removed) return false;
    if (n.op == OpKind::kWhere && !have_where && n.inputs.size() == 3) {
      double fill;
      if (!pt::scalar_constant(g, n.inputs[2], rank, &fill) || fill > kMaskedFill) {
        // Where(C, S, -inf) reads as a double -inf constant: scalar_constant rejects non-finite.
        const auto& t = g.value(n.inputs[2]).constant;
        if (!t || t->numel() != 1 || t->rank() > rank || !pt::is_float_dtype(t->dtype()) ||
            !(load_as_double(t->dtype(), t->raw(), 0) < kMaskedFill))
          return false;
      }
      if (g.value(n.inputs[0]).dtype != DataType::kBool || pt::rank_of(g, n.inputs[0]) > rank ||
          pt::rank_of(g, n.inputs[0]) < 0 || !keeps_scores_shape(g, n.inputs[1], s))
        return false;
      m->keep_mask = n.inputs[0];
      have_where = true;
      m->matched.push_back(&n);
      s = n.inputs[1];
      continue;
    }
    if (n.op == OpKind::kAdd && !have_add && n.inputs.size() == 2) {
      // The scores side is the one produced by a MatMul, possibly through scalar Mul/Div.
      int side = -1;
      for (int k = 0; k < 2 && side < 0; ++k) {
        double unused = 1;
        std::vector<ir::Node*> tmp;
        const ir::ValueId inner = peel_scalars(g, c, n.inputs[k], &unused, &tmp);
        if (pt::producer(g, inner, OpKind::kMatMul) && pt::rank_of(g, n.inputs[k]) == rank) side = k;
      }
      if (side < 0 || !keeps_scores_shape(g, n.inputs[side], s)) return false;
      const ir::ValueId mk = n.inputs[1 - side];
      if (pt::rank_of(g, mk) < 0 || pt::rank_of(g, mk) > rank || g.value(mk).dtype != g.value(s).dtype) return false;
      m->add_mask = mk;
      have_add = true;
      m->matched.push_back(&n);
      s = n.inputs[side];
      continue;
    }
    break;
  }
  s = peel_scalars(g, c, s, &m->scale, &m->matched);
  ir::Node* qk = pt::single_use(g, c, s) ? pt::producer(g, s, OpKind::kMatMul) : nullptr;
  if (!qk || qk->inputs.size() != 2) return false;
  m->matched.push_back(qk);
  m->q = peel_scalars(g, c, qk->inputs[0], &m->scale, &m->matched);
  m->kt = peel_scalars(g, c, qk->inputs[1], &m->scale, &m->matched);
  return true;
}

// K^T written as Reshape(Transpose(Reshape(X, [L, S, D]), [0, 2, 1]), [*, D, S]) with
// L = the product of K's leading dims * (torch's dynamo exporter transposes a 4-D K this way
// through 3-D): K = X when X is [*, S, D], else — X of another shape with as many elements, e.g.
// the 5-D Expand of HF's repeat_kv, [B, Hkv, n, S, D] — a new Reshape(X, [*, S, D]) (the same
// elements: the first Reshape only views X), which unrepeat_heads can then take apart. The three
// layers are appended to *absorbed; else kNoValue.
ir::ValueId k_through_3d(ir::Graph& g, const pt::Consumers& c, ir::ValueId kt, std::vector<ir::Node*>* absorbed) {
  ir::Node* r2 = pt::single_use(g, c, kt) ? pt::producer(g, kt, OpKind::kReshape) : nullptr;
  if (!r2) return ir::kNoValue;
  ir::Node* tr = pt::single_use(g, c, r2->inputs[0]) ? pt::producer(g, r2->inputs[0], OpKind::kTranspose) : nullptr;
  if (!tr || tr->attr_ints("perm") != std::vector<int64_t>{0, 2, 1}) return ir::kNoValue;
  ir::Node* r1 = pt::single_use(g, c, tr->inputs[0]) ? pt::producer(g, tr->inputs[0], OpKind::kReshape) : nullptr;
  if (!r1) return ir::kNoValue;
  const ir::ValueId x = r1->inputs[0];
  const auto &xs = g.value(x).shape, &ts = g.value(kt).shape, &m = g.value(r1->outputs[0]).shape;
  if (!xs || !ts || !m || ts->size() < 3 || m->size() != 3) return ir::kNoValue;
  // Dims compare by value or by name (a dynamic profile's "batch"); an anonymous unknown dim
  // matches nothing.
  auto named = [](const ir::Dim& d) { return d.is_known() || !d.symbol.empty(); };
  const size_t r = ts->size();
  ir::SymShape ks(r);  // K's shape: K^T's with the last two dims swapped
  for (size_t i = 0; i < r; ++i) {
    ks[i] = (*ts)[i == r - 2 ? r - 1 : i == r - 1 ? r - 2 : i];
    if (!named(ks[i])) return ir::kNoValue;
  }
  // The first Reshape views X's elements in order as [L, S, D] (L the leading dims' product,
  // implied by the element count), so K = Reshape(X, [*, S, D]).
  if (!((*m)[1] == ks[r - 2]) || !((*m)[2] == ks[r - 1])) return ir::kNoValue;
  bool same = xs->size() == r;
  for (size_t i = 0; i < xs->size(); ++i) {
    if (!named((*xs)[i])) return ir::kNoValue;
    same = same && (*xs)[i] == ks[i];
  }
  if (same) {
    absorbed->insert(absorbed->end(), {r1, tr, r2});
    return x;
  }
  // Another shape with as many elements (the same named dims, the same product of the known
  // ones): a new Reshape, a named dim copied from X's dim at the same index (Reshape's 0).
  std::multiset<std::string> xsym, ksym;
  int64_t xn = 1, kn = 1;
  for (const ir::Dim& d : *xs) d.is_known() ? void(xn *= d.value) : void(xsym.insert(d.symbol));
  for (const ir::Dim& d : ks) d.is_known() ? void(kn *= d.value) : void(ksym.insert(d.symbol));
  if (xn != kn || xsym != ksym) return ir::kNoValue;
  Tensor dims(DataType::kInt64, {static_cast<int64_t>(r)});
  for (size_t i = 0; i < r; ++i) {
    if (ks[i].is_known()) {
      if (ks[i].value == 0) return ir::kNoValue;  // (0 would mean "copy")
      dims.data<int64_t>()[i] = ks[i].value;
    } else if (i < xs->size() && (*xs)[i] == ks[i]) {
      dims.data<int64_t>()[i] = 0;
    } else {
      return ir::kNoValue;
    }
  }
  absorbed->insert(absorbed->end(), {r1, tr, r2});
  std::string name = g.value(kt).name + "_k4d";
  while (g.find_value(name) != ir::kNoValue) name += "_";
  const ir::ValueId shape = g.add_value(name + "_shape", DataType::kInt64);
  g.value(shape).shape = ir::SymShape{ir::Dim::known(static_cast<int64_t>(r))};
  g.value(shape).constant = std::make_shared<Tensor>(std::move(dims));
  const ir::ValueId k = g.add_value(name, g.value(kt).dtype);
  g.value(k).shape = ks;
  ir::Node n;
  n.name = name;
  n.op = OpKind::kReshape;
  n.opset = g.opset_imports.count("") ? static_cast<int>(g.opset_imports.at("")) : 13;
  n.inputs = {x, shape};
  n.outputs = {k};
  n.origin = r1->origin;
  g.add_node(std::move(n));
  return k;
}

// K from K^T: bypasses or re-permutes a Transpose, or adds one.
ir::ValueId untranspose_k(ir::Graph& g, const pt::Consumers& c, ir::ValueId kt, const std::string& name,
                          std::vector<ir::Node*>* absorbed) {
  const int r = pt::rank_of(g, kt);
  if (const ir::ValueId k = k_through_3d(g, c, kt, absorbed); k != ir::kNoValue) return k;
  ir::Node* tr = pt::single_use(g, c, kt) ? pt::producer(g, kt, OpKind::kTranspose) : nullptr;
  if (tr && tr->has_attr("perm") && static_cast<int>(tr->attr_ints("perm").size()) == r) {
    std::vector<int64_t> p = tr->attr_ints("perm");
    if (is_swap_last_two(p)) {
      absorbed->push_back(tr);
      return tr->inputs[0];
    }
    std::swap(p[r - 2], p[r - 1]);
    tr->attrs["perm"] = ir::Attribute::of_ints(p);
    auto& shape = g.value(kt).shape;
    std::swap((*shape)[r - 2], (*shape)[r - 1]);
    return kt;
  }
  std::vector<int64_t> p(r);
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[r - 2], p[r - 1]);
  std::string vname = name + "_k";
  while (g.find_value(vname) != ir::kNoValue) vname += "_";
  const ir::ValueId k = g.add_value(vname, g.value(kt).dtype);
  ir::SymShape ks = *g.value(kt).shape;
  std::swap(ks[r - 2], ks[r - 1]);
  g.value(k).shape = ks;
  ir::Node t;
  t.name = vname + "_transpose";
  t.op = OpKind::kTranspose;
  t.opset = g.opset_imports.count("") ? static_cast<int>(g.opset_imports.at("")) : 13;
  t.inputs = {kt};
  t.outputs = {k};
  t.attrs["perm"] = ir::Attribute::of_ints(p);
  g.add_node(std::move(t));
  return k;
}

// The guard Where(IsNaN(p), 0, p) read by nothing else than each other: its output, with the two
// layers appended to *guard; else p itself.
ir::ValueId nan_guard(ir::Graph& g, const pt::Consumers& c, ir::ValueId p, std::vector<ir::Node*>* guard) {
  if (p == ir::kNoValue || static_cast<size_t>(p) >= c.size() || c[p].size() != 2 ||
      std::count(g.outputs.begin(), g.outputs.end(), p) != 0)
    return p;
  ir::Node* isnan = nullptr;
  ir::Node* where = nullptr;
  for (ir::NodeId id : c[p]) {
    ir::Node& n = g.node(id);
    if (n.removed) return p;
    if (n.op == OpKind::kIsNaN) isnan = &n;
    if (n.op == OpKind::kWhere) where = &n;
  }
  if (!isnan || !where || isnan->outputs.size() != 1 || where->inputs.size() != 3 || where->outputs.size() != 1 ||
      where->inputs[0] != isnan->outputs[0] || where->inputs[2] != p || !pt::single_use(g, c, isnan->outputs[0]))
    return p;
  double zero;
  if (!pt::scalar_constant(g, where->inputs[1], pt::rank_of(g, p), &zero) || zero != 0 ||
      g.value(where->outputs[0]).shape != g.value(p).shape)
    return p;
  guard->insert(guard->end(), {isnan, where});
  return where->outputs[0];
}

bool try_fuse(ir::Graph& g, const pt::Consumers& c, ir::Node& sm) {
  if (sm.inputs.empty() || sm.outputs.size() != 1) return false;
  const ir::ValueId x = sm.inputs[0];
  const int rank = pt::rank_of(g, x);
  const DataType dt = g.value(x).dtype;
  if (rank < 3 || !pt::is_float_dtype(dt)) return false;
  const int64_t axis = sm.attr_int("axis", sm.opset < 13 ? 1 : -1);
  if (axis != -1 && axis != rank - 1) return false;  // (pre-13 coercion over the last axis alone is the same)
  std::vector<ir::Node*> guard;
  const ir::ValueId p = nan_guard(g, c, sm.outputs[0], &guard);
  ir::Node* pv = pt::sole_consumer(g, c, p, OpKind::kMatMul);
  if (!pv || pv->inputs.size() != 2 || pv->inputs[0] != p) return false;
  Match m;
  if (!match_scores(g, c, x, &m)) return false;
  m.matched.insert(m.matched.end(), guard.begin(), guard.end());
  m.v = pv->inputs[1];
  for (ir::ValueId t : {m.q, m.kt, m.v})
    if (pt::rank_of(g, t) != rank || g.value(t).dtype != dt) return false;
  const auto& ss = *g.value(x).shape;
  // A bool mask equal to the causal pattern becomes is_causal; the layer has one mask input, so
  // a bool mask and an additive one together fuse only when the bool one is causal.
  if (m.keep_mask != ir::kNoValue && g.value(m.keep_mask).constant && ss[rank - 2].is_known() &&
      ss[rank - 1].is_known() && is_causal_mask(*g.value(m.keep_mask).constant, ss[rank - 2].value, ss[rank - 1].value)) {
    m.causal = true;
    m.keep_mask = ir::kNoValue;
  }
  // A mask that excludes nothing (an additive one of zeros, a bool one all true) is dropped, so the
  // layer runs mask-free instead of reading [*, Sq, Sk] values that change no score (0084).
  if (m.add_mask != ir::kNoValue && provably_all(g, m.add_mask, false)) m.add_mask = ir::kNoValue;
  if (m.keep_mask != ir::kNoValue && provably_all(g, m.keep_mask, true)) m.keep_mask = ir::kNoValue;
  if (m.keep_mask != ir::kNoValue && m.add_mask != ir::kNoValue) return false;
  const ir::ValueId mask = m.add_mask != ir::kNoValue ? m.add_mask : m.keep_mask;
  ir::ValueId k = untranspose_k(g, c, m.kt, sm.name, &m.absorbed);
  ir::ValueId v = m.v;
  // GQA: both K and V must drop their repeats (or neither) so they keep one head count.
  {
    std::vector<ir::Node*> rk, rv;
    // K from k_through_3d's new view of the repeat (dynamo's GQA export), or as HF writes it.
    const bool new_view = static_cast<size_t>(k) >= c.size();
    const ir::Node* r1 = new_view && m.absorbed.size() >= 3 ? m.absorbed[m.absorbed.size() - 3] : nullptr;
    const ir::ValueId k0 = new_view ? unrepeat_view(g, c, k, r1, &rk) : unrepeat_heads(g, c, k, &rk);
    const ir::ValueId v0 = unrepeat_heads(g, c, v, &rv);
    if (k0 != k && v0 != v && g.value(k0).shape && g.value(v0).shape &&
        (*g.value(k0).shape)[rank - 3] == (*g.value(v0).shape)[rank - 3]) {
      k = k0;
      v = v0;
      m.absorbed.insert(m.absorbed.end(), rk.begin(), rk.end());
      m.absorbed.insert(m.absorbed.end(), rv.begin(), rv.end());
    }
  }
  const ir::ValueId y = pv->outputs[0];
  m.matched.push_back(pv);
  m.matched.insert(m.matched.end(), m.absorbed.begin(), m.absorbed.end());
  sm.op = OpKind::kAttention;
  sm.inputs = {m.q, k, v};
  if (mask != ir::kNoValue) sm.inputs.push_back(mask);
  sm.outputs = {y};
  sm.attrs.clear();
  sm.attrs["scale"] = ir::Attribute::of_float(static_cast<float>(m.scale));
  sm.attrs["is_causal"] = ir::Attribute::of_int(m.causal ? 1 : 0);
  g.value(y).producer = sm.id;
  pt::absorb(sm, m.matched);
  return true;
}

}  // namespace

Status fuse_attention(ir::Graph& g, const PassOptions&) {
  auto consumers = g.consumers();
  const size_t n = g.nodes.size();  // layers added by a rewrite (K transposes) are not anchors
  // Each fusion adds at most one layer; reserving keeps the Node references of a match valid.
  g.nodes.reserve(n + static_cast<size_t>(std::count_if(g.nodes.begin(), g.nodes.end(), [](const ir::Node& x) {
                    return x.op == OpKind::kSoftmax;
                  })));
  for (size_t i = 0; i < n; ++i) {
    ir::Node& sm = g.nodes[i];
    if (sm.removed || sm.op != OpKind::kSoftmax) continue;
    if (try_fuse(g, consumers, g.nodes[i])) consumers = g.consumers();
  }
  // GQA repeats a fusion could not drop because a reader of theirs was still alive then — under
  // a dynamic profile the dynamo exporter's shape arithmetic of the K^T reshapes, dead once the
  // fusion took them: with the dead layers gone, K and V lose their repeats together.
  auto repeated = [&](ir::ValueId v) {
    const ir::Node* r = pt::producer(g, v, OpKind::kReshape);
    return r && (pt::producer(g, r->inputs[0], OpKind::kExpand) || pt::producer(g, r->inputs[0], OpKind::kTile));
  };
  bool retry = false;
  for (const ir::Node& a : g.nodes)
    retry |= !a.removed && a.op == OpKind::kAttention && a.inputs.size() >= 3 && repeated(a.inputs[1]) && repeated(a.inputs[2]);
  if (!retry) return Status::Ok();
  remove_dead_nodes(g);
  consumers = g.consumers();
  for (ir::Node& a : g.nodes) {
    if (a.removed || a.op != OpKind::kAttention || a.inputs.size() < 3) continue;
    const int rank = pt::rank_of(g, a.inputs[1]);
    std::vector<ir::Node*> rk, rv;
    const ir::ValueId k0 = unrepeat_heads(g, consumers, a.inputs[1], &rk), v0 = unrepeat_heads(g, consumers, a.inputs[2], &rv);
    if (rank < 3 || k0 == a.inputs[1] || v0 == a.inputs[2] || !g.value(k0).shape || !g.value(v0).shape ||
        !((*g.value(k0).shape)[rank - 3] == (*g.value(v0).shape)[rank - 3]))
      continue;
    a.inputs[1] = k0;
    a.inputs[2] = v0;
    rk.insert(rk.end(), rv.begin(), rv.end());
    pt::absorb(a, rk);
    consumers = g.consumers();
  }
  return Status::Ok();
}

}  // namespace kiln::passes
