// A GEMM followed by its activation becomes one layer with the activation in its epilogue
// (cuBLASLt's RELU_BIAS on the GPU, docs/decisions/0058):
//   Relu(Gemm(A, W, C))        ->  Gemm(A, W, C){activation="Relu"}
//   Relu(MatMulBias(A, W, b))  ->  MatMulBias(A, W, b){activation="Relu"}
//   Act(Reshape(Gemm(...)))    ->  Reshape(Gemm(...){activation=Act})   (element-wise Act commutes)
// Gemm only in the form the CUDA factory takes (2-D A, transA = 0, constant 2-D W, C absent or a
// constant vector of N), so every fused layer runs as one GEMM. The GEMM's output must be read by
// the Relu alone, and be neither a graph output nor read by a subgraph: the pre-activation values
// are gone afterwards. Gelu(approximate = "tanh") joins the same way as activation "GeluTanh"
// (GPT-2's MLP; the CUDA factory checks on the device that cuBLASLt's GELU epilogue computes
// that formula, else it runs the GEMM and Kiln's GELU kernel: docs/decisions/0058, addendum 2).
// The erf form (ONNX Gelu's default) stays a layer of its own.
// The activation's origin joins the GEMM's; its output becomes the GEMM's.
// fuse_gemm_residual, after it: Add(MatMulBias(A, W, b), R) -> MatMulBias(A, W, b, R), and
// Add(MatMul(A, W), R) -> MatMulBias(A, W, 0, R) for a constant 2-D W, for the
// residual adds of transformer blocks (cuBLASLt's C with beta = 1), when R has the product's
// shape and dtype, is an activation computed before the GEMM in the layer order, and the GEMM has
// no activation; the same single-reader conditions as above.
#include <algorithm>

#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln::passes {

namespace {

namespace pt = pattern;

// The Gemm forms passes::fuse_gemm_activation may give an activation: those lowered as one
// cuBLASLt GEMM (backends/cuda/factory_gemm.cc).
bool single_gemm_form(const ir::Graph& g, const ir::Node& n) {
  if (n.inputs.size() < 2 || n.attr_int("transA", 0) != 0) return false;
  const auto& w = g.value(n.inputs[1]).constant;
  if (!w || w->rank() != 2 || pt::rank_of(g, n.inputs[0]) != 2) return false;
  if (n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue) {
    const auto& c = g.value(n.inputs[2]).constant;
    const int64_t nn = n.attr_int("transB", 0) != 0 ? w->dim(0) : w->dim(1);
    if (!c || c->numel() != nn || (c->rank() == 2 && c->dim(0) != 1) || c->rank() > 2) return false;
  }
  return true;
}

}  // namespace

Status fuse_gemm_activation(ir::Graph& g, const PassOptions&) {
  const std::set<std::string> pinned = subgraph_reads(g);
  const pt::Consumers consumers = g.consumers();
  for (ir::Node& n : g.nodes) {
    if (n.removed || (n.op != ir::OpKind::kGemm && n.op != ir::OpKind::kMatMulBias) || n.outputs.size() != 1) continue;
    if (n.attrs.count("activation")) continue;  // already has one
    if (n.op == ir::OpKind::kGemm && !single_gemm_form(g, n)) continue;
    const ir::ValueId y = n.outputs[0];
    if (!pt::is_float_dtype(g.value(y).dtype) || pinned.count(g.value(y).name)) continue;
    // The activation reads the GEMM's result directly, or through one Reshape (a Gemm on 2-D rows
    // viewed back as [B, S, N] that fuse_matmul_add's unflatten_gemm did not turn into a
    // MatMulBias, e.g. when the rows were not made by a Reshape of [B, S, K]): an element-wise
    // function commutes with the Reshape, so Reshape(Gemm{act}) computes the same values.
    ir::Node* reshape = pt::sole_consumer(g, consumers, y, ir::OpKind::kReshape);
    const ir::ValueId z = reshape && reshape->outputs.size() == 1 && !pinned.count(g.value(reshape->outputs[0]).name)
                              ? reshape->outputs[0]
                              : y;
    if (z != y && !pt::is_float_dtype(g.value(z).dtype)) continue;
    ir::Node* relu = pt::sole_consumer(g, consumers, z, ir::OpKind::kRelu);
    std::string act = "Relu";
    if (!relu) {
      relu = pt::sole_consumer(g, consumers, z, ir::OpKind::kGelu);
      if (relu && relu->attr_string("approximate", "none") != "tanh") relu = nullptr;
      act = "GeluTanh";
    }
    if (!relu || relu->outputs.size() != 1 || relu->inputs.size() != 1) continue;
    n.attrs["activation"] = ir::Attribute::of_string(act);
    ir::Node& last = z == y ? n : *reshape;  // the layer whose output becomes the activation's
    last.outputs[0] = relu->outputs[0];
    g.value(relu->outputs[0]).producer = last.id;
    if (z != y) g.value(z).producer = -1;  // the Reshape's old output: read by nothing now
    n.origin.insert(n.origin.end(), relu->origin.begin(), relu->origin.end());
    relu->removed = true;
  }
  return Status::Ok();
}

Status fuse_gemm_residual(ir::Graph& g, const PassOptions&) {
  const std::set<std::string> pinned = subgraph_reads(g);
  const pt::Consumers consumers = g.consumers();
  for (ir::Node& n : g.nodes) {
    // A MatMul against a constant 2-D weight (no bias: Llama's projections) joins as a MatMulBias
    // with a zero bias — adding +0 after the product changes no value.
    const bool plain = n.op == ir::OpKind::kMatMul && n.inputs.size() == 2 && g.value(n.inputs[1]).constant &&
                       g.value(n.inputs[1]).constant->rank() == 2 && pt::rank_of(g, n.inputs[0]) >= 2 &&
                       g.value(n.inputs[1]).constant->dtype() == DataType::kFloat32;
    if (n.removed || (n.op != ir::OpKind::kMatMulBias && !plain) || n.outputs.size() != 1 ||
        (!plain && n.inputs.size() != 3))
      continue;
    if (!n.attr_string("activation", "").empty()) continue;
    const ir::ValueId y = n.outputs[0];
    const auto ys = g.value(y).shape;  // a copy: add_constant below grows g.values
    if (!pt::is_float_dtype(g.value(y).dtype) || pinned.count(g.value(y).name) || !ys) continue;
    ir::Node* add = pt::sole_consumer(g, consumers, y, ir::OpKind::kAdd);
    if (!add || add->outputs.size() != 1 || add->opset < 7) continue;
    const ir::ValueId r = pt::other_input(*add, y);
    if (r == ir::kNoValue || r == y || g.value(r).constant || g.value(r).dtype != g.value(y).dtype ||
        g.value(r).shape != ys)
      continue;
    bool known = true;
    for (const ir::Dim& d : *ys) known &= d.is_known() || !d.symbol.empty();
    if (!known) continue;
    // R must exist where the GEMM runs: layers run in index order.
    if (const ir::NodeId p = g.value(r).producer; p >= n.id) continue;
    if (plain) KILN_RETURN_IF_ERROR(pt::to_matmul_bias(g, n, g.value(n.inputs[1]).constant->dim(1)));
    n.inputs.push_back(r);
    n.outputs[0] = add->outputs[0];
    g.value(add->outputs[0]).producer = n.id;
    n.origin.insert(n.origin.end(), add->origin.begin(), add->origin.end());
    add->removed = true;
  }
  return Status::Ok();
}

}  // namespace kiln::passes
