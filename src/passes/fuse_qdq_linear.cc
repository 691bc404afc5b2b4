// Q/DQ linear layers become one 8-bit layer (ONNX Q/DQ semantics; TensorRT's explicit
// quantization rule "DQ(x), DQ(w) -> MatMul/Gemm" ; docs/decisions/0055):
//   Gemm / MatMul( DQ(Q(x, sx, zx), sx, zx),  DQ(Wq, sw, 0) ) (+ bias)
//     ->  QuantLinear(x, Wq as [N, K], sw as [N], bias [N]){x_scale = sx, x_zero_point = zx}
// where x's Q/DQ is per tensor with constant scalar scale and zero point (int8, or float8e4m3fn
// with zero point 0) and equal in Q and DQ, Wq is a constant of the same 8-bit type quantized per
// tensor or per output channel (MatMul W [K, N]: axis 1; Gemm transB = 1 W [N, K]: axis 0, else
// axis 1) with zero points 0, Gemm has transA = 0, alpha = beta = 1 and a constant bias ([N], [1, N],
// [1] or a scalar), and a MatMul's only reader may be an Add of a constant [N] bias (absorbed);
// a Relu that alone reads the result becomes the layer's activation.
// A bias given as DQ(bq int32 constant, sb, zb) — ONNX Runtime's quantizer writes sb = sx * sw —
// is evaluated first (the same (bq - zb) * sb that constant folding would compute later).
// K and N must be multiples of 16 (the 8-bit tensor-core GEMMs' alignment); other layers keep
// their Q/DQ nodes, and a Conv/Gemm/MatMul with Q/DQ at its inputs that does not fuse records the
// rule that blocked it (ir::QdqBlocked, read by kiln build's summary and kiln inspect; 0062) (whose pairs fuse_pointwise turns into QDQ instructions: same numerics, float
// speed). Runs before constant folding, which would turn DQ(Wq) into a float weight. The Q/DQ
// nodes left unread go with eliminate_dead_layers.
#include <algorithm>
#include <cstring>

#include "ir/constant_folding.h"
#include "ir/layer_annotations.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln::passes {

namespace {

namespace pt = pattern;

const Tensor* constant_of(const ir::Graph& g, ir::ValueId v) {
  return v == ir::kNoValue ? nullptr : g.value(v).constant.get();
}

bool scalar_value(const ir::Graph& g, ir::ValueId v, double* out, DataType* dt) {
  const Tensor* t = constant_of(g, v);
  if (!t || t->numel() != 1) return false;
  *dt = t->dtype();
  *out = tensor_to_doubles(*t)[0];
  return true;
}

// x's per-tensor Q -> DQ: the float input x, its scale and zero point, the 8-bit type.
struct ActQuant {
  ir::ValueId x = ir::kNoValue;
  float scale = 0;
  int64_t zero_point = 0;
  DataType type = DataType::kUndefined;
  const ir::Node* dq = nullptr;
};

// Each fusion condition that fails gives one of these rules (the text kiln build's summary groups
// by and kiln inspect prints, ir::QdqBlocked) and the values that broke it.
constexpr const char* kRuleConv = "no 8-bit convolution layer yet (Conv keeps Q/DQ)";
constexpr const char* kRuleNoActQdq = "activation input is not a Q -> DQ pair";
constexpr const char* kRuleActParams = "activation scale / zero point not one constant per tensor, equal in Q and DQ";
constexpr const char* kRuleActType = "activation 8-bit type not int8 or fp8e4m3 with zero point 0";
constexpr const char* kRuleNoWeightDq = "weight is not a DequantizeLinear";
constexpr const char* kRuleWeightNotConst = "non-constant weight";
constexpr const char* kRuleWeightForm = "weight not 2-D, of the activation's type, per tensor or per output channel";
constexpr const char* kRuleWeightZp = "non-zero weight zero point";
constexpr const char* kRuleAlign = "K or N not a multiple of 16";
constexpr const char* kRuleGemmAttrs = "Gemm with transA, alpha or beta other than 0, 1, 1";
constexpr const char* kRuleShape = "activation shape unknown or not [*, K]";
constexpr const char* kRuleBias = "bias not a constant of N values";

struct Blocked {
  const char* rule = nullptr;
  std::string detail;
};

std::optional<ActQuant> activation_qdq(const ir::Graph& g, ir::ValueId a, Blocked* why) {
  why->rule = kRuleNoActQdq;
  const ir::NodeId di = g.value(a).producer;
  if (di < 0) return std::nullopt;
  const ir::Node& dq = g.node(di);
  if (dq.removed || dq.op != ir::OpKind::kDequantizeLinear || dq.inputs.size() < 3) return std::nullopt;
  const ir::NodeId qi = g.value(dq.inputs[0]).producer;
  if (qi < 0) return std::nullopt;
  const ir::Node& q = g.node(qi);
  if (q.removed || q.op != ir::OpKind::kQuantizeLinear || q.inputs.size() < 3) return std::nullopt;
  why->rule = kRuleActParams;
  if (q.attr_int("saturate", 1) != 1) {
    why->detail = "saturate = 0";
    return std::nullopt;
  }
  // QuantizeLinear-23's precision: the division x / scale in another type than float32 (the
  // fused kernels divide in float32; 0 = the scale's type, float32 below).
  if (const int64_t p = q.attr_int("quantize_precision", 0); p != 0 && p != 1) {
    why->detail = "precision = " + std::to_string(p);
    return std::nullopt;
  }
  double qs, ds, qz, dz;
  DataType qst, dst, qzt, dzt;
  if (!scalar_value(g, q.inputs[1], &qs, &qst) || !scalar_value(g, dq.inputs[1], &ds, &dst) ||
      !scalar_value(g, q.inputs[2], &qz, &qzt) || !scalar_value(g, dq.inputs[2], &dz, &dzt))
    return std::nullopt;
  if (qs != ds || qz != dz || qzt != dzt || qst != DataType::kFloat32 || dst != DataType::kFloat32 || !(qs > 0)) {
    why->detail = "Q scale " + std::to_string(qs) + " zp " + std::to_string(qz) + ", DQ scale " + std::to_string(ds) +
                  " zp " + std::to_string(dz);
    return std::nullopt;
  }
  if (qzt != DataType::kInt8 && !(qzt == DataType::kFloat8E4M3FN && qz == 0)) {
    why->rule = kRuleActType;
    why->detail = std::string(dtype_name(qzt)) + " zero point " + std::to_string(static_cast<int64_t>(qz));
    return std::nullopt;
  }
  if (g.value(q.inputs[0]).dtype != DataType::kFloat32) {
    why->rule = kRuleActType;
    why->detail = std::string("input ") + dtype_name(g.value(q.inputs[0]).dtype) + ", not float32";
    return std::nullopt;
  }
  ActQuant r;
  r.x = q.inputs[0];
  r.scale = static_cast<float>(qs);
  r.zero_point = static_cast<int64_t>(qz);
  r.type = qzt;
  r.dq = &dq;
  return r;
}

// DQ(Wq, sw, 0) of a constant 2-D weight whose output channels lie along `axis`: Wq as [N, K]
// and one scale per row.
struct WeightQuant {
  Tensor w;      // [N, K], int8 or float8e4m3fn
  Tensor scale;  // [N] float32
  const ir::Node* dq = nullptr;
};

std::optional<WeightQuant> weight_dq(const ir::Graph& g, ir::ValueId b, int out_axis, DataType type, Blocked* why) {
  why->rule = kRuleNoWeightDq;
  const ir::NodeId di = g.value(b).producer;
  if (di < 0) return std::nullopt;
  const ir::Node& dq = g.node(di);
  if (dq.removed || dq.op != ir::OpKind::kDequantizeLinear || dq.inputs.size() < 2) return std::nullopt;
  const Tensor* wq = constant_of(g, dq.inputs[0]);
  const Tensor* s = constant_of(g, dq.inputs[1]);
  const Tensor* z = dq.inputs.size() > 2 ? constant_of(g, dq.inputs[2]) : nullptr;
  why->rule = kRuleWeightNotConst;
  if (!wq || !s || (dq.inputs.size() > 2 && dq.inputs[2] != ir::kNoValue && !z)) return std::nullopt;
  why->rule = kRuleWeightForm;
  if (wq->dtype() != type || wq->rank() != 2 || s->dtype() != DataType::kFloat32) {
    why->detail = std::string(dtype_name(wq->dtype())) + " rank " + std::to_string(wq->rank()) + ", activation " +
                  dtype_name(type);
    return std::nullopt;
  }
  if (dq.attr_int("block_size", 0) != 0) {
    why->detail = "blocked (block_size " + std::to_string(dq.attr_int("block_size", 0)) + ")";
    return std::nullopt;
  }
  if (z)
    for (double v : tensor_to_doubles(*z))
      if (v != 0) {
        why->rule = kRuleWeightZp;
        why->detail = "zero point " + std::to_string(static_cast<int64_t>(v)) + " in DQ '" + dq.name + "'";
        return std::nullopt;
      }
  const int64_t n = wq->dim(out_axis), k = wq->dim(1 - out_axis);
  if (s->numel() != 1) {
    int64_t axis = dq.attr_int("axis", 1);
    if (axis < 0) axis += 2;
    if (axis != out_axis || s->numel() != n) {
      why->detail = "scale axis " + std::to_string(axis) + ", output channels on axis " + std::to_string(out_axis);
      return std::nullopt;
    }
  }
  WeightQuant r;
  r.w = Tensor(type, {n, k});
  r.scale = Tensor(DataType::kFloat32, {n});
  const uint8_t* src = wq->data<uint8_t>();
  uint8_t* dst = r.w.data<uint8_t>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) dst[i * k + j] = out_axis == 0 ? src[i * k + j] : src[j * n + i];
    r.scale.data<float>()[i] = s->data<float>()[s->numel() == 1 ? 0 : i];
  }
  for (int64_t i = 0; i < n; ++i)
    if (!(r.scale.data<float>()[i] > 0)) {
      why->detail = "scale " + std::to_string(r.scale.data<float>()[i]) + " of channel " + std::to_string(i);
      return std::nullopt;
    }
  r.dq = &dq;
  return r;
}

// A float constant holding N values (rank <= 2 with leading 1s, or one value) as [N].
std::optional<Tensor> bias_of(const Tensor* b, int64_t n) {
  if (!b || b->dtype() != DataType::kFloat32 || b->rank() > 2) return std::nullopt;
  if (b->rank() == 2 && b->dim(0) != 1) return std::nullopt;
  if (b->numel() != n && b->numel() != 1) return std::nullopt;
  Tensor out(DataType::kFloat32, {n});
  for (int64_t j = 0; j < n; ++j) out.data<float>()[j] = b->data<float>()[b->numel() == 1 ? 0 : j];
  return out;
}

// Fuses n when every condition holds; otherwise fills `why` (rule and values) and changes nothing.
bool fuse(ir::Graph& g, const pt::Consumers& consumers, const std::set<std::string>& pinned, ir::Node& n, Blocked* why) {
  const bool gemm = n.op == ir::OpKind::kGemm;
  if (n.op == ir::OpKind::kConv || n.op == ir::OpKind::kConvTranspose) {
    why->rule = kRuleConv;
    return false;
  }
  if (!gemm && n.op != ir::OpKind::kMatMul) return false;
  if (n.inputs.size() < 2 || n.outputs.size() != 1) return false;
  if (gemm && (n.attr_int("transA", 0) != 0 || n.attr_float("alpha", 1.f) != 1.f ||
               (n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue && n.attr_float("beta", 1.f) != 1.f))) {
    why->rule = kRuleGemmAttrs;
    return false;
  }
  auto act = activation_qdq(g, n.inputs[0], why);
  if (!act) return false;
  const int out_axis = gemm && n.attr_int("transB", 0) ? 0 : 1;
  auto w = weight_dq(g, n.inputs[1], out_axis, act->type, why);
  if (!w) return false;
  const int64_t nn = w->w.dim(0), k = w->w.dim(1);
  if (k % 16 || nn % 16) {
    why->rule = kRuleAlign;
    why->detail = "K = " + std::to_string(k) + ", N = " + std::to_string(nn);
    return false;
  }
  const auto& xs = g.value(act->x).shape;
  if (!xs || xs->empty() || (!gemm && xs->size() < 2) || (gemm && xs->size() != 2) ||
      (xs->back().is_known() && xs->back().value != k)) {
    why->rule = kRuleShape;
    return false;
  }
  std::optional<Tensor> bias;
  ir::Node* add = nullptr;
  if (gemm && n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue) {
    bias = bias_of(constant_of(g, n.inputs[2]), nn);
    if (!bias) {
      why->rule = kRuleBias;
      return false;
    }
  } else if (!gemm) {
    const ir::ValueId y = n.outputs[0];
    if (!pinned.count(g.value(y).name) && consumers[y].size() == 1) {
      ir::Node& c = g.node(consumers[y][0]);
      if (!c.removed && c.op == ir::OpKind::kAdd && c.inputs.size() == 2) {
        const ir::ValueId other = c.inputs[0] == y ? c.inputs[1] : c.inputs[0];
        const Tensor* bt = constant_of(g, other);
        // Only a bias that does not grow the product's shape: [N] or [1, N] (or one value).
        if (bt && bt->rank() <= static_cast<int>(xs->size())) {
          bias = bias_of(bt, nn);
          if (bias) add = &c;
        }
      }
    }
  }
  const std::string& base = n.name;
  const ir::ValueId wv = pt::add_constant(g, base + "_weight_q", std::move(w->w));
  const ir::ValueId sv = pt::add_constant(g, base + "_weight_scale", std::move(w->scale));
  std::vector<ir::ValueId> ins = {act->x, wv, sv};
  if (bias) ins.push_back(pt::add_constant(g, base + "_bias", std::move(*bias)));
  // Names first: act->dq and w->dq point into g.nodes, which add_constant does not touch.
  std::vector<std::string> origin = n.origin;
  origin.push_back(act->dq->name);
  origin.push_back(w->dq->name);
  n.op = ir::OpKind::kQuantLinear;
  n.inputs = ins;
  n.attrs.clear();
  n.attrs["x_scale"] = ir::Attribute::of_float(act->scale);
  n.attrs["x_zero_point"] = ir::Attribute::of_int(act->zero_point);
  if (add) {
    n.outputs[0] = add->outputs[0];
    g.value(add->outputs[0]).producer = n.id;
    origin.insert(origin.end(), add->origin.begin(), add->origin.end());
    add->removed = true;
  }
  // A ReLU that alone reads the result joins the epilogue.
  const ir::ValueId y = n.outputs[0];
  if (!pinned.count(g.value(y).name) && consumers[y].size() == 1) {
    ir::Node& r = g.node(consumers[y][0]);
    if (!r.removed && r.op == ir::OpKind::kRelu && r.outputs.size() == 1) {
      n.attrs["activation"] = ir::Attribute::of_string("Relu");
      n.outputs[0] = r.outputs[0];
      g.value(r.outputs[0]).producer = n.id;
      origin.insert(origin.end(), r.origin.begin(), r.origin.end());
      r.removed = true;
    }
  }
  n.origin = origin;
  return true;
}

// The Q/DQ nodes at a linear layer's activation (Q -> DQ) and weight (DQ) inputs, "" when neither
// input is dequantized; their 8-bit type in *type.
std::string qdq_at_inputs(const ir::Graph& g, const ir::Node& n, std::string* type) {
  std::string names;
  for (size_t i = 0; i < 2 && i < n.inputs.size(); ++i) {
    const ir::ValueId v = n.inputs[i];
    if (v == ir::kNoValue || g.value(v).producer < 0) continue;
    const ir::Node& dq = g.node(g.value(v).producer);
    if (dq.removed || dq.op != ir::OpKind::kDequantizeLinear || dq.inputs.empty()) continue;
    std::string one = dq.name;
    const ir::NodeId qi = g.value(dq.inputs[0]).producer;
    if (qi >= 0 && g.node(qi).op == ir::OpKind::kQuantizeLinear) one = g.node(qi).name + " -> " + one;
    names += (names.empty() ? "" : ", ") + one;
    const DataType t = g.value(dq.inputs[0]).dtype;
    if (type->empty()) *type = t == DataType::kInt8 || t == DataType::kUInt8 ? "int8"
                               : t == DataType::kFloat8E4M3FN ? "fp8e4m3" : t == DataType::kFloat8E5M2 ? "fp8e5m2" : "";
  }
  return names;
}

// Records on n why its Q/DQ did not fuse (ir::QdqBlocked), when it has Q/DQ at its inputs.
void record_blocked(ir::Graph& g, ir::Node& n, const Blocked& why) {
  ir::QdqBlocked b;
  b.nodes = qdq_at_inputs(g, n, &b.type);
  if (b.nodes.empty()) return;
  b.rule = why.rule;
  b.detail = why.detail;
  ir::set_qdq_blocked(n, b);
}

// DQ(bq int32 constant, ...) read by a Gemm's bias or an Add after a MatMul: folded to the float
// bias it stands for, so fuse() sees a constant.
void fold_int32_bias_dequantize(ir::Graph& g, const PassOptions& opts) {
  if (!opts.evaluator) return;
  for (ir::Node& n : g.nodes) {
    const bool gemm_bias = n.op == ir::OpKind::kGemm && n.inputs.size() > 2;
    if (n.removed || (!gemm_bias && n.op != ir::OpKind::kAdd)) continue;
    for (size_t i = gemm_bias ? 2 : 0; i < n.inputs.size(); ++i) {
      const ir::ValueId v = n.inputs[i];
      if (v == ir::kNoValue || g.value(v).producer < 0) continue;
      ir::Node& dq = g.node(g.value(v).producer);
      if (dq.removed || dq.op != ir::OpKind::kDequantizeLinear || dq.inputs.empty()) continue;
      const Tensor* bq = constant_of(g, dq.inputs[0]);
      if (!bq || bq->dtype() != DataType::kInt32) continue;
      ir::fold_constant_node(g, dq, *opts.evaluator);
    }
  }
}

}  // namespace

Status fuse_qdq_linear(ir::Graph& g, const PassOptions& opts) {
  fold_int32_bias_dequantize(g, opts);
  const pt::Consumers consumers = g.consumers();
  std::set<std::string> pinned;
  for (ir::ValueId v : g.outputs) pinned.insert(g.value(v).name);
  for (const std::string& name : subgraph_reads(g)) pinned.insert(name);
  for (ir::Node& n : g.nodes) {
    if (n.removed) continue;
    Blocked why;
    if (!fuse(g, consumers, pinned, n, &why) && why.rule) record_blocked(g, n, why);
  }
  return Status::Ok();
}

}  // namespace kiln::passes
