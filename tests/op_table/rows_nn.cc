// CNN rows: Conv alone and FusedConv with each epilogue the optimizer fuses (passes/
// fuse_conv_epilogue.cc), pooling, Gemm / MatMul with a 2-D weight, Softmax / LogSoftmax, every
// pointwise op the CUDA backend lowers (alone and as one FusedPointwise program), the Reformat
// layers assign_layouts adds, and small CNNs (from the former gpu_model / gpu_pointwise /
// gpu_concat tests). Conv and pool rows are laid out NHWC in 16-bit CUDA plans (LayoutRule).
#include "op_table/op_table.h"

namespace kiln::testing::op_table {
namespace {

using ir::Attribute;
using ir::OpKind;

struct ConvArgs {
  int64_t n = 2, c = 8, hw = 8, k = 16, r = 3, stride = 1, pad = 1, groups = 1;
  bool bias = true;
  int64_t dilation = 1;
};

int64_t conv_out(const ConvArgs& a) { return (a.hw + 2 * a.pad - a.dilation * (a.r - 1) - 1) / a.stride + 1; }

// x -> Conv(W, b) [-> + residual input] [-> activation node(s) `act`]
OpCase conv_case(const ConvArgs& a, const std::string& act, bool residual, uint32_t seed) {
  TinyGraph t;
  const Shape xs = {a.n, a.c, a.hw, a.hw};
  const int64_t o = conv_out(a);
  const Shape ys = {a.n, a.k, o, o};
  auto x = t.input("x", xs);
  std::vector<ir::ValueId> ins = {x, t.constant("w", random_tensor({a.k, a.c / a.groups, a.r, a.r}, seed, -0.3f, 0.3f))};
  if (a.bias) ins.push_back(t.constant("b", random_tensor({a.k}, seed + 1)));
  std::map<std::string, Attribute> attrs = {{"pads", Attribute::of_ints({a.pad, a.pad, a.pad, a.pad})},
                                            {"strides", Attribute::of_ints({a.stride, a.stride})},
                                            {"group", Attribute::of_int(a.groups)},
                                            {"dilations", Attribute::of_ints({a.dilation, a.dilation})}};
  auto y = t.node(OpKind::kConv, "conv", ins, ys, attrs);
  std::vector<Tensor> in = {random_tensor(xs, seed + 2)};
  if (residual) {
    auto rv = t.input("r", ys);
    in.push_back(random_tensor(ys, seed + 3));
    y = t.node(OpKind::kAdd, "residual", {y, rv}, ys);
  }
  auto scalar = [&](const std::string& name, float v) { return t.constant(name, scalar_f(v)); };
  if (act == "Relu") y = t.node(OpKind::kRelu, "act", {y}, ys);
  else if (act == "LeakyRelu") y = t.node(OpKind::kLeakyRelu, "act", {y}, ys, {{"alpha", Attribute::of_float(0.1f)}});
  else if (act == "Clip") y = t.node(OpKind::kClip, "act", {y, scalar("lo", 0.f), scalar("hi", 0.6f)}, ys);
  else if (act == "Sigmoid") y = t.node(OpKind::kSigmoid, "act", {y}, ys);
  else if (act == "Tanh") y = t.node(OpKind::kTanh, "act", {y}, ys);
  else if (act == "HardSigmoid") y = t.node(OpKind::kHardSigmoid, "act", {y}, ys, {{"alpha", Attribute::of_float(0.25f)}});
  else if (act == "HardSwish") y = t.node(OpKind::kHardSwish, "act", {y}, ys);
  else if (act == "Gelu" || act == "GeluTanh") {
    y = t.node(OpKind::kGelu, "act", {y}, ys, {{"approximate", Attribute::of_string(act == "Gelu" ? "none" : "tanh")}});
    t.g.nodes.back().opset = 20;
  } else if (act == "Silu") {
    auto s = t.node(OpKind::kSigmoid, "act_sig", {y}, ys);
    y = t.node(OpKind::kMul, "act", {y, s}, ys);
  }
  t.g.outputs = {y};
  return {t.g, in};
}

Row conv(const std::string& name, const ConvArgs& a, const std::string& act, bool residual, uint32_t seed) {
  Row r;
  r.name = name;
  r.layout = LayoutRule::kFollowsPrecision;
  r.expect_ops = {act.empty() && !residual ? "Conv" : "FusedConv"};
  r.make = [=] { return conv_case(a, act, residual, seed); };
  return r;
}

// A conv whose kernel equals its stride (ViT's patch embedding, docs/decisions/0083): x [n, c, h, w]
// -> Conv(W [k, c, kh, kw], b, strides = kernel, no pads) [-> + residual] [-> Relu]. Only cuBLASLt
// and Kiln's sources are enabled, so the conv must run as the patchify GEMM (tactic "patchify"):
// the strided copy of the windows, the GEMM, and in NCHW (fp32) the transpose into Y.
Row patch_conv(const std::string& name, int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t kh, int64_t kw,
               bool relu, bool residual, uint32_t seed) {
  Row r;
  r.name = name;
  r.layout = LayoutRule::kFollowsPrecision;
  r.expect_ops = {relu || residual ? "FusedConv" : "Conv"};
  r.tactic_sources = "kiln,cublaslt";
  r.expect_tactic = "patchify";
  // A residual is read in Y's layout by the GEMM: NHWC (16-bit) plans only.
  if (residual) r.precisions = {Precision::kFp16, Precision::kBf16};
  r.make = [=] {
    TinyGraph t;
    const Shape xs = {n, c, h, w}, ys = {n, k, h / kh, w / kw};
    auto x = t.input("x", xs);
    std::vector<ir::ValueId> ins = {x, t.constant("w", random_tensor({k, c, kh, kw}, seed, -0.3f, 0.3f)),
                                    t.constant("b", random_tensor({k}, seed + 1))};
    auto y = t.node(OpKind::kConv, "conv", ins, ys,
                    {{"kernel_shape", Attribute::of_ints({kh, kw})}, {"strides", Attribute::of_ints({kh, kw})}});
    std::vector<Tensor> in = {random_tensor(xs, seed + 2)};
    if (residual) {
      in.push_back(random_tensor(ys, seed + 3));
      y = t.node(OpKind::kAdd, "residual", {y, t.input("r", ys)}, ys);
    }
    if (relu) y = t.node(OpKind::kRelu, "act", {y}, ys);
    t.g.outputs = {y};
    return OpCase{t.g, in};
  };
  return r;
}

Row pool(const std::string& name, OpKind op, const Shape& in, const Shape& out, std::map<std::string, Attribute> attrs) {
  Row r;
  r.name = name;
  r.layout = LayoutRule::kFollowsPrecision;
  r.make = [=] { return one_op(op, in, out, nullptr, attrs, random_tensor(in, 61)); };
  return r;
}

// y = op(x) elementwise, x of [2, 5, 4, 3]: `lo` > 0 keeps Log / Sqrt / Reciprocal defined.
Row unary(OpKind op, std::map<std::string, Attribute> attrs = {}, float lo = -2.f, float hi = 2.f) {
  Row r;
  r.name = std::string("Pointwise_") + ir::op_name(op);
  r.make = [=] {
    OpCase c = one_op(op, {2, 5, 4, 3}, {2, 5, 4, 3}, nullptr, attrs, random_tensor({2, 5, 4, 3}, 71, lo, hi));
    if (op == OpKind::kGelu) c.graph.nodes.back().opset = 20;
    return c;
  };
  return r;
}

// y = op(x, b) with b a second input broadcast from `bs` (or a constant when `const_b`).
Row binary(OpKind op, const Shape& bs, bool const_b, float lo = -2.f, float hi = 2.f) {
  Row r;
  std::string dims;
  for (int64_t d : bs) {
    if (!dims.empty()) dims.push_back('x');
    dims.append(std::to_string(d));
  }
  r.name = std::string("Pointwise_") + ir::op_name(op) + (const_b ? "_const_b" : "_input_b") + dims;
  r.make = [=] {
    TinyGraph t;
    const Shape xs = {2, 5, 4, 3};
    auto x = t.input("x", xs);
    std::vector<Tensor> in = {random_tensor(xs, 81, lo, hi)};
    ir::ValueId b;
    if (const_b) {
      b = t.constant("b", random_tensor(bs, 82, lo, hi));
    } else {
      b = t.input("b", bs);
      in.push_back(random_tensor(bs, 82, lo, hi));
    }
    t.g.outputs = {t.node(op, "y", {x, b}, xs)};
    return OpCase{t.g, in};
  };
  return r;
}

// x [2,8,6,6] -> Conv 3x3 (SiLU epilogue) -> * g[8,1,1] (+) y[1,8,1,1] -> Sigmoid -> * x ->
// HardSwish -> + z[6] -> Gelu(tanh); after the pipeline: FusedConv{Silu} + one FusedPointwise
// with inputs conv, g, y, x, z (per-channel, per-channel activation, full, last-dim broadcast).
OpCase conv_pointwise_program() {
  TinyGraph t;
  const Shape xs = {2, 8, 6, 6};
  auto x = t.input("x", xs);
  auto y = t.input("y", {1, 8, 1, 1});
  auto z = t.input("z", {6});
  auto w = t.constant("w", random_tensor({8, 8, 3, 3}, 101, -0.3f, 0.3f));
  auto b = t.constant("b", random_tensor({8}, 102));
  auto c = t.node(OpKind::kConv, "conv", {x, w, b}, xs, {{"pads", Attribute::of_ints({1, 1, 1, 1})}});
  auto cs = t.node(OpKind::kSigmoid, "conv_sig", {c}, xs);
  auto silu = t.node(OpKind::kMul, "conv_silu", {c, cs}, xs);
  auto m = t.node(OpKind::kMul, "scale", {silu, t.constant("g", random_tensor({8, 1, 1}, 103, 0.5f, 1.5f))}, xs);
  auto a = t.node(OpKind::kAdd, "shift", {m, y}, xs);
  auto s = t.node(OpKind::kSigmoid, "sig", {a}, xs);
  auto gx = t.node(OpKind::kMul, "gate", {s, x}, xs);
  auto hs = t.node(OpKind::kHardSwish, "hswish", {gx}, xs);
  auto az = t.node(OpKind::kAdd, "add_z", {hs, z}, xs);
  t.g.outputs = {t.node(OpKind::kGelu, "gelu", {az}, xs, {{"approximate", Attribute::of_string("tanh")}})};
  t.g.nodes.back().opset = 20;
  return {t.g, {random_tensor(xs, 104, -2.f, 2.f), random_tensor({1, 8, 1, 1}, 105), random_tensor({6}, 106)}};
}

// A program alone (no conv): every 4-D input is a graph input (stored NHWC in 16-bit plans).
OpCase pointwise_program_on_inputs() {
  TinyGraph t;
  const Shape xs = {2, 5, 4, 3};
  auto x = t.input("x", xs);
  auto y = t.input("y", xs);
  auto e = t.node(OpKind::kSub, "sub", {x, y}, xs);
  auto ab = t.node(OpKind::kAbs, "abs", {e}, xs);
  auto l = t.node(OpKind::kLog, "log", {t.node(OpKind::kAdd, "add1", {ab, t.constant("one", scalar_f(1.f))}, xs)}, xs);
  auto cl = t.node(OpKind::kClip, "clip", {l, t.constant("lo", scalar_f(0.1f)), t.constant("hi", scalar_f(0.9f))}, xs);
  t.g.outputs = {t.node(OpKind::kMul, "mul", {cl, t.constant("k", random_tensor({5, 1, 1}, 107, 0.5f, 2.f))}, xs)};
  return {t.g, {random_tensor(xs, 108, -2.f, 2.f), random_tensor(xs, 109, -2.f, 2.f)}};
}

// Conv (NHWC in 16-bit plans) -> Relu -> Reshape (row-major) -> Softmax: one Reformat layer.
OpCase conv_reshape_softmax() {
  TinyGraph t;
  auto x = t.input("x", {2, 8, 6, 6});
  auto w = t.constant("w", random_tensor({8, 8, 3, 3}, 31, -0.3f, 0.3f));
  auto c = t.node(OpKind::kConv, "conv", {x, w}, {2, 8, 6, 6}, {{"pads", Attribute::of_ints({1, 1, 1, 1})}});
  auto r = t.node(OpKind::kRelu, "relu", {c}, {2, 8, 6, 6});
  auto flat = t.node(OpKind::kReshape, "reshape", {r, t.constant("shape", ints({2, 288}))}, {2, 288});
  t.g.outputs = {t.node(OpKind::kSoftmax, "softmax", {flat}, {2, 288}, {{"axis", Attribute::of_int(-1)}})};
  return {t.g, {random_tensor({2, 8, 6, 6}, 32)}};
}

}  // namespace

// conv(3x3, pad 1) -> +bias -> relu -> maxpool 2x2 -> conv(1x1) + residual -> global avg pool
// -> flatten -> gemm -> softmax
OpCase small_cnn() {
  TinyGraph t;
  auto x = t.input("x", {2, 8, 16, 16});
  auto w1 = t.constant("w1", random_tensor({16, 8, 3, 3}, 21, -0.3f, 0.3f));
  auto b1 = t.constant("b1", random_tensor({16}, 22));
  auto c1 = t.node(OpKind::kConv, "conv1", {x, w1, b1}, {2, 16, 16, 16}, {{"pads", Attribute::of_ints({1, 1, 1, 1})}});
  auto r1 = t.node(OpKind::kRelu, "relu1", {c1}, {2, 16, 16, 16});
  auto p1 = t.node(OpKind::kMaxPool, "pool1", {r1}, {2, 16, 8, 8},
                   {{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({2, 2})}});
  auto w2 = t.constant("w2", random_tensor({16, 16, 1, 1}, 23, -0.3f, 0.3f));
  auto c2 = t.node(OpKind::kConv, "conv2", {p1, w2}, {2, 16, 8, 8});
  auto a2 = t.node(OpKind::kAdd, "add2", {c2, p1}, {2, 16, 8, 8});
  auto r2 = t.node(OpKind::kRelu, "relu2", {a2}, {2, 16, 8, 8});
  auto gp = t.node(OpKind::kGlobalAveragePool, "gap", {r2}, {2, 16, 1, 1});
  auto fl = t.node(OpKind::kFlatten, "flatten", {gp}, {2, 16});
  auto wf = t.constant("wf", random_tensor({10, 16}, 24));
  auto bf = t.constant("bf", random_tensor({10}, 25));
  auto fc = t.node(OpKind::kGemm, "fc", {fl, wf, bf}, {2, 10}, {{"transB", Attribute::of_int(1)}});
  auto sm = t.node(OpKind::kSoftmax, "softmax", {fc}, {2, 10});
  t.g.outputs = {fc, sm};
  return {t.g, {random_tensor({2, 8, 16, 16}, 26)}};
}

// An Inception block on x [n, 8, hw, hw] (1x1; 1x1 -> 3x3; 1x1 -> 3x3; pool -> 1x1, each conv +
// bias + ReLU), concatenated on channels, then a 1x1 conv reading the concat: horizontal 1x1
// fusion (a Split), channel Concat, in NHWC in 16-bit plans.
OpCase inception_block(int64_t n, int64_t hw, int64_t k1, int64_t r1) {
  TinyGraph t;
  auto x = t.input("x", {n, 8, hw, hw});
  auto cv = [&](const std::string& name, ir::ValueId in, int64_t k, int64_t c, int64_t r, uint32_t seed) {
    std::map<std::string, Attribute> a;
    if (r == 3) a["pads"] = Attribute::of_ints({1, 1, 1, 1});
    auto y = t.node(OpKind::kConv, name, {in, t.constant(name + "_w", random_tensor({k, c, r, r}, seed, -0.4f, 0.4f)),
                                          t.constant(name + "_b", random_tensor({k}, seed + 100))},
                    {n, k, hw, hw}, a);
    return t.node(OpKind::kRelu, name + "_relu", {y}, {n, k, hw, hw});
  };
  auto b1 = cv("b1", x, k1, 8, r1, 1);
  auto b2 = cv("b2b", cv("b2a", x, 16, 8, 1, 2), 32, 16, 3, 3);
  auto b3 = cv("b3b", cv("b3a", x, 8, 8, 1, 4), 16, 8, 3, 5);
  auto pl = t.node(OpKind::kMaxPool, "pool", {x}, {n, 8, hw, hw},
                   {{"kernel_shape", Attribute::of_ints({3, 3})}, {"pads", Attribute::of_ints({1, 1, 1, 1})}});
  auto b4 = cv("b4", pl, 16, 8, 1, 6);
  const int64_t total = k1 + 32 + 16 + 16;
  auto cat = t.node(OpKind::kConcat, "cat", {b1, b2, b3, b4}, {n, total, hw, hw}, {{"axis", Attribute::of_int(1)}});
  auto head = cv("head", cat, 8, total, 1, 7);
  t.g.outputs = {head, cat};
  return {t.g, {random_tensor({n, 8, hw, hw}, 11 + static_cast<uint32_t>(n + hw))}};
}

std::vector<Row> nn_rows() {
  ConvArgs c3;                      // 3x3, pad 1
  ConvArgs c1{2, 16, 8, 16, 1, 1, 0};  // 1x1 (a GEMM tactic candidate)
  ConvArgs strided{2, 8, 9, 16, 3, 2, 1, 2};  // stride 2, 2 groups, odd size
  ConvArgs dw{1, 8, 7, 8, 3, 1, 1, 8, false};  // depthwise, no bias
  ConvArgs dilated{2, 8, 11, 8, 3, 1, 2, 1, true, 2};  // dilation 2, pad 2
  std::vector<Row> rows = {
      conv("Conv_3x3", c3, "", false, 200),
      conv("Conv_1x1", c1, "", false, 210),
      conv("Conv_3x3_stride2_groups2", strided, "", false, 220),
      conv("Conv_depthwise_3x3_nobias", dw, "", false, 230),
      conv("Conv_3x3_dilation2", dilated, "", false, 235),
      conv("FusedConv_3x3_relu", c3, "Relu", false, 240),
      conv("FusedConv_3x3_leakyrelu", c3, "LeakyRelu", false, 250),
      conv("FusedConv_3x3_clip", c3, "Clip", false, 260),
      conv("FusedConv_3x3_sigmoid", c3, "Sigmoid", false, 270),
      conv("FusedConv_3x3_tanh", c3, "Tanh", false, 280),
      conv("FusedConv_3x3_hardsigmoid", c3, "HardSigmoid", false, 290),
      conv("FusedConv_3x3_hardswish", c3, "HardSwish", false, 300),
      conv("FusedConv_3x3_gelu", c3, "Gelu", false, 310),
      conv("FusedConv_3x3_gelutanh", c3, "GeluTanh", false, 320),
      conv("FusedConv_3x3_silu", c3, "Silu", false, 330),
      conv("FusedConv_3x3_residual", c3, "", true, 340),
      conv("FusedConv_3x3_residual_relu", c3, "Relu", true, 350),
      conv("FusedConv_1x1_residual_relu", c1, "Relu", true, 360),
      conv("FusedConv_stride2_groups2_relu", strided, "Relu", false, 370),
      // The patchify GEMM (kernel == stride): ViT-B/16's 16x16 over 3 channels, 4 channels, a
      // non-square kernel over a width it does not divide (the last columns are not read), batch 1.
      patch_conv("Conv_patchify_16x16_c3", 2, 3, 32, 32, 24, 16, 16, false, false, 372),
      patch_conv("Conv_patchify_4x4_c4_batch1", 1, 4, 12, 12, 16, 4, 4, false, false, 374),
      patch_conv("Conv_patchify_2x3_nonsquare", 2, 3, 8, 13, 8, 2, 3, false, false, 376),
      patch_conv("FusedConv_patchify_2x2_residual_relu", 2, 8, 8, 8, 16, 2, 2, true, true, 378),
      patch_conv("FusedConv_patchify_4x2_relu", 2, 5, 8, 6, 16, 4, 2, true, false, 379),
      pool("MaxPool_2x2_s2", OpKind::kMaxPool, {2, 8, 8, 8}, {2, 8, 4, 4},
           {{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({2, 2})}}),
      pool("MaxPool_3x3_pad1", OpKind::kMaxPool, {2, 8, 7, 7}, {2, 8, 7, 7},
           {{"kernel_shape", Attribute::of_ints({3, 3})}, {"pads", Attribute::of_ints({1, 1, 1, 1})}}),
      pool("AveragePool_3x3_s2_pad1", OpKind::kAveragePool, {2, 8, 9, 9}, {2, 8, 5, 5},
           {{"kernel_shape", Attribute::of_ints({3, 3})}, {"strides", Attribute::of_ints({2, 2})},
            {"pads", Attribute::of_ints({1, 1, 1, 1})}}),
      pool("AveragePool_2x2_count_include_pad", OpKind::kAveragePool, {2, 8, 6, 6}, {2, 8, 4, 4},
           {{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({2, 2})},
            {"pads", Attribute::of_ints({1, 1, 1, 1})}, {"count_include_pad", Attribute::of_int(1)}}),
      pool("GlobalAveragePool", OpKind::kGlobalAveragePool, {2, 16, 7, 7}, {2, 16, 1, 1}, {}),
      pool("GlobalMaxPool", OpKind::kGlobalMaxPool, {2, 16, 7, 7}, {2, 16, 1, 1}, {}),
      unary(OpKind::kRelu), unary(OpKind::kSigmoid), unary(OpKind::kTanh), unary(OpKind::kErf), unary(OpKind::kExp),
      unary(OpKind::kSqrt, {}, 0.1f, 4.f), unary(OpKind::kNeg), unary(OpKind::kAbs),
      unary(OpKind::kReciprocal, {}, 0.5f, 2.f), unary(OpKind::kLog, {}, 0.1f, 4.f), unary(OpKind::kSin, {}, -6.f, 6.f),
      unary(OpKind::kCos, {}, -6.f, 6.f), unary(OpKind::kHardSwish),
      unary(OpKind::kLeakyRelu, {{"alpha", Attribute::of_float(0.2f)}}), unary(OpKind::kElu, {{"alpha", Attribute::of_float(0.7f)}}),
      unary(OpKind::kHardSigmoid, {{"alpha", Attribute::of_float(0.3f)}, {"beta", Attribute::of_float(0.4f)}}),
      unary(OpKind::kGelu, {{"approximate", Attribute::of_string("none")}}),
      binary(OpKind::kAdd, {2, 5, 4, 3}, false), binary(OpKind::kSub, {5, 1, 1}, true),
      binary(OpKind::kMul, {1, 5, 1, 1}, false), binary(OpKind::kDiv, {3}, true, 0.5f, 2.f),
      binary(OpKind::kPow, {2, 1, 4, 1}, true, 0.5f, 2.f),
      // One-node FusedPointwise programs (factory_pointwise.cc lower_pw_op).
      unary(OpKind::kSelu, {{"alpha", Attribute::of_float(1.5f)}, {"gamma", Attribute::of_float(1.1f)}}),
      unary(OpKind::kCelu, {{"alpha", Attribute::of_float(0.8f)}}), unary(OpKind::kSoftplus), unary(OpKind::kSoftsign),
      unary(OpKind::kMish), unary(OpKind::kThresholdedRelu, {{"alpha", Attribute::of_float(0.4f)}}),
      unary(OpKind::kShrink, {{"lambd", Attribute::of_float(0.6f)}, {"bias", Attribute::of_float(0.3f)}}),
      unary(OpKind::kSign), unary(OpKind::kTan, {}, -1.2f, 1.2f), unary(OpKind::kAsin, {}, -0.95f, 0.95f),
      unary(OpKind::kAcos, {}, -0.95f, 0.95f), unary(OpKind::kAtan, {}, -4.f, 4.f), unary(OpKind::kSinh),
      unary(OpKind::kCosh), unary(OpKind::kAsinh, {}, -4.f, 4.f), unary(OpKind::kAcosh, {}, 1.1f, 4.f),
      unary(OpKind::kAtanh, {}, -0.9f, 0.9f),
      binary(OpKind::kPRelu, {5, 1, 1}, true), binary(OpKind::kPRelu, {4, 3}, false),
  };
  // Round / Ceil / Floor jump by 1 where fp16 / bf16 rounding of the input moves it across an
  // integer (or a half): fp32 only.
  for (OpKind op : {OpKind::kRound, OpKind::kCeil, OpKind::kFloor}) {
    Row r = unary(op, {}, -4.f, 4.f);
    r.precisions = {Precision::kFp32};
    r.tol = kMoveTol;
    rows.push_back(r);
  }
  // Mod on floats: fmod = 1 (C fmod) and fmod = 0 (Python's %, the divisor's sign), b broadcast.
  for (int fmod : {0, 1}) {
    Row r;
    r.name = std::string("Pointwise_Mod_fmod") + std::to_string(fmod);
    r.make = [fmod] {
      TinyGraph t;
      const Shape xs = {2, 5, 4, 3};
      auto x = t.input("x", xs);
      auto b = t.input("b", {4, 3});
      t.g.outputs = {t.node(OpKind::kMod, "y", {x, b}, xs, {{"fmod", Attribute::of_int(fmod)}})};
      return OpCase{t.g, {random_tensor(xs, 83, -5.f, 5.f), nonzero({4, 3}, 84, 1.5f, 0.f)}};
    };
    r.precisions = {Precision::kFp32};  // fp16 rounding of a and b moves the remainder by up to |b|
    rows.push_back(r);
  }
  // Clip with bounds that are graph inputs (activations), one of them omitted or both present.
  for (int which : {0, 1, 2}) {
    Row r;
    r.name = std::string("Pointwise_Clip_runtime_") + (which == 0 ? "min_max" : which == 1 ? "min" : "max");
    r.make = [which] {
      TinyGraph t;
      const Shape xs = {2, 5, 4, 3};
      auto x = t.input("x", xs);
      std::vector<ir::ValueId> ins = {x, ir::kNoValue, ir::kNoValue};
      std::vector<Tensor> in = {random_tensor(xs, 85, -2.f, 2.f)};
      if (which != 2) {
        ins[1] = t.input("lo", {});
        in.push_back(scalar_f(-0.5f));
      }
      if (which != 1) {
        ins[2] = t.input("hi", {});
        in.push_back(scalar_f(0.75f));
      }
      while (ins.back() == ir::kNoValue) ins.pop_back();
      t.g.outputs = {t.node(OpKind::kClip, "y", ins, xs)};
      return OpCase{t.g, in};
    };
    rows.push_back(r);
  }
  // Softmax / LogSoftmax over a middle axis (opset 13+: one axis), Hardmax over a middle and the
  // last axis (its ties: the first maximum; random data has none).
  struct AxisCase {
    OpKind op;
    int64_t axis;
  };
  for (const AxisCase& a : std::vector<AxisCase>{{OpKind::kSoftmax, 1}, {OpKind::kLogSoftmax, 0}, {OpKind::kHardmax, 1},
                                                 {OpKind::kHardmax, -1}}) {
    Row r;
    r.name = std::string(ir::op_name(a.op)) + "_axis" + (a.axis < 0 ? "_last" : std::to_string(a.axis));
    r.make = [a] {
      return one_op(a.op, {3, 6, 5}, {3, 6, 5}, nullptr, {{"axis", Attribute::of_int(a.axis)}},
                    random_tensor({3, 6, 5}, 95, -3.f, 3.f));
    };
    if (a.op == OpKind::kHardmax) r.precisions = {Precision::kFp32};  // 16-bit rounding may tie two maxima
    rows.push_back(r);
  }
  // Pow with an integer exponent that is a graph input (float base), broadcast.
  for (DataType et : {DataType::kInt32, DataType::kInt64}) {
    Row r;
    r.name = std::string("Pointwise_Pow_int_exponent_") + dtype_name(et);
    r.make = [et] {
      TinyGraph t;
      const Shape xs = {2, 5, 3};
      auto x = t.input("x", xs);
      auto e = int_input(t, "e", {5, 1}, et);
      t.g.outputs = {t.node(OpKind::kPow, "y", {x, e}, xs)};
      return OpCase{t.g, {random_tensor(xs, 97, -2.f, 2.f), int_tensor(et, {5, 1}, -2, 3, 98)}};
    };
    rows.push_back(r);
  }
  // Variadic Max / Min / Sum / Mean: three inputs broadcast together, and one input.
  for (OpKind op : {OpKind::kMax, OpKind::kMin, OpKind::kSum, OpKind::kMean}) {
    for (int count : {1, 3}) {
      Row r;
      r.name = std::string("Variadic_") + ir::op_name(op) + "_" + std::to_string(count) + "_inputs";
      r.make = [op, count] {
        TinyGraph t;
        const Shape xs = {2, 5, 4, 3};
        const std::vector<Shape> shapes = {xs, {5, 1, 1}, {3}};
        std::vector<ir::ValueId> ins;
        std::vector<Tensor> in;
        for (int k = 0; k < count; ++k) {
          ins.push_back(t.input("x" + std::to_string(k), shapes[k]));
          in.push_back(random_tensor(shapes[k], 86 + k, -2.f, 2.f));
        }
        t.g.outputs = {t.node(op, "y", ins, xs)};
        return OpCase{t.g, in};
      };
      rows.push_back(r);
    }
  }
  {
    Row r;
    r.name = "Pointwise_Clip_const_bounds";
    r.make = [] {
      return one_op(OpKind::kClip, {2, 5, 4, 3}, {2, 5, 4, 3},
                    [](TinyGraph& t) {
                      return std::vector<ir::ValueId>{t.constant("lo", scalar_f(-0.5f)), t.constant("hi", scalar_f(0.7f))};
                    },
                    {}, random_tensor({2, 5, 4, 3}, 72, -2.f, 2.f));
    };
    rows.push_back(r);
  }
  {
    Row r;
    r.name = "Gemm_transB_bias";
    r.make = [] {
      return one_op(OpKind::kGemm, {6, 16}, {6, 10},
                    [](TinyGraph& t) {
                      return std::vector<ir::ValueId>{t.constant("w", random_tensor({10, 16}, 91)),
                                                      t.constant("b", random_tensor({10}, 92))};
                    },
                    {{"transB", Attribute::of_int(1)}}, random_tensor({6, 16}, 93));
    };
    rows.push_back(r);
  }
  {
    Row r;
    r.name = "Gemm_alpha_beta_row_bias";
    r.make = [] {
      return one_op(OpKind::kGemm, {5, 12}, {5, 7},
                    [](TinyGraph& t) {
                      return std::vector<ir::ValueId>{t.constant("w", random_tensor({12, 7}, 94)),
                                                      t.constant("b", random_tensor({1, 7}, 95))};
                    },
                    {{"alpha", Attribute::of_float(0.5f)}, {"beta", Attribute::of_float(2.f)}}, random_tensor({5, 12}, 96));
    };
    rows.push_back(r);
  }
  {
    Row r;
    r.name = "MatMul_2d_weight";
    r.make = [] {
      return one_op(OpKind::kMatMul, {3, 7, 24}, {3, 7, 40},
                    [](TinyGraph& t) { return std::vector<ir::ValueId>{t.constant("w", random_tensor({24, 40}, 97, -0.3f, 0.3f))}; },
                    {}, random_tensor({3, 7, 24}, 98));
    };
    rows.push_back(r);
  }
  {  // N = 1001: fp16/bf16 rows of N are not 16-byte aligned, so the weight is stored padded to 1024
     // and the builder times the padded GEMM + compacting copy beside the direct one (gpu_layers.h)
    Row r;
    r.name = "MatMul_2d_weight_unaligned_n";
    r.make = [] {
      return one_op(OpKind::kMatMul, {2, 9, 32}, {2, 9, 1001},
                    [](TinyGraph& t) { return std::vector<ir::ValueId>{t.constant("w", random_tensor({32, 1001}, 87, -0.3f, 0.3f))}; },
                    {}, random_tensor({2, 9, 32}, 88));
    };
    rows.push_back(r);
  }
  {  // An LM head: a 16-bit MatMul whose output is only the graph's float32 output writes float32
     // itself (docs/decisions/0083): no fp16 -> fp32 output reformat in the plan.
    Row r;
    r.name = "MatMul_lm_head_f32_output";
    r.precisions = {Precision::kFp16, Precision::kBf16};
    r.expect_tactic = "->f32 out";
    r.absent_tactic = "-> f32";
    r.make = [] {
      return one_op(OpKind::kMatMul, {2, 9, 32}, {2, 9, 1001},
                    [](TinyGraph& t) { return std::vector<ir::ValueId>{t.constant("w", random_tensor({32, 1001}, 85, -0.3f, 0.3f))}; },
                    {}, random_tensor({2, 9, 32}, 86));
    };
    rows.push_back(r);
  }
  for (OpKind op : {OpKind::kSoftmax, OpKind::kLogSoftmax}) {
    Row r;
    r.name = std::string(ir::op_name(op)) + "_last_axis";
    r.make = [op] {
      return one_op(op, {3, 4, 37}, {3, 4, 37}, nullptr, {{"axis", Attribute::of_int(-1)}}, random_tensor({3, 4, 37}, 99, -4.f, 4.f));
    };
    rows.push_back(r);
  }
  {  // opset 11: the input coerced to 2-D at `axis` (rows = 2 * 3, cols = 4 * 5)
    Row r;
    r.name = "Softmax_opset11_axis2_coerced_2d";
    r.make = [] {
      OpCase c = one_op(OpKind::kSoftmax, {2, 3, 4, 5}, {2, 3, 4, 5}, nullptr, {{"axis", Attribute::of_int(2)}},
                        random_tensor({2, 3, 4, 5}, 100, -4.f, 4.f));
      c.graph.nodes[0].opset = 11;
      return c;
    };
    rows.push_back(r);
  }
  {
    Row r;
    r.name = "FusedPointwise_after_FusedConv_silu";
    r.layout = LayoutRule::kFollowsPrecision;
    r.expect_ops = {"FusedConv", "FusedPointwise"};
    r.make = conv_pointwise_program;
    rows.push_back(r);
  }
  {
    Row r;
    r.name = "FusedPointwise_on_graph_inputs";
    r.tol.fp32 = 1e-5;
    r.expect_ops = {"FusedPointwise"};
    r.make = pointwise_program_on_inputs;
    rows.push_back(r);
  }
  {
    Row r;
    r.name = "Reformat_conv_then_reshape";
    r.layout = LayoutRule::kFollowsPrecision;
    r.expect_ops = {"FusedConv", "Softmax"};
    r.expect_ops_16bit = {"Reformat"};
    r.make = conv_reshape_softmax;
    rows.push_back(r);
  }
  {
    Row r;
    r.name = "SmallCnn_cuda_graph";
    r.layout = LayoutRule::kFollowsPrecision;
    r.expect_ops = {"FusedConv", "MaxPool", "Gemm", "Softmax"};
    r.cuda_graph = true;
    r.make = small_cnn;
    rows.push_back(r);
  }
  struct Inc { const char* name; int64_t n, hw, k1, r1; };
  for (const Inc& k : {Inc{"Inception_b1_hw16_aligned", 1, 16, 16, 3}, Inc{"Inception_b1_split_views", 1, 16, 16, 1},
                       Inc{"Inception_b2_concat_copy", 2, 16, 16, 3}, Inc{"Inception_b1_unaligned_slices", 1, 5, 3, 1},
                       Inc{"Inception_b2_split_views", 2, 16, 16, 1}}) {
    Row r;
    r.name = k.name;
    r.layout = LayoutRule::kFollowsPrecision;
    r.expect_ops = {"FusedConv", "Concat"};
    r.make = [k] { return inception_block(k.n, k.hw, k.k1, k.r1); };
    rows.push_back(r);
  }
  return rows;
}

}  // namespace kiln::testing::op_table
