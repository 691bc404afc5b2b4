// Shared matchers of the Q/DQ layer fusions (qdq_layer_inputs.h).
#include "passes/qdq_layer_inputs.h"

#include "ir/constant_folding.h"
#include "ir/layer_annotations.h"

namespace kiln::passes::qdq_inputs {

namespace {

// The Q/DQ nodes at a layer's activation (Q -> DQ) and weight (DQ) inputs, "" when neither
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


}  // namespace

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
void fuse_each_layer(ir::Graph& g, const PassOptions& opts, const LayerFusion& fuse) {
  fold_int32_bias_dequantize(g, opts);
  const std::vector<std::vector<ir::NodeId>> consumers = g.consumers();
  std::set<std::string> pinned;
  for (ir::ValueId v : g.outputs) pinned.insert(g.value(v).name);
  for (const std::string& name : subgraph_reads(g)) pinned.insert(name);
  for (ir::Node& n : g.nodes) {
    if (n.removed) continue;
    Blocked why;
    if (!fuse(g, consumers, pinned, n, &why) && why.rule) record_blocked(g, n, why);
  }
}

void fold_int32_bias_dequantize(ir::Graph& g, const PassOptions& opts) {
  if (!opts.evaluator) return;
  for (ir::Node& n : g.nodes) {
    const bool gemm_bias = (n.op == ir::OpKind::kGemm || n.op == ir::OpKind::kConv) && n.inputs.size() > 2;
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

}  // namespace kiln::passes::qdq_inputs
