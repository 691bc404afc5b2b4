// Vertical fusion of a convolution with its epilogue (TensorRT's conv+bias+add+activation):
//   act(Conv(x, W, b) + r)  ->  FusedConv(x, W, b, r){activation=act}
//   act(Conv(x, W, b))      ->  FusedConv(x, W, b){activation=act}
//   Conv(x, W, b) + r       ->  FusedConv(x, W, b, r)
// act: Relu, LeakyRelu, Clip (ReLU6), Sigmoid, Tanh, HardSigmoid, HardSwish, Gelu (fuse_gelu's
// layer; erf or tanh form) and SiLU/Swish t * Sigmoid(t) = Mul(t, Sigmoid(t)), t the conv (+ r)
// output. The residual r must have exactly the conv output's (inferred) shape — no
// broadcasting — and each intermediate must feed only the next layer of the pattern (SiLU's t
// feeds exactly its Sigmoid and its Mul).
#include <algorithm>
#include <limits>

#include "passes/passes.h"

namespace kiln::passes {

namespace {

bool single_internal_use(const ir::Graph& g, const std::vector<std::vector<ir::NodeId>>& consumers, ir::ValueId v) {
  return consumers[v].size() == 1 && std::count(g.outputs.begin(), g.outputs.end(), v) == 0;
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

// t * Sigmoid(t) as Sigmoid(t) and Mul(t, s) | Mul(s, t), t read by exactly those two layers
// and not a graph output, s read only by the Mul: the Mul, or nullptr.
ir::Node* silu_of(ir::Graph& g, const std::vector<std::vector<ir::NodeId>>& consumers, ir::ValueId t) {
  if (consumers[t].size() != 2 || std::count(g.outputs.begin(), g.outputs.end(), t) != 0) return nullptr;
  for (int k = 0; k < 2; ++k) {
    ir::Node& sig = g.node(consumers[t][k]);
    ir::Node& mul = g.node(consumers[t][1 - k]);
    if (sig.op != ir::OpKind::kSigmoid || mul.op != ir::OpKind::kMul || sig.outputs.size() != 1 || mul.inputs.size() != 2)
      continue;
    const ir::ValueId s = sig.outputs[0];
    const bool operands = (mul.inputs[0] == t && mul.inputs[1] == s) || (mul.inputs[0] == s && mul.inputs[1] == t);
    if (operands && single_internal_use(g, consumers, s) && consumers[s][0] == mul.id) return &mul;
  }
  return nullptr;
}

// Reads an activation layer into (name, alpha, beta); false if it is not fusable.
bool activation_of(const ir::Graph& g, const ir::Node& n, std::string* act, float* alpha, float* beta) {
  *alpha = 0;
  *beta = 0;
  switch (n.op) {
    case ir::OpKind::kRelu: *act = "Relu"; return true;
    case ir::OpKind::kSigmoid: *act = "Sigmoid"; return true;
    case ir::OpKind::kTanh: *act = "Tanh"; return true;
    case ir::OpKind::kHardSwish: *act = "HardSwish"; return true;
    case ir::OpKind::kGelu: {
      const std::string a = n.attr_string("approximate", "none");
      if (a != "none" && a != "tanh") return false;
      *act = a == "tanh" ? "GeluTanh" : "Gelu";
      return true;
    }
    case ir::OpKind::kLeakyRelu: *act = "LeakyRelu"; *alpha = n.attr_float("alpha", 0.01f); return true;
    case ir::OpKind::kHardSigmoid:
      *act = "HardSigmoid";
      *alpha = n.attr_float("alpha", 0.2f);
      *beta = n.attr_float("beta", 0.5f);
      return true;
    case ir::OpKind::kClip: {
      *act = "Clip";
      *alpha = -std::numeric_limits<float>::infinity();
      *beta = std::numeric_limits<float>::infinity();
      if (n.opset < 11) {
        *alpha = n.attr_float("min", *alpha);
        *beta = n.attr_float("max", *beta);
        return true;
      }
      for (size_t k = 1; k < n.inputs.size() && k < 3; ++k) {
        if (n.inputs[k] == ir::kNoValue) continue;
        const auto& t = g.value(n.inputs[k]).constant;
        if (!t || t->dtype() != DataType::kFloat32 || t->numel() != 1) return false;
        (k == 1 ? *alpha : *beta) = t->data<float>()[0];
      }
      return true;
    }
    default: return false;
  }
}

}  // namespace

Status fuse_conv_epilogue(ir::Graph& g, const PassOptions&) {
  auto consumers = g.consumers();
  for (auto& conv : g.nodes) {
    if (conv.removed || conv.op != ir::OpKind::kConv) continue;
    // X and W share one type (ONNX Conv's T); the weight is a constant, so its dtype is known
    // even where shape inference left the activation's dtype open.
    const auto& w = g.value(conv.inputs[1]).constant;
    if (!w || w->dtype() != DataType::kFloat32) continue;
    ir::ValueId y = conv.outputs[0];
    ir::ValueId residual = ir::kNoValue;
    std::vector<ir::Node*> absorbed;
    // Optional residual Add.
    if (single_internal_use(g, consumers, y)) {
      ir::Node& add = g.node(consumers[y][0]);
      if (add.op == ir::OpKind::kAdd && add.inputs.size() == 2 && add.opset >= 7) {
        const ir::ValueId other = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
        if (other != y && same_known_shape(g, other, y) && same_known_shape(g, add.outputs[0], y)) {
          residual = other;
          absorbed.push_back(&add);
          y = add.outputs[0];
        }
      }
    }
    // Optional activation.
    std::string act;
    float alpha = 0, beta = 0;
    if (ir::Node* mul = silu_of(g, consumers, y)) {
      act = "Silu";
      for (ir::NodeId c : consumers[y]) absorbed.push_back(&g.node(c));
      y = mul->outputs[0];
    } else if (single_internal_use(g, consumers, y)) {
      ir::Node& a = g.node(consumers[y][0]);
      if (activation_of(g, a, &act, &alpha, &beta)) {
        absorbed.push_back(&a);
        y = a.outputs[0];
      } else {
        act.clear();
      }
    }
    if (absorbed.empty()) continue;
    conv.op = ir::OpKind::kFusedConv;
    conv.inputs.resize(3, ir::kNoValue);
    if (residual != ir::kNoValue) conv.inputs.push_back(residual);
    conv.attrs["activation"] = ir::Attribute::of_string(act);
    conv.attrs["act_alpha"] = ir::Attribute::of_float(alpha);
    conv.attrs["act_beta"] = ir::Attribute::of_float(beta);
    conv.outputs[0] = y;
    g.value(y).producer = conv.id;
    for (ir::Node* n : absorbed) {
      conv.origin.insert(conv.origin.end(), n->origin.begin(), n->origin.end());
      n->removed = true;
    }
    consumers = g.consumers();
  }
  return Status::Ok();
}

}  // namespace kiln::passes
