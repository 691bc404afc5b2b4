// Small matchers shared by the pattern-recognition passes (fuse_layernorm, fuse_rmsnorm,
// fuse_gelu, fuse_attention): walking single-use chains, reading scalar constants with a
// tolerance, last-axis reductions and parameters, and absorbing matched layers into the fused one. Header-only; every function is a pure query except absorb().
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace kiln::passes::pattern {

using Consumers = std::vector<std::vector<ir::NodeId>>;

// Exporters print constants to about 8 significant digits; 1e-4 relative tells the intended
// constant from any other.
constexpr double kConstRtol = 1e-4;

inline bool is_float_dtype(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

// v feeds exactly one layer and is not a graph output: the pattern may swallow it. A value made
// after `c` was computed (by the rewrite in progress) has no recorded consumers: not single-use
// (ASan found fuse_attention reading past `c` for the K it had just untransposed).
inline bool single_use(const ir::Graph& g, const Consumers& c, ir::ValueId v) {
  return v != ir::kNoValue && static_cast<size_t>(v) < c.size() && c[v].size() == 1 &&
         std::count(g.outputs.begin(), g.outputs.end(), v) == 0;
}

// The one live layer reading v when v is single-use and that layer is `op`; else nullptr.
inline ir::Node* sole_consumer(ir::Graph& g, const Consumers& c, ir::ValueId v, ir::OpKind op) {
  if (!single_use(g, c, v)) return nullptr;
  ir::Node& n = g.node(c[v][0]);
  return (!n.removed && n.op == op) ? &n : nullptr;
}

// The live layer producing v when it is `op` with a single (first) output; else nullptr.
inline ir::Node* producer(ir::Graph& g, ir::ValueId v, ir::OpKind op) {
  if (v == ir::kNoValue || g.value(v).producer < 0) return nullptr;
  ir::Node& n = g.node(g.value(v).producer);
  if (n.removed || n.op != op || n.outputs.empty() || n.outputs[0] != v) return nullptr;
  return &n;
}

// For a two-input layer reading v: the other input (v itself for op(v, v)); kNoValue otherwise.
inline ir::ValueId other_input(const ir::Node& n, ir::ValueId v) {
  if (n.inputs.size() != 2) return ir::kNoValue;
  if (n.inputs[0] == v) return n.inputs[1];
  if (n.inputs[1] == v) return n.inputs[0];
  return ir::kNoValue;
}

// A one-element numeric constant whose rank does not exceed max_rank (so it broadcasts
// without changing the other operand's shape); its value in *out.
inline bool scalar_constant(const ir::Graph& g, ir::ValueId v, int max_rank, double* out) {
  if (v == ir::kNoValue) return false;
  const auto& t = g.value(v).constant;
  if (!t || !t->is_tensor() || t->numel() != 1 || t->rank() > max_rank) return false;
  if (t->dtype() == DataType::kString || t->dtype() == DataType::kBool) return false;
  *out = tensor_to_doubles(*t)[0];
  return std::isfinite(*out);
}

inline bool near(double v, double ref) { return std::fabs(v - ref) <= kConstRtol * std::fabs(ref); }

// A scalar constant within kConstRtol of ref.
inline bool is_const_near(const ir::Graph& g, ir::ValueId v, int max_rank, double ref) {
  double c;
  return scalar_constant(g, v, max_rank, &c) && near(c, ref);
}

// The value's rank when its shape is known, else -1.
inline int rank_of(const ir::Graph& g, ir::ValueId v) {
  const auto& s = g.value(v).shape;
  return s ? static_cast<int>(s->size()) : -1;
}

// ReduceMean(·, axes=[-1] or [rank-1], keepdims=1).
inline bool mean_over_last_axis(const ir::Graph& g, const ir::Node& rm, int rank) {
  if (rank < 1 || rm.attr_int("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes;
  if (rm.opset >= 18) {
    if (rm.inputs.size() < 2 || rm.inputs[1] == ir::kNoValue) return false;  // reduces everything
    const auto& t = g.value(rm.inputs[1]).constant;
    if (!t || (t->dtype() != DataType::kInt64 && t->dtype() != DataType::kInt32)) return false;
    for (double a : tensor_to_doubles(*t)) axes.push_back(static_cast<int64_t>(a));
  } else {
    axes = rm.attr_ints("axes");
  }
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

// A constant of dtype `dt` holding d values along the last axis (other dims 1, rank <= x's), so
// multiplying/adding it leaves x's shape unchanged; returned as a [d] tensor.
inline std::optional<Tensor> last_axis_param(const ir::Graph& g, ir::ValueId v, DataType dt, int rank, int64_t d) {
  const auto& t = g.value(v).constant;
  if (!t || !t->is_tensor() || t->dtype() != dt || t->rank() < 1 || t->rank() > rank || t->dim(-1) != d ||
      t->numel() != d)
    return std::nullopt;
  return t->reshaped({d});
}

// The layer `n` reading `x` that divides it by s = Sqrt(·), as LayerNorm / RMSNorm exports write
// it: Div(x, s), Mul(x, Reciprocal(s)) or Mul(x, Div(1, s)). Sets *s and appends the layers in
// between (Reciprocal / Div) to *chain; false when `n` is none of these.
inline bool normalizer_of(ir::Graph& g, const Consumers& c, ir::Node& n, ir::ValueId x, ir::ValueId* s,
                          std::vector<ir::Node*>* chain) {
  if (n.op == ir::OpKind::kDiv && n.inputs.size() == 2 && n.inputs[0] == x && n.inputs[1] != x) {
    *s = n.inputs[1];
    return true;
  }
  if (n.op != ir::OpKind::kMul) return false;
  const ir::ValueId r = other_input(n, x);
  if (r == ir::kNoValue || r == x || !single_use(g, c, r)) return false;
  if (ir::Node* rec = producer(g, r, ir::OpKind::kReciprocal)) {
    *s = rec->inputs[0];
    chain->push_back(rec);
    return true;
  }
  ir::Node* div = producer(g, r, ir::OpKind::kDiv);
  if (div && div->inputs.size() == 2 && is_const_near(g, div->inputs[0], rank_of(g, x), 1.0)) {
    *s = div->inputs[1];
    chain->push_back(div);
    return true;
  }
  return false;
}

// `t` (or, without it, ones) as a new constant value [d] of dtype `dt`, named `name` or a
// variant of it not yet in the graph: the scale / bias input of a fused normalization.
inline std::optional<ir::ValueId> add_last_axis_constant(ir::Graph& g, std::string name, DataType dt, int64_t d,
                                                         std::optional<Tensor> t) {
  if (!t) {
    Tensor ones(DataType::kFloat64, {d});
    std::fill(ones.data<double>(), ones.data<double>() + d, 1.0);
    auto cast = cast_tensor(ones, dt);
    if (!cast.ok()) return std::nullopt;
    t = std::move(*cast);
  }
  while (g.find_value(name) != ir::kNoValue) name += "_";
  const ir::ValueId v = g.add_value(name, dt);
  g.value(v).shape = ir::SymShape{ir::Dim::known(d)};
  g.value(v).constant = std::make_shared<Tensor>(std::move(*t));
  return v;
}

// A new constant value holding `t` (its shape as known dims), named `base` with '_' appended
// until no value of the graph has that name.
inline ir::ValueId add_constant(ir::Graph& g, std::string base, Tensor t) {
  while (g.find_value(base) != ir::kNoValue) base += "_";
  const ir::ValueId v = g.add_value(base, t.dtype());
  ir::SymShape s;
  for (int64_t d : t.shape()) s.push_back(ir::Dim::known(d));
  g.value(v).shape = s;
  g.value(v).constant = std::make_shared<Tensor>(std::move(t));
  return v;
}

// A plain MatMul `n` against a constant [K, width] weight becomes MatMulBias(A, W, 0): a new
// float32 constant of `width` zeros as its bias (adding +0 changes no value), a value, no node.
inline Status to_matmul_bias(ir::Graph& g, ir::Node& n, int64_t width) {
  auto zero = Tensor::allocate(DataType::kFloat32, {width}, "zero bias");
  if (!zero.ok()) return zero.status();
  std::fill_n(zero->data<float>(), zero->numel(), 0.f);
  const ir::ValueId b = add_constant(g, n.name + "_zero_bias", std::move(*zero));
  n.op = ir::OpKind::kMatMulBias;
  n.inputs.push_back(b);
  return Status::Ok();
}

// `fused` takes over the matched layers: their names join its origin, they are removed.
inline void absorb(ir::Node& fused, const std::vector<ir::Node*>& matched) {
  for (ir::Node* n : matched) {
    if (n == &fused) continue;
    fused.origin.insert(fused.origin.end(), n->origin.begin(), n->origin.end());
    n->removed = true;
  }
}

// Turns `anchor` into the fused normalization `op` (LayerNormalization, RMSNormalization) over
// the last axis: `inputs`, epsilon `eps`, output `y` (the pattern's last value); `matched`
// layers are absorbed.
inline void rewrite_as_last_axis_norm(ir::Graph& g, ir::Node& anchor, ir::OpKind op, int opset,
                                      std::vector<ir::ValueId> inputs, double eps, ir::ValueId y,
                                      const std::vector<ir::Node*>& matched) {
  anchor.op = op;
  anchor.opset = std::max(anchor.opset, opset);
  anchor.inputs = std::move(inputs);
  anchor.attrs.clear();
  anchor.attrs["axis"] = ir::Attribute::of_int(-1);
  anchor.attrs["epsilon"] = ir::Attribute::of_float(static_cast<float>(eps));
  anchor.outputs = {y};
  g.value(y).producer = anchor.id;
  absorb(anchor, matched);
}

}  // namespace kiln::passes::pattern
