// The "precision" and "layout" node attributes and the backends' layout policies (see
// layer_annotations.h).
#include "ir/layer_annotations.h"

namespace kiln::ir {

const char* precision_token(DataType t) {
  switch (t) {
    case DataType::kFloat32: return "fp32";
    case DataType::kFloat16: return "fp16";
    case DataType::kBFloat16: return "bf16";
    default: return "";
  }
}

DataType precision_from_token(const std::string& token) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16})
    if (token == precision_token(t)) return t;
  return DataType::kUndefined;
}

DataType node_precision(const Node& n) { return precision_from_token(n.attr_string("precision", "")); }

Layout tensor_core_layout_preference(const Graph& g, const Node& n) {
  switch (n.op) {
    // cuDNN convolution and pooling run NHWC on tensor cores; a layer constrained to fp32
    // (BuilderConfig::layer_precisions) runs as in an FP32 plan, NCHW.
    case OpKind::kConv:
    case OpKind::kFusedConv:
    case OpKind::kMaxPool:
    case OpKind::kAveragePool:
    case OpKind::kGlobalAveragePool:
    case OpKind::kGlobalMaxPool:
      return node_precision(n) == DataType::kFloat32 ? Layout::kNCHW : Layout::kNHWC;
    // Elementwise layers index any layout with broadcast strides.
    case OpKind::kAdd: case OpKind::kSub: case OpKind::kMul: case OpKind::kDiv:
    case OpKind::kMax: case OpKind::kMin: case OpKind::kPow:
    case OpKind::kRelu: case OpKind::kLeakyRelu: case OpKind::kSigmoid: case OpKind::kTanh:
    case OpKind::kExp: case OpKind::kLog: case OpKind::kSqrt: case OpKind::kReciprocal:
    case OpKind::kNeg: case OpKind::kAbs: case OpKind::kErf: case OpKind::kClip:
    case OpKind::kHardSigmoid: case OpKind::kHardSwish: case OpKind::kSoftplus: case OpKind::kElu:
    case OpKind::kGelu:
    case OpKind::kFusedPointwise:  // the optimizer's fused chains index inputs with broadcast strides too
      return Layout::kAny;
    // A channel Concat/Split (axis 1 of a 4-D tensor) copies contiguous channel runs per pixel in
    // NHWC: it follows its inputs (horizontal conv fusion's Split, Inception's Concat).
    case OpKind::kConcat:
    case OpKind::kSplit: {
      const ValueId y = n.outputs.empty() ? kNoValue : n.outputs[0];
      const auto& s = y == kNoValue ? std::nullopt : g.value(y).shape;
      int64_t axis = n.attr_int("axis", n.op == OpKind::kSplit ? 0 : 1);
      if (s && axis < 0) axis += static_cast<int64_t>(s->size());
      return s && s->size() == 4 && axis == 1 ? Layout::kAny : Layout::kNCHW;
    }
    default:
      return Layout::kNCHW;
  }
}

Layout row_major_layout_preference(const Graph&, const Node&) { return Layout::kNCHW; }

}  // namespace kiln::ir

namespace kiln::ir {

namespace {
constexpr const char* kQdqKeys[] = {"qdq_blocked", "qdq_blocked_detail", "qdq_blocked_nodes", "qdq_blocked_type"};
}  // namespace

void set_qdq_blocked(Node& n, const QdqBlocked& b) {
  const std::string* fields[] = {&b.rule, &b.detail, &b.nodes, &b.type};
  for (int i = 0; i < 4; ++i) n.attrs[kQdqKeys[i]] = Attribute::of_string(*fields[i]);
}

std::optional<QdqBlocked> qdq_blocked(const Node& n) {
  if (!n.has_attr(kQdqKeys[0])) return std::nullopt;
  QdqBlocked b;
  b.rule = n.attr_string(kQdqKeys[0], "");
  b.detail = n.attr_string(kQdqKeys[1], "");
  b.nodes = n.attr_string(kQdqKeys[2], "");
  b.type = n.attr_string(kQdqKeys[3], "");
  return b;
}

void keep_qdq_blocked(const Node& from, Node& to) {
  for (const char* k : kQdqKeys) {
    auto it = from.attrs.find(k);
    if (it != from.attrs.end()) to.attrs[k] = it->second;
  }
}

}  // namespace kiln::ir
