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
// their Q/DQ nodes, and a Gemm/MatMul with Q/DQ at its inputs that does not fuse records the
// rule that blocked it (ir::QdqBlocked, read by kiln build's summary and kiln inspect; 0062) (whose
// pairs fuse_pointwise turns into QDQ instructions: same numerics, float speed). Convolutions are
// fuse_qdq_conv's (docs/decisions/0078). Runs before constant folding, which would turn DQ(Wq)
// into a float weight. The Q/DQ nodes left unread go with eliminate_dead_layers.
#include <algorithm>
#include <cstring>

#include "ir/constant_folding.h"
#include "ir/layer_annotations.h"
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/qdq_layer_inputs.h"

namespace kiln::passes {

namespace {

namespace pt = pattern;
using namespace qdq_inputs;  // ActQuant, Blocked, activation_qdq, the shared rules

// Each fusion condition that fails gives one of these rules (the text kiln build's summary groups
// by and kiln inspect prints, ir::QdqBlocked) and the values that broke it.
constexpr const char* kRuleWeightForm = "weight not 2-D, of the activation's type, per tensor or per output channel";
constexpr const char* kRuleAlign = "K or N not a multiple of 16";
constexpr const char* kRuleGemmAttrs = "Gemm with transA, alpha or beta other than 0, 1, 1";
constexpr const char* kRuleShape = "activation shape unknown or not [*, K]";
constexpr const char* kRuleBias = "bias not a constant of N values";

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

}  // namespace

Status fuse_qdq_linear(ir::Graph& g, const PassOptions& opts) {
  fuse_each_layer(g, opts, fuse);
  return Status::Ok();
}

}  // namespace kiln::passes
