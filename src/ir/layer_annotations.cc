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

namespace {

// Explicit pads of a 2-D window op are the same at both ends (auto_pad SAME is not looked at).
bool symmetric_explicit_pads(const Node& n) {
  const std::vector<int64_t> p = n.attr_ints("pads", {0, 0, 0, 0});
  return p.size() == 4 && p[0] == p[2] && p[1] == p[3];
}

// A conv / pool the CUDA backend runs on its row-major N-D path (backends/cuda factory_conv_nd.cc,
// factory_pool.cc; docs/decisions/0070): an NHWC layout would only add Reformats around it.
bool cuda_nd_path(const Graph& g, const Node& n) {
  if (n.op == OpKind::kConv || n.op == OpKind::kFusedConv) {
    const auto& w = g.value(n.inputs[1]).constant;
    const bool runtime_bias = n.inputs.size() > 2 && n.inputs[2] != kNoValue && !g.value(n.inputs[2]).constant;
    return !w || w->rank() != 4 || runtime_bias || !symmetric_explicit_pads(n);
  }
  if (n.op == OpKind::kMaxPool || n.op == OpKind::kAveragePool) {
    const bool indices = n.outputs.size() > 1 && n.outputs[1] != kNoValue;
    const std::vector<int64_t> d = n.attr_ints("dilations", {1, 1});
    return indices || n.attr_ints("kernel_shape").size() != 2 || d != std::vector<int64_t>{1, 1} ||
           !symmetric_explicit_pads(n);
  }
  return false;
}

}  // namespace

Layout tensor_core_layout_preference(const Graph& g, const Node& n) {
  switch (n.op) {
    // cuDNN convolution and pooling run NHWC on tensor cores; a layer constrained to fp32
    // (BuilderConfig::layer_precisions) runs as in an FP32 plan, NCHW; so do the convs and pools
    // of the backend's row-major N-D path.
    case OpKind::kConv:
    case OpKind::kFusedConv:
    case OpKind::kMaxPool:
    case OpKind::kAveragePool:
      if (cuda_nd_path(g, n)) return Layout::kNCHW;
      return node_precision(n) == DataType::kFloat32 ? Layout::kNCHW : Layout::kNHWC;
    // The 8-bit conv runs NHWC at every precision (its GEMM and cuDNN INT8 tactics need it;
    // docs/decisions/0078).
    case OpKind::kQuantConv:
      return Layout::kNHWC;
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
