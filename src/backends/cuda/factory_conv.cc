// Conv and FusedConv (passes/fuse_conv_epilogue: bias, residual Add, activation): 2-D convolutions
// with constant weights, symmetric pads (auto_pad resolved as ONNX Conv's SAME_UPPER / SAME_LOWER /
// VALID), strides, dilations and groups (ONNX Operators.md Conv). NCHW in fp32, NHWC in fp16 /
// bf16 (or as the plan's "layout" attribute says); weights KCRS -> KRSC for NHWC, zero-padded to the
// input's padded C when the graph input is stored channel-padded; bias always present (zeros when
// absent). Tactics: cuDNN's legacy fused call, cuDNN's graph API (NHWC fp16/bf16) and, for a 1x1,
// stride-1, unpadded, ungrouped NHWC conv, the cuBLASLt GEMM [N*H*W, C] x [C, K] with bias,
// residual and ReLU in the epilogue, and for a conv whose kernel equals its stride (unpadded,
// ungrouped: ViT's patch embedding) the same GEMM over its input's windows gathered into rows
// (docs/decisions/0083); the tuner keeps the fastest (docs/decisions/0014).
#include <algorithm>
#include <iterator>

#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_conv(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const ir::Graph& g = ctx.graph();
  const GpuBuildOptions& o = ctx.options();
  const Shape& x = ctx.shape(n.inputs[0]);
  const auto& wc = g.value(n.inputs[1]).constant;
  // Beyond the 2-D constant-weight, constant-bias, symmetric-pad conv: the Nd path.
  if (x.size() != 4 || !wc || wc->rank() != 4) return lower_conv_nd(ctx, n, where);
  const std::vector<int64_t> k = {wc->dim(2), wc->dim(3)};
  const std::vector<int64_t> s = n.attr_ints("strides", {1, 1}), d = n.attr_ints("dilations", {1, 1});
  ConvParams p{};
  if (!symmetric_pads(n, x, k, s, d, &p.pad_h, &p.pad_w)) return lower_conv_nd(ctx, n, where);
  {
    const ir::ValueId bv = n.inputs.size() > 2 ? n.inputs[2] : ir::kNoValue;
    if (bv != ir::kNoValue && !g.value(bv).constant) return lower_conv_nd(ctx, n, where);
  }
  const Shape& y = ctx.shape(n.outputs[0]);
  p.n = x[0]; p.c = x[1]; p.h = x[2]; p.w = x[3];
  p.k = wc->dim(0); p.r = k[0]; p.sk = k[1]; p.oh = y[2]; p.ow = y[3];
  p.stride_h = s[0]; p.stride_w = s[1]; p.dil_h = d[0]; p.dil_w = d[1];
  p.groups = n.attr_int("group", 1);
  p.has_residual = n.op == ir::OpKind::kFusedConv && n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue;
  p.activation = n.op == ir::OpKind::kFusedConv ? n.attr_string("activation", "") : "";
  p.act_alpha = n.attr_float("act_alpha", 0);
  p.act_beta = n.attr_float("act_beta", 0);
  static const char* const kActivations[] = {"", "Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid",
                                             "HardSwish", "Silu", "Gelu", "GeluTanh"};
  if (std::find(std::begin(kActivations), std::end(kActivations), p.activation) == std::end(kActivations))
    return unsupported(where + "fused activation '" + p.activation + "'");
  const StorageType st = ctx.storage();
  const bool nhwc = ctx.nhwc(n, st != StorageType::kF32);
  KILN_ASSIGN_OR_RETURN(int xa, ctx.activation(n.inputs[0]));
  xa = ctx.as_layout(xa, nhwc);
  Shape w_shape = wc->shape();
  // A channel-padded input: C grows to Cp, the extra weights are zeros.
  const bool padded = ctx.channel_padded(n.inputs[0]);
  // The filter's channels per group (KRSC keeps C/groups innermost; padding needs one group).
  const int64_t cp = padded ? ctx.value_shape(xa)[1] : wc->dim(1);
  if (padded) {
    p.c_unpadded = p.c;
    p.c = cp;
    w_shape[1] = cp;
  }
  const size_t wcount = nhwc ? static_cast<size_t>(wc->dim(0) * k[0] * k[1] * cp) : static_cast<size_t>(wc->numel());
  std::vector<float> w;
  KILN_ASSIGN_OR_RETURN(int wa, ctx.upload(g.value(n.inputs[1]).name, n.inputs[1], wcount, w_shape, nhwc, [&] {
    // Float32 weights are read in place (a plan's weights buffer): no host copy before the
    // layout change / conversion.
    if (wc->dtype() != DataType::kFloat32) w = floats_of(*wc);
    const float* wsrc = wc->dtype() == DataType::kFloat32 ? wc->data<float>() : w.data();
    if (!nhwc) return wsrc;
    // KCRS -> KRSC (C padded to cp with zeros)
    const int64_t K = wc->dim(0), C = wc->dim(1), R = k[0], S = k[1];
    float* t = ctx.weight_scratch(wcount);
    if (cp != C) std::fill(t, t + wcount, 0.f);
    parallel_for(K, K * C * R * S, [&](int64_t a0, int64_t a1) {
      for (int64_t a = a0; a < a1; ++a)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t r = 0; r < R; ++r)
            for (int64_t q = 0; q < S; ++q) t[((a * R + r) * S + q) * cp + c] = wsrc[((a * C + c) * R + r) * S + q];
    });
    return static_cast<const float*>(t);
  }));
  const ir::ValueId bv = n.inputs.size() > 2 ? n.inputs[2] : ir::kNoValue;
  const Tensor* bc = bv != ir::kNoValue ? g.value(bv).constant.get() : nullptr;
  if (bv != ir::kNoValue && (!bc || bc->numel() != p.k)) return unsupported(where + "non-constant bias");
  std::vector<float> b;
  KILN_ASSIGN_OR_RETURN(int ba, ctx.upload(n.name + ":bias", bv, static_cast<size_t>(p.k), {p.k}, false, [&] {
    b = bc ? floats_of(*bc) : std::vector<float>(static_cast<size_t>(p.k), 0.f);
    return b.data();
  }));
  std::vector<int> ins = {xa, wa, ba};
  if (p.has_residual) {
    KILN_ASSIGN_OR_RETURN(int ra, ctx.activation(n.inputs[3]));
    ins.push_back(ctx.as_layout(ra, nhwc));
  }
  const int out = ctx.new_value(g.value(n.outputs[0]).name, y, st, nhwc);
  KILN_ASSIGN_OR_RETURN(auto layer, make_conv_layer(p, st, nhwc, o.precision.tf32));
  // In NHWC a 1x1, stride-1, unpadded, ungrouped conv is the GEMM [N*H*W, C] x [C, K]: offer
  // cuBLASLt (bias, residual as C, ReLU epilogue) beside cuDNN and let tuning choose.
  const bool gemm_like = nhwc && p.r == 1 && p.sk == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 &&
                         p.pad_w == 0 && p.groups == 1 && (p.activation.empty() || p.activation == "Relu");
  std::vector<std::pair<TacticSource, std::unique_ptr<Layer>>> impls;
  // In NHWC fp16/bf16, cuDNN's graph API (engine configurations with the epilogue fused) competes
  // with the legacy fused call; the tactic selector keeps the faster per layer.
  if (nhwc && o.sources.has(TacticSource::kCudnnGraph)) {
    if (auto graph = st == StorageType::kF32
                         ? nullptr
                         : make_conv_graph_layer(p, st == StorageType::kBF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF))
      impls.emplace_back(TacticSource::kCudnnGraph, std::move(graph));
  }
  if (gemm_like && o.sources.has(TacticSource::kCublasLt)) {
    GemmParams gp{};
    gp.m = p.n * p.h * p.w;
    gp.k = p.c;
    gp.n = p.k;
    gp.weight_is_nk = true;  // KRSC with R = S = 1 is [K, C]
    gp.has_bias = true;
    gp.relu = p.activation == "Relu";
    gp.has_residual = p.has_residual;
    KILN_ASSIGN_OR_RETURN(auto gemm, make_gemm_layer(gp, st, o.precision.tf32));
    impls.emplace_back(TacticSource::kCublasLt, std::move(gemm));
  }
  // A conv whose kernel equals its stride (ViT's patch embedding) is the GEMM over its input's
  // windows: a strided copy gathers them into the rows of P in the workspace, then cuBLASLt (bias,
  // residual, ReLU epilogue; NCHW: the output transposed into Y) — timed against cuDNN
  // (docs/decisions/0083).
  const bool patchify = !gemm_like && conv_is_patchify(p) && (p.activation.empty() || p.activation == "Relu") &&
                        !(p.has_residual && !nhwc);
  if (patchify && o.sources.has(TacticSource::kCublasLt)) {
    GemmParams gp{};
    gp.m = p.n * p.oh * p.ow;
    gp.k = p.c * p.r * p.sk;
    gp.n = p.k;
    gp.weight_is_nk = true;  // KRSC (NHWC) or KCRS (NCHW): [K, R*S*C] / [K, C*R*S], P's column order
    gp.has_bias = true;
    gp.relu = p.activation == "Relu";
    gp.has_residual = p.has_residual;
    gp.patches = plan_conv_patches(p, nhwc);
    KILN_ASSIGN_OR_RETURN(auto gemm, make_gemm_layer(gp, st, o.precision.tf32));
    impls.emplace_back(TacticSource::kCublasLt, std::move(gemm));
  }
  if (!impls.empty()) {
    impls.insert(impls.begin(), {TacticSource::kCudnn, std::move(layer)});
    layer = make_choice_layer(std::move(impls));
  }
  ctx.add_layer(std::move(layer), n.name, ins, {out}, n.origin);
  ctx.bind(n.outputs[0], out);
  return Status::Ok();
}

}  // namespace kiln::cuda
