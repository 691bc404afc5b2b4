// Q/DQ convolutions become one 8-bit layer (ONNX Q/DQ semantics; TensorRT's explicit-quantization
// rule "DQ(x), DQ(w) -> Conv (-> bias, residual Add, activation)"; docs/decisions/0078):
//   Relu?( Conv( DQ(Q(x, sx, zx), sx, zx),  DQ(Wq, sw, 0),  b? ) (+ r)? )
//     ->  QuantConv(x, Wq, sw as [K], b [K]?, r?){Conv's attributes, x_scale = sx, x_zero_point = zx,
//                                                activation = "Relu" | ""}
// where x's Q/DQ is per tensor (int8, or float8e4m3fn with zero point 0; the same conditions as
// fuse_qdq_linear's, qdq_layer_inputs.h), Wq [K, C/group, R, S] is a constant of the same 8-bit
// type quantized per tensor or per output channel (axis 0) with zero points 0, b is a constant of
// K values (or DQ of an int32 constant, evaluated first), r is a float activation of exactly the
// conv output's shape read by an Add that alone reads the conv, and the Relu alone reads the
// (conv + r). The conditions the CUDA tactics need are checked here, so a fused layer always has an
// 8-bit tactic (factory_quant_conv.cc): 2-D (X [N, C, H, W] of known C), group 1, explicit
// symmetric pads (auto_pad NOTSET / VALID); INT8: C and K multiples of 4 (cuDNN's INT8 NHWC rule);
// FP8: C and K multiples of 16 (the cuBLASLt FP8 GEMM for 1x1 convs, cuDNN's FP8 graph conv for
// the others); an int8 zero point other than 0 only without padding (cuDNN and the GEMM pad with
// code 0, which is not the zero point). Every Conv / ConvTranspose with Q/DQ at its inputs that does not fuse
// records the rule that blocked it (ir::QdqBlocked; decision 0062) and keeps its Q/DQ form, which
// fuse_pointwise turns into QDQ instructions (INT8/FP8 numerics, float speed). Runs before
// constant folding, which would turn DQ(Wq) into a float weight.
#include <algorithm>
#include <cmath>

#include "ir/layer_annotations.h"
#include "passes/passes.h"
#include "passes/pattern.h"
#include "passes/qdq_layer_inputs.h"

namespace kiln::passes {

namespace {

namespace pt = pattern;
using namespace qdq_inputs;  // ActQuant, Blocked, activation_qdq, the shared rules

constexpr const char* kRuleConvTranspose = "ConvTranspose has no 8-bit layer (keeps Q/DQ)";
constexpr const char* kRuleConvRank = "not a 2-D convolution of known input channels";
constexpr const char* kRuleConvWeightForm =
    "conv weight not 4-D, of the activation's type, per tensor or per output channel (axis 0)";
constexpr const char* kRuleConvGroup = "grouped convolution (no 8-bit grouped conv tactic)";
constexpr const char* kRuleConvPads = "auto_pad SAME or asymmetric pads";
constexpr const char* kRuleConvChannels = "C or K not a multiple of 4 (cuDNN INT8 NHWC)";
constexpr const char* kRuleConvFp8 = "FP8 conv with C or K not a multiple of 16 (cuBLASLt / cuDNN FP8 alignment)";
constexpr const char* kRuleConvBias = "bias not a constant of K values";
constexpr const char* kRuleInt8Off = "INT8 QuantConv not enabled (kiln build --quant-conv; decision 0078)";
constexpr const char* kRuleConvZpPad = "int8 activation zero point with padding (the 8-bit convs pad with code 0)";

// DQ(Wq, sw, 0) of a constant 4-D weight [K, C/group, R, S]: Wq as stored and one scale per K.
struct ConvWeight {
  const Tensor* w = nullptr;
  Tensor scale;  // [K] float32, > 0
  const ir::Node* dq = nullptr;
};

std::optional<ConvWeight> conv_weight_dq(const ir::Graph& g, ir::ValueId b, DataType type, Blocked* why) {
  why->rule = kRuleNoWeightDq;
  const ir::NodeId di = g.value(b).producer;
  if (di < 0) return std::nullopt;
  const ir::Node& dq = g.node(di);
  if (dq.removed || dq.op != ir::OpKind::kDequantizeLinear || dq.inputs.size() < 2) return std::nullopt;
  const Tensor* wq = constant_of(g, dq.inputs[0]);
  const Tensor* s = constant_of(g, dq.inputs[1]);
  const bool has_zp = dq.inputs.size() > 2 && dq.inputs[2] != ir::kNoValue;
  const Tensor* z = has_zp ? constant_of(g, dq.inputs[2]) : nullptr;
  why->rule = kRuleWeightNotConst;
  if (!wq || !s || (has_zp && !z)) return std::nullopt;
  why->rule = kRuleConvWeightForm;
  if (wq->dtype() != type || wq->rank() != 4 || s->dtype() != DataType::kFloat32) {
    why->detail = std::string(dtype_name(wq->dtype())) + " rank " + std::to_string(wq->rank()) + ", activation " +
                  dtype_name(type);
    return std::nullopt;
  }
  if (dq.attr_int("block_size", 0) != 0) {
    why->detail = "blocked (block_size " + std::to_string(dq.attr_int("block_size", 0)) + ")";
    return std::nullopt;
  }
  const int64_t k = wq->dim(0);
  if (s->numel() != 1) {
    int64_t axis = dq.attr_int("axis", 1);
    if (axis < 0) axis += 4;
    if (axis != 0 || s->numel() != k) {
      why->detail = "scale of " + std::to_string(s->numel()) + " values on axis " + std::to_string(axis);
      return std::nullopt;
    }
  }
  if (z)
    for (double v : tensor_to_doubles(*z))
      if (v != 0) {
        why->rule = kRuleWeightZp;
        why->detail = "zero point " + std::to_string(static_cast<int64_t>(v)) + " in DQ '" + dq.name + "'";
        return std::nullopt;
      }
  ConvWeight r;
  r.w = wq;
  r.scale = Tensor(DataType::kFloat32, {k});
  for (int64_t i = 0; i < k; ++i) {
    const float v = s->data<float>()[s->numel() == 1 ? 0 : i];
    if (!(v > 0) || !std::isfinite(v)) {
      why->detail = "scale " + std::to_string(v) + " of channel " + std::to_string(i);
      return std::nullopt;
    }
    r.scale.data<float>()[i] = v;
  }
  r.dq = &dq;
  return r;
}

bool same_known_shape(const ir::Graph& g, ir::ValueId a, ir::ValueId b) {
  const auto &sa = g.value(a).shape, &sb = g.value(b).shape;
  if (!sa || !sb || sa->size() != sb->size()) return false;
  for (size_t i = 0; i < sa->size(); ++i) {
    const ir::Dim &x = (*sa)[i], &y = (*sb)[i];
    if (x.is_known() ? !(y.is_known() && x.value == y.value) : (x.symbol.empty() || x.symbol != y.symbol)) return false;
  }
  return true;
}

// Fuses n when every condition holds; otherwise fills `why` (rule and values) and changes nothing.
bool fuse(ir::Graph& g, const pt::Consumers& consumers, const std::set<std::string>& pinned, ir::Node& n, Blocked* why,
          bool int8_quant_conv) {
  if (n.op == ir::OpKind::kConvTranspose) {
    why->rule = kRuleConvTranspose;
    return false;
  }
  if (n.op != ir::OpKind::kConv || n.inputs.size() < 2 || n.outputs.size() != 1) return false;
  auto act = activation_qdq(g, n.inputs[0], why);
  if (!act) return false;
  auto w = conv_weight_dq(g, n.inputs[1], act->type, why);
  if (!w) return false;
  const auto& xs = g.value(act->x).shape;
  if (!xs || xs->size() != 4 || !(*xs)[1].is_known()) {
    why->rule = kRuleConvRank;
    why->detail = xs ? "input rank " + std::to_string(xs->size()) : "input shape unknown";
    return false;
  }
  const int64_t group = n.attr_int("group", 1);
  if (group != 1) {
    why->rule = kRuleConvGroup;
    why->detail = "group " + std::to_string(group);
    return false;
  }
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  const std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
  if ((auto_pad != "NOTSET" && auto_pad != "VALID") || pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3]) {
    why->rule = kRuleConvPads;
    why->detail = "auto_pad " + auto_pad;
    return false;
  }
  const bool valid = auto_pad == "VALID";
  const int64_t c = (*xs)[1].value, k = w->w->dim(0);
  const std::string ck = "C = " + std::to_string(c) + ", K = " + std::to_string(k);
  if (act->type == DataType::kFloat8E4M3FN && (c % 16 || k % 16)) {
    why->rule = kRuleConvFp8;
    why->detail = ck;
    return false;
  }
  if (c % 4 || k % 4) {
    why->rule = kRuleConvChannels;
    why->detail = ck;
    return false;
  }
  if (act->zero_point != 0 && !valid && (pads[0] || pads[1])) {
    why->rule = kRuleConvZpPad;
    why->detail = "zero point " + std::to_string(act->zero_point);
    return false;
  }
  if (act->type != DataType::kFloat8E4M3FN && !int8_quant_conv) {
    why->rule = kRuleInt8Off;
    why->detail = ck;
    return false;
  }
  std::optional<Tensor> bias;
  if (n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue) {
    const Tensor* b = constant_of(g, n.inputs[2]);
    if (!b || b->dtype() != DataType::kFloat32 || b->numel() != k) {
      why->rule = kRuleConvBias;
      return false;
    }
    bias = Tensor(DataType::kFloat32, {k});
    std::copy(b->data<float>(), b->data<float>() + k, bias->data<float>());
  }
  // The epilogue: a residual Add that alone reads the conv, then a Relu that alone reads the sum.
  ir::ValueId y = n.outputs[0], residual = ir::kNoValue;
  std::vector<ir::Node*> absorbed;
  if (!pinned.count(g.value(y).name) && consumers[y].size() == 1) {
    ir::Node& a = g.node(consumers[y][0]);
    if (!a.removed && a.op == ir::OpKind::kAdd && a.inputs.size() == 2 && a.outputs.size() == 1) {
      const ir::ValueId other = a.inputs[0] == y ? a.inputs[1] : a.inputs[0];
      if (other != y && !constant_of(g, other) && g.value(other).dtype == DataType::kFloat32 &&
          same_known_shape(g, other, y) && same_known_shape(g, a.outputs[0], y)) {
        residual = other;
        absorbed.push_back(&a);
        y = a.outputs[0];
      }
    }
  }
  std::string activation;
  if (!pinned.count(g.value(y).name) && consumers[y].size() == 1) {
    ir::Node& r = g.node(consumers[y][0]);
    if (!r.removed && r.op == ir::OpKind::kRelu && r.outputs.size() == 1) {
      activation = "Relu";
      absorbed.push_back(&r);
      y = r.outputs[0];
    }
  }
  const std::string& base = n.name;
  // The weight stays as stored (the DQ's input constant is shared, not copied).
  const ir::ValueId wv = g.node(g.value(n.inputs[1]).producer).inputs[0];
  const ir::ValueId sv = pt::add_constant(g, base + "_weight_scale", std::move(w->scale));
  std::vector<ir::ValueId> ins = {act->x, wv, sv};
  ins.push_back(bias ? pt::add_constant(g, base + "_bias", std::move(*bias)) : ir::kNoValue);
  if (residual != ir::kNoValue) ins.push_back(residual);
  while (ins.back() == ir::kNoValue) ins.pop_back();
  std::vector<std::string> origin = n.origin;
  origin.push_back(act->dq->name);
  origin.push_back(w->dq->name);
  n.op = ir::OpKind::kQuantConv;
  n.inputs = ins;
  n.attrs["x_scale"] = ir::Attribute::of_float(act->scale);
  n.attrs["x_zero_point"] = ir::Attribute::of_int(act->zero_point);
  n.attrs["activation"] = ir::Attribute::of_string(activation);
  for (ir::Node* a : absorbed) {
    origin.insert(origin.end(), a->origin.begin(), a->origin.end());
    a->removed = true;
  }
  n.outputs[0] = y;
  g.value(y).producer = n.id;
  n.origin = origin;
  return true;
}

}  // namespace

Status fuse_qdq_conv(ir::Graph& g, const PassOptions& opts) {
  fuse_each_layer(g, opts, [&](ir::Graph& gr, const pt::Consumers& c, const std::set<std::string>& pinned, ir::Node& n,
                               Blocked* why) { return fuse(gr, c, pinned, n, why, opts.int8_quant_conv); });
  return Status::Ok();
}

}  // namespace kiln::passes
