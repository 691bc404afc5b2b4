// Q/DQ nodes whose scale (and zero point) are constants say what the integers between them
// mean; this pass writes that on the quantized values as QuantParams (docs/decisions/0046):
//   y = QuantizeLinear(x, s, z)      ->  y.quant = {type(y), layout(s), s, z, saturate}
//   x = DequantizeLinear(q, s, z)    ->  q.quant = {type(q), layout(s), s, z}
// where layout(s) is qdq_layout's per-tensor / per-axis / per-block reading of the scale's shape
// against the quantized value's (kiln/quant_params.h). No node changes; fusion into quantized
// layers reads the annotations later. A value whose Q producer and DQ readers disagree (or whose
// readers disagree with each other) keeps none: its integers mean different things to different
// layers. Parameters that ONNX allows but no quantized layer can use (a scale of 0, negative or
// NaN; a zero point outside the type) are an error naming the node, as are inconsistent shapes.
#include <map>
#include <optional>

#include "core/numerics.h"
#include "passes/passes.h"

namespace kiln::passes {
namespace {

// The dims of `v` (-1 where unknown); false when even the rank is unknown.
bool value_dims(const ir::Value& v, std::vector<int64_t>* out) {
  if (!v.shape) return false;
  for (const ir::Dim& d : *v.shape) out->push_back(d.is_known() ? d.value : -1);
  return true;
}

// The QuantParams node `n` (Q or DQ) states for its quantized value `qv`; nullopt when they are
// not all known at build time (scale or zero point not constant, rank unknown for a non-scalar
// scale). Errors name the node.
StatusOr<std::optional<QuantParams>> params_of(const ir::Graph& g, const ir::Node& n, const ir::Value& qv) {
  using R = std::optional<QuantParams>;
  if (n.inputs.size() < 2 || n.inputs[1] == ir::kNoValue) return R{};
  const Tensor* scale = g.value(n.inputs[1]).constant.get();
  const bool has_zp = n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue;
  const Tensor* zp = has_zp ? g.value(n.inputs[2]).constant.get() : nullptr;
  if (!scale || (has_zp && !zp) || !quantizable_dtype(qv.dtype)) return R{};
  // QuantizeLinear-23's precision (the type x / scale is computed in) other than float32: the
  // quantized layers divide in float32, so such a Q is left to the reference kernel.
  if (const int64_t p = n.attr_int("quantize_precision", 0); n.op == ir::OpKind::kQuantizeLinear && p != 0 && p != 1) return R{};
  std::vector<int64_t> x_dims;
  const bool rank_known = value_dims(qv, &x_dims);
  if (!rank_known && scale->numel() != 1) return R{};
  const Shape zshape = zp ? zp->shape() : Shape{};
  auto layout = qdq_layout(x_dims, scale->shape(), zp ? &zshape : nullptr, n.attr_int("axis", 1), n.attr_int("block_size", 0));
  if (!layout.ok()) return invalid_model(n.describe() + ": " + layout.status().message());
  QuantParams q;
  q.type = qv.dtype;
  q.granularity = layout->granularity;
  q.axis = layout->axis;
  q.block_size = layout->block_size;
  if (q.granularity != QuantGranularity::kPerTensor) q.scale_shape.assign(scale->shape().begin(), scale->shape().end());
  for (int64_t i = 0; i < scale->numel(); ++i)
    q.scale.push_back(static_cast<float>(load_as_double(scale->dtype(), scale->raw(), i)));
  bool any_zp = false;
  std::vector<int32_t> z;
  for (int64_t i = 0; zp && i < zp->numel(); ++i) {
    const double v = load_as_double(zp->dtype(), zp->raw(), i);
    z.push_back(static_cast<int32_t>(v));
    any_zp = any_zp || v != 0;
  }
  if (any_zp) q.zero_point = std::move(z);  // all zero: stored as "no zero point"
  if (quant_saturate_applies(q.type) && n.op == ir::OpKind::kQuantizeLinear) q.saturate = n.attr_int("saturate", 1) != 0;
  const std::vector<int64_t>* known = rank_known ? &x_dims : nullptr;
  Status st = validate_quant_params(q, known, n.describe() + ": value '" + qv.name + "'");
  if (!st.ok()) return invalid_model(st.message());
  return R{std::move(q)};
}

// Equal parameters, saturate aside (it describes how a Q rounded, not what the integers mean).
bool same_meaning(QuantParams a, QuantParams b) {
  a.saturate = b.saturate = true;
  return a == b;
}

}  // namespace

Status annotate_qdq(ir::Graph& g, const PassOptions&) {
  // Per value: the parameters stated by its Q producer and DQ readers, and whether they agree.
  struct Seen {
    std::optional<QuantParams> params;
    bool conflict = false;
  };
  std::map<ir::ValueId, Seen> seen;
  for (const ir::Node& n : g.nodes) {
    if (n.removed) continue;
    const bool is_q = n.op == ir::OpKind::kQuantizeLinear;
    if (!is_q && n.op != ir::OpKind::kDequantizeLinear) continue;
    const ir::ValueId qid = is_q ? (n.outputs.empty() ? ir::kNoValue : n.outputs[0]) : (n.inputs.empty() ? ir::kNoValue : n.inputs[0]);
    if (qid == ir::kNoValue) continue;
    auto p = params_of(g, n, g.value(qid));
    if (!p.ok()) return p.status();
    Seen& s = seen[qid];
    if (!*p) {
      s.conflict = true;  // a reader or producer whose parameters are unknown: nothing certain
      continue;
    }
    if (!s.params) {
      s.params = std::move(**p);
    } else if (!same_meaning(*s.params, **p)) {
      s.conflict = true;
    } else if (is_q) {
      s.params->saturate = (*p)->saturate;  // the producer's rounding rule wins
    }
  }
  for (auto& [id, s] : seen)
    if (s.params && !s.conflict) g.value(id).quant = std::move(s.params);
  return Status::Ok();
}

}  // namespace kiln::passes
