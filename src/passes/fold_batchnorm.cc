// BatchNormalization folded into the preceding Conv/ConvTranspose/Gemm (inference mode):
//   BN(Conv(x, W, b)) with s = γ / sqrt(σ² + ε)
//     -> Conv(x, W · s[c_out], (b - μ) · s + β)
// (ONNX BatchNormalization: y = (x - mean) / sqrt(var + epsilon) * scale + B.)
// W's output-channel axis is 0 for Conv and 1 (per group) for ConvTranspose.
//   BN(Gemm(x, W, c)) on Y [M, N] (channel axis 1 = N; alpha = 1, beta = 1 or no C, C of N elements)
//     -> Gemm(x, W · s[n], (c - μ) · s + β)     (W's N axis: 0 when transB = 1, else 1)
// Applies when the conv output feeds only the BN, all parameters are float32 constants and
// the BN produces only its first output.
#include <cmath>

#include "passes/passes.h"

namespace kiln::passes {

namespace {

// BN(Gemm) -> Gemm with scaled weights and a new bias; false (graph unchanged) when not foldable.
bool fold_into_gemm(ir::Graph& g, ir::Node& gemm, ir::Node& bn) {
  // BN(Relu(Gemm)) is not BN(Gemm): an epilogue activation (fuse_gemm_activation) stops the fold.
  if (gemm.attr_float("alpha", 1.f) != 1.f || !gemm.attr_string("activation", "").empty()) return false;
  const Tensor* w = const_f32(g, gemm.inputs[1]);
  const bool has_c = gemm.inputs.size() > 2 && gemm.inputs[2] != ir::kNoValue;
  const Tensor* c = has_c ? const_f32(g, gemm.inputs[2]) : nullptr;
  if (!w || w->rank() != 2 || (has_c && (!c || gemm.attr_float("beta", 1.f) != 1.f))) return false;
  const bool trans_b = gemm.attr_int("transB", 0) != 0;
  const int64_t n = trans_b ? w->dim(0) : w->dim(1), k = trans_b ? w->dim(1) : w->dim(0);
  const Tensor *gamma = const_f32(g, bn.inputs[1]), *beta = const_f32(g, bn.inputs[2]),
               *mean = const_f32(g, bn.inputs[3]), *var = const_f32(g, bn.inputs[4]);
  if (!gamma || !beta || !mean || !var) return false;
  if (gamma->numel() != n || beta->numel() != n || mean->numel() != n || var->numel() != n) return false;
  if (c && c->numel() != n) return false;  // a bias broadcast over rows only
  const float eps = bn.attr_float("epsilon", 1e-5f);
  Tensor nw = w->clone();
  Tensor nb(DataType::kFloat32, {n});
  for (int64_t j = 0; j < n; ++j) {
    const float s = gamma->data<float>()[j] / std::sqrt(var->data<float>()[j] + eps);
    for (int64_t i = 0; i < k; ++i) nw.data<float>()[trans_b ? j * k + i : i * n + j] *= s;
    nb.data<float>()[j] = ((c ? c->data<float>()[j] : 0.f) - mean->data<float>()[j]) * s + beta->data<float>()[j];
  }
  const ir::ValueId wv = g.add_value(g.value(gemm.inputs[1]).name + "_bnfolded", DataType::kFloat32);
  g.value(wv).shape = g.value(gemm.inputs[1]).shape;
  g.value(wv).constant = std::make_shared<Tensor>(std::move(nw));
  const ir::ValueId bv = g.add_value(bn.name + "_bias_bnfolded", DataType::kFloat32);
  g.value(bv).shape = ir::SymShape{ir::Dim::known(n)};
  g.value(bv).constant = std::make_shared<Tensor>(std::move(nb));
  gemm.inputs.resize(3);
  gemm.inputs[1] = wv;
  gemm.inputs[2] = bv;
  gemm.attrs["beta"] = ir::Attribute::of_float(1.f);
  const ir::ValueId y = bn.outputs[0];
  gemm.outputs[0] = y;
  g.value(y).producer = gemm.id;
  gemm.origin.insert(gemm.origin.end(), bn.origin.begin(), bn.origin.end());
  bn.removed = true;
  return true;
}

}  // namespace

Status fold_batchnorm(ir::Graph& g, const PassOptions&) {
  auto consumers = g.consumers();
  for (auto& bn : g.nodes) {
    if (bn.removed || bn.op != ir::OpKind::kBatchNormalization || bn.inputs.size() < 5) continue;
    if (bn.attr_int("training_mode", 0) != 0) continue;
    bool extra_outputs = false;
    for (size_t k = 1; k < bn.outputs.size(); ++k) extra_outputs |= bn.outputs[k] != ir::kNoValue;
    if (extra_outputs) continue;
    const ir::ValueId x = bn.inputs[0];
    const ir::NodeId p = g.value(x).producer;
    if (p < 0 || consumers[x].size() != 1) continue;
    if (std::count(g.outputs.begin(), g.outputs.end(), x)) continue;
    ir::Node& conv = g.node(p);
    if (!conv.removed && conv.op == ir::OpKind::kGemm) {
      if (fold_into_gemm(g, conv, bn)) consumers = g.consumers();
      continue;
    }
    if (conv.removed || (conv.op != ir::OpKind::kConv && conv.op != ir::OpKind::kConvTranspose)) continue;
    const Tensor* w = const_f32(g, conv.inputs[1]);
    const Tensor* b = conv.inputs.size() > 2 ? const_f32(g, conv.inputs[2]) : nullptr;
    if (conv.inputs.size() > 2 && conv.inputs[2] != ir::kNoValue && !b) continue;
    const Tensor *gamma = const_f32(g, bn.inputs[1]), *beta = const_f32(g, bn.inputs[2]),
                 *mean = const_f32(g, bn.inputs[3]), *var = const_f32(g, bn.inputs[4]);
    if (!w || !gamma || !beta || !mean || !var || w->rank() < 3) continue;
    const int64_t groups = conv.attr_int("group", 1);
    const bool transpose = conv.op == ir::OpKind::kConvTranspose;
    const int64_t cout = transpose ? w->dim(1) * groups : w->dim(0);
    if (gamma->numel() != cout || beta->numel() != cout || mean->numel() != cout || var->numel() != cout) continue;
    if (b && b->numel() != cout) continue;
    const float eps = bn.attr_float("epsilon", 1e-5f);

    std::vector<float> scale(cout);
    for (int64_t c = 0; c < cout; ++c) scale[c] = gamma->data<float>()[c] / std::sqrt(var->data<float>()[c] + eps);
    Tensor nw = w->clone();
    const int64_t inner = w->numel() / (w->dim(0) * w->dim(1));  // kernel spatial size
    for (int64_t i = 0; i < w->dim(0); ++i)
      for (int64_t j = 0; j < w->dim(1); ++j) {
        // Conv: W[cout, cin/g, k...]; ConvTranspose: W[cin, cout/g, k...], group of row i = i / (cin/g).
        const int64_t c = transpose ? (i / (w->dim(0) / groups)) * w->dim(1) + j : i;
        float* row = nw.data<float>() + (i * w->dim(1) + j) * inner;
        for (int64_t k = 0; k < inner; ++k) row[k] *= scale[c];
      }
    Tensor nb(DataType::kFloat32, {cout});
    for (int64_t c = 0; c < cout; ++c) {
      const float b0 = b ? b->data<float>()[c] : 0.f;
      nb.data<float>()[c] = (b0 - mean->data<float>()[c]) * scale[c] + beta->data<float>()[c];
    }
    const ir::ValueId wv = g.add_value(g.value(conv.inputs[1]).name + "_bnfolded", DataType::kFloat32);
    g.value(wv).constant = std::make_shared<Tensor>(std::move(nw));
    g.value(wv).shape = g.value(conv.inputs[1]).shape;
    const ir::ValueId bv = g.add_value(bn.name + "_bias_bnfolded", DataType::kFloat32);
    g.value(bv).shape = ir::SymShape{ir::Dim::known(cout)};
    g.value(bv).constant = std::make_shared<Tensor>(std::move(nb));
    ir::Node& c2 = g.node(p);  // add_value may not move nodes, but re-fetch for clarity
    c2.inputs.resize(3);
    c2.inputs[1] = wv;
    c2.inputs[2] = bv;
    // The conv now produces the BN's output directly.
    const ir::ValueId y = bn.outputs[0];
    c2.outputs[0] = y;
    g.value(y).producer = c2.id;
    c2.origin.insert(c2.origin.end(), bn.origin.begin(), bn.origin.end());
    bn.removed = true;
    consumers = g.consumers();
  }
  return Status::Ok();
}

}  // namespace kiln::passes
