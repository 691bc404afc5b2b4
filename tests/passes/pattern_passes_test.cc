// Differential tests of the pattern-recognition passes (fuse_layernorm, fuse_gelu): exporters'
// decompositions become one layer with the same outputs; near misses stay as they are.
#include "passes/pass_test_util.h"

namespace kiln::testing {
namespace {

using ir::OpKind;

ir::ValueId scalar(TinyGraph& t, const std::string& name, float v) {
  return t.constant(name, Tensor::scalar(DataType::kFloat32, v));
}

// x - mean(x) over `axis`, squared via Pow(d, 2), normalized by Div; optional gamma/beta.
struct LayerNormGraph {
  TinyGraph t;
  ir::ValueId x, y;
  explicit LayerNormGraph(int64_t axis = -1, bool affine = true) {
    const Shape xs = {2, 3, 8};
    Shape rs = xs;
    rs[axis < 0 ? axis + 3 : axis] = 1;
    x = t.input("x", xs);
    auto mean = t.node(OpKind::kReduceMean, "mean", {x}, rs, {{"axes", ir::Attribute::of_ints({axis})}});
    auto d = t.node(OpKind::kSub, "sub", {x, mean}, xs);
    auto sq = t.node(OpKind::kPow, "pow", {d, scalar(t, "two", 2.f)}, xs);
    auto var = t.node(OpKind::kReduceMean, "var", {sq}, rs, {{"axes", ir::Attribute::of_ints({axis})}});
    auto ve = t.node(OpKind::kAdd, "add_eps", {var, scalar(t, "eps", 1e-5f)}, rs);
    auto s = t.node(OpKind::kSqrt, "sqrt", {ve}, rs);
    y = t.node(OpKind::kDiv, "div", {d, s}, xs);
    if (affine) {
      y = t.node(OpKind::kMul, "mul_gamma", {y, t.constant("gamma", random_tensor({8}, 21, 0.5f, 1.5f))}, xs);
      y = t.node(OpKind::kAdd, "add_beta", {t.constant("beta", random_tensor({8}, 22)), y}, xs);
    }
    t.g.outputs = {y};
  }
};

TEST(PatternPasses, LayerNormWithAffineBecomesOneLayer) {
  LayerNormGraph ln;
  ir::Graph opt = check_pass(ln.t.g, passes::fuse_layernorm, {random_tensor({2, 3, 8}, 23, -2.f, 3.f)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  ASSERT_EQ(count_op(opt, OpKind::kLayerNormalization), 1);
  const ir::Node& n = opt.nodes[0];
  EXPECT_EQ(n.inputs.size(), 3u);
  EXPECT_EQ(n.attr_int("axis", 0), -1);
  EXPECT_FLOAT_EQ(n.attr_float("epsilon", 0), 1e-5f);
  EXPECT_EQ(n.origin, (std::vector<std::string>{"mean", "sub", "pow", "var", "add_eps", "sqrt", "div", "mul_gamma",
                                                "add_beta"}));
}

TEST(PatternPasses, LayerNormOpset18AxesInputMulSquareReciprocalNoAffine) {
  TinyGraph t;
  t.g.opset_imports[""] = 18;
  const Shape xs = {4, 6}, rs = {4, 1};
  auto x = t.input("x", xs);
  Tensor axes(DataType::kInt64, {1});
  axes.data<int64_t>()[0] = 1;
  auto ax = t.constant("axes", axes);
  auto mean = t.node(OpKind::kReduceMean, "mean", {x, ax}, rs);
  auto d = t.node(OpKind::kSub, "sub", {x, mean}, xs);
  auto sq = t.node(OpKind::kMul, "square", {d, d}, xs);
  auto var = t.node(OpKind::kReduceMean, "var", {sq, ax}, rs);
  auto ve = t.node(OpKind::kAdd, "add_eps", {scalar(t, "eps", 1e-3f), var}, rs);
  auto s = t.node(OpKind::kSqrt, "sqrt", {ve}, rs);
  auto r = t.node(OpKind::kReciprocal, "recip", {s}, rs);
  auto y = t.node(OpKind::kMul, "mul", {r, d}, xs);
  for (auto& n : t.g.nodes) n.opset = 18;
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, passes::fuse_layernorm, {random_tensor(xs, 24)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  ASSERT_EQ(count_op(opt, OpKind::kLayerNormalization), 1);
  EXPECT_EQ(opt.nodes[0].inputs.size(), 2u);  // scale of ones, no bias
  EXPECT_FLOAT_EQ(opt.nodes[0].attr_float("epsilon", 0), 1e-3f);
  EXPECT_EQ(opt.nodes[0].origin,
            (std::vector<std::string>{"mean", "sub", "square", "var", "add_eps", "sqrt", "recip", "mul"}));
  EXPECT_EQ(opt.value(opt.outputs[0]).name, t.g.value(y).name);
}

TEST(PatternPasses, LayerNormOverNonLastAxisNotFused) {
  LayerNormGraph ln(/*axis=*/1);
  ir::Graph opt = check_pass(ln.t.g, passes::fuse_layernorm, {random_tensor({2, 3, 8}, 25)});
  EXPECT_EQ(count_op(opt, OpKind::kLayerNormalization), 0);
  EXPECT_EQ(passes::live_layers(opt), 9);
}

TEST(PatternPasses, LayerNormWithSharedMeanNotFused) {
  LayerNormGraph ln(-1, /*affine=*/false);
  // The mean is also a graph output: swallowing it would lose that output.
  ln.t.g.outputs.push_back(ln.t.g.find_value("mean_out"));
  ir::Graph opt = check_pass(ln.t.g, passes::fuse_layernorm, {random_tensor({2, 3, 8}, 26)});
  EXPECT_EQ(count_op(opt, OpKind::kLayerNormalization), 0);
}

TEST(PatternPasses, LayerNormWithWrongSquareExponentNotFused) {
  TinyGraph t;
  const Shape xs = {3, 5}, rs = {3, 1};
  auto x = t.input("x", xs);
  auto mean = t.node(OpKind::kReduceMean, "mean", {x}, rs, {{"axes", ir::Attribute::of_ints({-1})}});
  auto d = t.node(OpKind::kSub, "sub", {x, mean}, xs);
  auto sq = t.node(OpKind::kPow, "pow", {d, scalar(t, "three", 3.f)}, xs);
  auto var = t.node(OpKind::kReduceMean, "var", {sq}, rs, {{"axes", ir::Attribute::of_ints({-1})}});
  auto ve = t.node(OpKind::kAdd, "add_eps", {var, scalar(t, "eps", 1e-5f)}, rs);
  auto s = t.node(OpKind::kSqrt, "sqrt", {ve}, rs);
  t.g.outputs = {t.node(OpKind::kDiv, "div", {d, s}, xs)};
  ir::Graph opt = check_pass(t.g, passes::fuse_layernorm, {random_tensor(xs, 27, 0.5f, 2.f)});
  EXPECT_EQ(count_op(opt, OpKind::kLayerNormalization), 0);
}

// 0.5 * x * (1 + Erf(x / sqrt2)) as torch exports it: ((x * (erf + 1)) * 0.5).
TEST(PatternPasses, GeluErfTorchOrderBecomesOneLayer) {
  TinyGraph t;
  const Shape xs = {4, 5};
  auto x = t.input("x", xs);
  auto u = t.node(OpKind::kDiv, "div", {x, scalar(t, "sqrt2", 1.4142135f)}, xs);
  auto e = t.node(OpKind::kErf, "erf", {u}, xs);
  auto a = t.node(OpKind::kAdd, "add", {e, scalar(t, "one", 1.f)}, xs);
  auto m = t.node(OpKind::kMul, "mul", {x, a}, xs);
  t.g.outputs = {t.node(OpKind::kMul, "mul_half", {m, scalar(t, "half", 0.5f)}, xs)};
  ir::Graph opt = check_pass(t.g, passes::fuse_gelu, {random_tensor(xs, 31, -3.f, 3.f)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  ASSERT_EQ(count_op(opt, OpKind::kGelu), 1);
  EXPECT_EQ(opt.nodes[0].attr_string("approximate", ""), "none");
  EXPECT_EQ(opt.nodes[0].origin, (std::vector<std::string>{"erf", "div", "add", "mul", "mul_half"}));
}

// The half first, x * 0.70710678 inside: (x * 0.5) * (1 + Erf(x * c)).
TEST(PatternPasses, GeluErfHalfFirstBecomesOneLayer) {
  TinyGraph t;
  const Shape xs = {2, 7};
  auto x = t.input("x", xs);
  auto u = t.node(OpKind::kMul, "scale", {scalar(t, "c", 0.70710678f), x}, xs);
  auto e = t.node(OpKind::kErf, "erf", {u}, xs);
  auto a = t.node(OpKind::kAdd, "add", {scalar(t, "one", 1.f), e}, xs);
  auto h = t.node(OpKind::kMul, "half", {x, scalar(t, "half_c", 0.5f)}, xs);
  t.g.outputs = {t.node(OpKind::kMul, "mul", {h, a}, xs)};
  ir::Graph opt = check_pass(t.g, passes::fuse_gelu, {random_tensor(xs, 32, -3.f, 3.f)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  ASSERT_EQ(count_op(opt, OpKind::kGelu), 1);
  EXPECT_EQ(opt.nodes[0].origin, (std::vector<std::string>{"erf", "scale", "add", "half", "mul"}));
}

// 0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))); x^3 via Pow or x * (x * x).
ir::Graph gelu_tanh_graph(bool pow_cube, float cube_coeff) {
  TinyGraph t;
  const Shape xs = {3, 4};
  auto x = t.input("x", xs);
  ir::ValueId cube;
  if (pow_cube) {
    cube = t.node(OpKind::kPow, "pow", {x, scalar(t, "three", 3.f)}, xs);
  } else {
    auto sq = t.node(OpKind::kMul, "sq", {x, x}, xs);
    cube = t.node(OpKind::kMul, "cube", {x, sq}, xs);
  }
  auto q = t.node(OpKind::kMul, "kappa", {scalar(t, "k", cube_coeff), cube}, xs);
  auto in = t.node(OpKind::kAdd, "inner", {x, q}, xs);
  auto sc = t.node(OpKind::kMul, "beta", {in, scalar(t, "b", 0.7978845608f)}, xs);
  auto th = t.node(OpKind::kTanh, "tanh", {sc}, xs);
  auto a = t.node(OpKind::kAdd, "add", {scalar(t, "one", 1.f), th}, xs);
  auto h = t.node(OpKind::kMul, "half", {x, scalar(t, "half_c", 0.5f)}, xs);
  t.g.outputs = {t.node(OpKind::kMul, "mul", {h, a}, xs)};
  return t.g;
}

TEST(PatternPasses, GeluTanhBecomesOneLayer) {
  for (bool pow_cube : {true, false}) {
    ir::Graph opt = check_pass(gelu_tanh_graph(pow_cube, 0.044715f), passes::fuse_gelu,
                               {random_tensor({3, 4}, 33, -3.f, 3.f)});
    EXPECT_EQ(passes::live_layers(opt), 1);
    ASSERT_EQ(count_op(opt, OpKind::kGelu), 1);
    EXPECT_EQ(opt.nodes[0].attr_string("approximate", ""), "tanh");
    EXPECT_EQ(opt.nodes[0].origin.size(), pow_cube ? 8u : 9u);
    EXPECT_EQ(opt.nodes[0].origin[0], "tanh");
  }
}

TEST(PatternPasses, GeluWithWrongConstantsNotFused) {
  ir::Graph opt = check_pass(gelu_tanh_graph(true, 0.05f), passes::fuse_gelu, {random_tensor({3, 4}, 34)});
  EXPECT_EQ(count_op(opt, OpKind::kGelu), 0);

  TinyGraph t;
  const Shape xs = {4, 5};
  auto x = t.input("x", xs);
  auto u = t.node(OpKind::kDiv, "div", {x, scalar(t, "not_sqrt2", 1.4145f)}, xs);  // 2e-4 off
  auto e = t.node(OpKind::kErf, "erf", {u}, xs);
  auto a = t.node(OpKind::kAdd, "add", {e, scalar(t, "one", 1.f)}, xs);
  auto m = t.node(OpKind::kMul, "mul", {x, a}, xs);
  t.g.outputs = {t.node(OpKind::kMul, "mul_half", {m, scalar(t, "half", 0.5f)}, xs)};
  opt = check_pass(t.g, passes::fuse_gelu, {random_tensor(xs, 35)});
  EXPECT_EQ(count_op(opt, OpKind::kGelu), 0);
  EXPECT_EQ(passes::live_layers(opt), 5);
}

// The whole default pipeline on LayerNorm followed by GELU: two layers remain.
TEST(PatternPasses, DefaultPipelineFusesLayerNormThenGelu) {
  LayerNormGraph ln;
  TinyGraph& t = ln.t;
  const Shape xs = {2, 3, 8};
  auto u = t.node(OpKind::kDiv, "gdiv", {ln.y, scalar(t, "sqrt2", 1.41421356f)}, xs);
  auto e = t.node(OpKind::kErf, "gerf", {u}, xs);
  auto a = t.node(OpKind::kAdd, "gadd", {e, scalar(t, "one", 1.f)}, xs);
  auto m = t.node(OpKind::kMul, "gmul", {ln.y, a}, xs);
  t.g.outputs = {t.node(OpKind::kMul, "ghalf", {m, scalar(t, "half", 0.5f)}, xs)};
  ir::Graph opt = check_pass(t.g, passes::run_pipeline, {random_tensor(xs, 36, -2.f, 2.f)});
  EXPECT_EQ(passes::live_layers(opt), 2);
  EXPECT_EQ(count_op(opt, OpKind::kLayerNormalization), 1);
  EXPECT_EQ(count_op(opt, OpKind::kGelu), 1);
}

}  // namespace
}  // namespace kiln::testing
