// Differential tests of fuse_gemm_activation (docs/decisions/0058): Relu(Gemm) and
// Relu(MatMulBias) become one layer with activation = "Relu" and the same outputs on the CPU
// reference (random non-zero data with negative products, so the Relu changes values); a GEMM
// result that something else also reads, or that is a graph output, keeps its Relu; the full
// pipeline leaves no Relu (and no FusedPointwise) behind; the fused layer survives a plan.
#include <algorithm>

#include "builder/build_from_graph.h"
#include "kiln/runtime.h"
#include "passes/pass_test_util.h"
#include "plan/plan_format.h"

namespace kiln::testing {
namespace {

using ir::OpKind;

const ir::Node& only(const ir::Graph& g, OpKind op) {
  static const ir::Node kNone{};
  const ir::Node* found = only_node(g, op);
  return found ? *found : kNone;
}

int zeros(const Tensor& t) {
  return static_cast<int>(std::count(t.data<float>(), t.data<float>() + t.numel(), 0.f));
}

// Gemm(x [6,16], W [10,16] transB, b [10]) -> Relu: x of either sign gives products of both.
ir::Graph gemm_relu(TinyGraph& t, bool relu_output_is_graph_output = true) {
  auto x = t.input("x", {6, 16});
  auto y = t.node(OpKind::kGemm, "fc", {x, t.constant("w", random_tensor({10, 16}, 1)), t.constant("b", random_tensor({10}, 2))},
                  {6, 10}, {{"transB", ir::Attribute::of_int(1)}, {"alpha", ir::Attribute::of_float(0.5f)}});
  auto r = t.node(OpKind::kRelu, "act", {y}, {6, 10});
  if (relu_output_is_graph_output) t.g.outputs = {r};
  return t.g;
}

TEST(GemmActivation, ReluAfterGemmJoinsItsEpilogue) {
  TinyGraph t;
  ir::Graph g = gemm_relu(t);
  const std::vector<Tensor> in = {random_tensor({6, 16}, 3)};
  ir::Graph opt = check_pass(g, passes::fuse_gemm_activation, in);
  EXPECT_EQ(passes::live_layers(opt), 1);
  EXPECT_EQ(count_op(opt, OpKind::kRelu), 0);
  const ir::Node& fc = only(opt, OpKind::kGemm);
  EXPECT_EQ(fc.attr_string("activation", ""), "Relu");
  EXPECT_EQ(fc.outputs[0], g.outputs[0]);  // the Relu's output, under its name
  EXPECT_NE(std::find(fc.origin.begin(), fc.origin.end(), "act"), fc.origin.end());
  auto y = interpret(opt, in);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  // The Relu did something: some products were negative.
  EXPECT_GT(zeros((*y)[0]), 5);
  EXPECT_LT(zeros((*y)[0]), 55);
}

TEST(GemmActivation, ReluAfterMatMulBiasJoinsItsEpilogue) {
  TinyGraph t;
  const Shape xs = {2, 5, 8};
  auto x = t.input("x", xs);
  auto y = t.node(OpKind::kMatMulBias, "proj",
                  {x, t.constant("w", random_tensor({8, 12}, 4)), t.constant("b", random_tensor({12}, 5))}, {2, 5, 12});
  auto r = t.node(OpKind::kRelu, "act", {y}, {2, 5, 12});
  // The Relu's output may have any number of readers.
  t.g.outputs = {t.node(OpKind::kAdd, "twice", {r, r}, {2, 5, 12}), r};
  const std::vector<Tensor> in = {random_tensor(xs, 6, -2.f, 2.f)};
  ir::Graph opt = check_pass(t.g, passes::fuse_gemm_activation, in);
  EXPECT_EQ(count_op(opt, OpKind::kRelu), 0);
  EXPECT_EQ(only(opt, OpKind::kMatMulBias).attr_string("activation", ""), "Relu");
  EXPECT_EQ(passes::live_layers(opt), 2);
}

// Gelu(approximate = "tanh") after a MatMulBias joins as activation "GeluTanh" with the same
// values on the CPU reference; the erf form (ONNX Gelu's default) is left as its own layer.
TEST(GemmActivation, TanhGeluJoinsTheEpilogueErfGeluDoesNot) {
  for (const char* approx : {"tanh", "none"}) {
    TinyGraph t;
    const Shape xs = {2, 5, 8};
    auto x = t.input("x", xs);
    auto y = t.node(OpKind::kMatMulBias, "proj",
                    {x, t.constant("w", random_tensor({8, 12}, 14)), t.constant("b", random_tensor({12}, 15))}, {2, 5, 12});
    t.g.outputs = {t.node(OpKind::kGelu, "act", {y}, {2, 5, 12}, {{"approximate", ir::Attribute::of_string(approx)}})};
    const std::vector<Tensor> in = {random_tensor(xs, 16, -2.f, 2.f)};
    ir::Graph opt = check_pass(t.g, passes::fuse_gemm_activation, in);
    const bool tanh = std::string(approx) == "tanh";
    EXPECT_EQ(count_op(opt, OpKind::kGelu), tanh ? 0 : 1) << approx;
    EXPECT_EQ(only(opt, OpKind::kMatMulBias).attr_string("activation", ""), tanh ? "GeluTanh" : "") << approx;
    EXPECT_EQ(passes::live_layers(opt), tanh ? 1 : 2) << approx;
  }
}

// A Gemm on 2-D rows (a graph input, so fuse_matmul_add has no Reshape to unflatten), Reshape back
// to [B, S, N], then the tanh Gelu: the Gelu joins the Gemm and the Reshape now writes its output.
TEST(GemmActivation, TanhGeluThroughAReshapeJoinsTheGemm) {
  TinyGraph t;
  auto x = t.input("x", {6, 16});
  auto y = t.node(OpKind::kGemm, "fc", {x, t.constant("w", random_tensor({16, 10}, 17)), t.constant("b", random_tensor({10}, 18))},
                  {6, 10});
  auto r = t.node(OpKind::kReshape, "view", {y, t.ints("shape", {2, 3, 10})}, {2, 3, 10});
  t.g.outputs = {t.node(OpKind::kGelu, "act", {r}, {2, 3, 10}, {{"approximate", ir::Attribute::of_string("tanh")}})};
  const std::vector<Tensor> in = {random_tensor({6, 16}, 19, -2.f, 2.f)};
  ir::Graph opt = check_pass(t.g, passes::fuse_gemm_activation, in);
  EXPECT_EQ(count_op(opt, OpKind::kGelu), 0);
  EXPECT_EQ(only(opt, OpKind::kGemm).attr_string("activation", ""), "GeluTanh");
  EXPECT_EQ(only(opt, OpKind::kReshape).outputs[0], t.g.outputs[0]);
}

// The pre-activation values are still needed: by another layer, or as a graph output.
TEST(GemmActivation, GemmResultReadElsewhereKeepsItsRelu) {
  {
    TinyGraph t;
    gemm_relu(t, false);
    const ir::ValueId y = t.g.find_value("fc_out"), r = t.g.find_value("act_out");
    t.g.outputs = {r, t.node(OpKind::kAdd, "other_reader", {y, r}, {6, 10})};
    ir::Graph opt = check_pass(t.g, passes::fuse_gemm_activation, {random_tensor({6, 16}, 7)});
    EXPECT_EQ(count_op(opt, OpKind::kRelu), 1);
    EXPECT_FALSE(only(opt, OpKind::kGemm).attrs.count("activation"));
  }
  {
    TinyGraph t;
    gemm_relu(t, false);
    t.g.outputs = {t.g.find_value("fc_out"), t.g.find_value("act_out")};
    ir::Graph opt = check_pass(t.g, passes::fuse_gemm_activation, {random_tensor({6, 16}, 8)});
    EXPECT_EQ(count_op(opt, OpKind::kRelu), 1);
    EXPECT_FALSE(only(opt, OpKind::kGemm).attrs.count("activation"));
  }
}

// Forms the CUDA factory would not run as one GEMM keep their Relu: transA, a weight computed
// at run time, a C that is not a vector of N.
TEST(GemmActivation, GemmFormsOutsideOneGemmAreLeftAlone) {
  auto check_unfused = [](TinyGraph& t, const std::vector<Tensor>& in) {
    ir::Graph opt = check_pass(t.g, passes::fuse_gemm_activation, in);
    EXPECT_EQ(count_op(opt, OpKind::kRelu), 1);
  };
  {
    TinyGraph t;
    auto x = t.input("x", {16, 6});
    auto y = t.node(OpKind::kGemm, "fc", {x, t.constant("w", random_tensor({16, 10}, 1))}, {6, 10},
                    {{"transA", ir::Attribute::of_int(1)}});
    t.g.outputs = {t.node(OpKind::kRelu, "act", {y}, {6, 10})};
    check_unfused(t, {random_tensor({16, 6}, 2)});
  }
  {
    TinyGraph t;
    auto x = t.input("x", {6, 16});
    auto w = t.input("w", {16, 10});
    auto y = t.node(OpKind::kGemm, "fc", {x, w}, {6, 10});
    t.g.outputs = {t.node(OpKind::kRelu, "act", {y}, {6, 10})};
    check_unfused(t, {random_tensor({6, 16}, 3), random_tensor({16, 10}, 4)});
  }
  {
    TinyGraph t;
    auto x = t.input("x", {6, 16});
    auto y = t.node(OpKind::kGemm, "fc", {x, t.constant("w", random_tensor({16, 10}, 5)), t.constant("c", random_tensor({6, 10}, 6))},
                    {6, 10});
    t.g.outputs = {t.node(OpKind::kRelu, "act", {y}, {6, 10})};
    check_unfused(t, {random_tensor({6, 16}, 7)});
  }
}

// BN(Relu(Gemm)) is not BN(Gemm): fold_batchnorm leaves a Gemm with an activation alone.
TEST(GemmActivation, BatchNormDoesNotFoldThroughTheActivation) {
  TinyGraph t;
  auto x = t.input("x", {4, 8});
  auto y = t.node(OpKind::kGemm, "fc", {x, t.constant("w", random_tensor({8, 6}, 1)), t.constant("b", random_tensor({6}, 2))},
                  {4, 6}, {{"activation", ir::Attribute::of_string("Relu")}});
  t.g.outputs = {t.node(OpKind::kBatchNormalization, "bn",
                        {y, t.constant("gamma", random_tensor({6}, 3, 0.5f, 1.5f)), t.constant("beta", random_tensor({6}, 4)),
                         t.constant("mean", random_tensor({6}, 5)), t.constant("var", random_tensor({6}, 6, 0.5f, 1.5f))},
                        {4, 6})};
  ir::Graph opt = check_pass(t.g, passes::fold_batchnorm, {random_tensor({4, 8}, 7)});
  EXPECT_EQ(count_op(opt, OpKind::kBatchNormalization), 1);
}

// An activation the epilogue does not have is an error naming the layer, on the CPU as on the GPU.
TEST(GemmActivation, UnknownActivationIsAnErrorNamingTheLayer) {
  TinyGraph t;
  auto x = t.input("x", {4, 8});
  t.g.outputs = {t.node(OpKind::kGemm, "fc", {x, t.constant("w", random_tensor({8, 6}, 1))}, {4, 6},
                        {{"activation", ir::Attribute::of_string("Gelu")}})};
  auto y = interpret(t.g, {random_tensor({4, 8}, 2)});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("'fc'"), std::string::npos) << y.status().to_string();
  EXPECT_NE(y.status().message().find("activation 'Gelu'"), std::string::npos) << y.status().to_string();
}

// The whole pipeline on MatMul + Add + Relu (rank 3, a transformer's MLP): one MatMulBias with
// the Relu in its epilogue — fuse_pointwise does not get the Relu first — in the plan too, and
// the CPU plan computes the unfused graph's values.
TEST(GemmActivation, PipelineMakesOneLayerThatSurvivesThePlan) {
  TinyGraph t;
  const Shape xs = {2, 7, 16};
  auto x = t.input("x", xs);
  auto m = t.node(OpKind::kMatMul, "fc1", {x, t.constant("w", random_tensor({16, 24}, 1))}, {2, 7, 24});
  auto a = t.node(OpKind::kAdd, "fc1_bias", {m, t.constant("b", random_tensor({24}, 2))}, {2, 7, 24});
  t.g.outputs = {t.node(OpKind::kRelu, "act", {a}, {2, 7, 24})};
  const Tensor in = random_tensor(xs, 3, -2.f, 2.f);
  auto want = interpret(t.g, {in});
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  BuilderConfig config;
  config.target = TargetDevice::kCpu;
  auto plan = build_from_graph(t.g, config);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto p = plan::read_plan(plan->data(), plan->size());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(passes::live_layers(p->graph), 1);
  EXPECT_EQ(only(p->graph, OpKind::kMatMulBias).attr_string("activation", ""), "Relu");
  auto engine = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto ctx = (*engine)->create_execution_context();
  ASSERT_TRUE(ctx->set_input("x", in).ok());
  ASSERT_TRUE(ctx->execute().ok());
  auto got = ctx->output("act_out");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_LE(relative_diff(*want, {*got}), 1e-5);
  EXPECT_GT(zeros(*got), 20);
}

// fuse_gemm_residual: a transformer block's residual Add after its output projection joins the GEMM
// (MatMulBias input 3); the CPU reference computes the same float32 sums in the same order.
TEST(GemmResidual, AddOfAnEarlierActivationJoinsTheGemm) {
  TinyGraph t;
  const Shape xs = {2, 5, 8};
  auto x = t.input("x", xs);
  auto h = t.node(OpKind::kRelu, "h", {x}, xs);  // the residual: computed before the GEMM
  auto y = t.node(OpKind::kMatMulBias, "proj",
                  {h, t.constant("w", random_tensor({8, 8}, 4)), t.constant("b", random_tensor({8}, 5))}, xs);
  t.g.outputs = {t.node(OpKind::kAdd, "residual", {h, y}, xs)};
  const std::vector<Tensor> in = {random_tensor(xs, 6, -2.f, 2.f)};
  ir::Graph opt = check_pass(t.g, passes::fuse_gemm_residual, in);
  EXPECT_EQ(count_op(opt, OpKind::kAdd), 0);
  const ir::Node& mm = only(opt, OpKind::kMatMulBias);
  ASSERT_EQ(mm.inputs.size(), 4u);
  EXPECT_EQ(mm.inputs[3], h);
  EXPECT_EQ(mm.outputs[0], t.g.outputs[0]);
  EXPECT_NE(std::find(mm.origin.begin(), mm.origin.end(), "residual"), mm.origin.end());
  EXPECT_EQ(passes::live_layers(opt), 2);
}

// A bias-free projection (Llama's o_proj / down_proj: MatMul against a constant weight) joins too,
// as a MatMulBias with a zero bias.
TEST(GemmResidual, MatMulWithoutBiasJoinsWithAZeroBias) {
  TinyGraph t;
  const Shape xs = {6, 8};
  auto x = t.input("x", xs);
  auto h = t.node(OpKind::kRelu, "h", {x}, xs);
  auto y = t.node(OpKind::kMatMul, "o_proj", {h, t.constant("w", random_tensor({8, 8}, 4))}, xs);
  t.g.outputs = {t.node(OpKind::kAdd, "residual", {h, y}, xs)};
  const std::vector<Tensor> in = {random_tensor(xs, 6, -2.f, 2.f)};
  ir::Graph opt = check_pass(t.g, passes::fuse_gemm_residual, in);
  EXPECT_EQ(count_op(opt, OpKind::kAdd), 0);
  EXPECT_EQ(count_op(opt, OpKind::kMatMul), 0);
  const ir::Node& mm = only(opt, OpKind::kMatMulBias);
  ASSERT_EQ(mm.inputs.size(), 4u);
  const auto& b = opt.value(mm.inputs[2]).constant;
  ASSERT_TRUE(b);
  EXPECT_EQ(b->shape(), Shape{8});
  for (int64_t i = 0; i < b->numel(); ++i) EXPECT_EQ(b->data<float>()[i], 0.f);
  EXPECT_EQ(mm.inputs[3], h);
}

// An exporter's linear layer on flattened rows with a residual Add after it: x [*, ...] (through a
// Relu h, computed before the GEMM) -> Reshape to rows [6, 16] -> Gemm(W [16, 10], b [10]) ->
// Reshape to [2, 3, 10] -> Add with the graph input r (first or second operand).
struct FlatLinear {
  ir::ValueId h, rows, r;
  std::vector<Tensor> in;
};
FlatLinear flat_linear_with_residual(TinyGraph& t, const Shape& xs, uint32_t seed, bool residual_first) {
  const Shape ys = {2, 3, 10};
  FlatLinear f;
  f.h = t.node(OpKind::kRelu, "h", {t.input("x", xs)}, xs);
  f.rows = t.node(OpKind::kReshape, "to_rows", {f.h, t.ints("rows_shape", {-1, 16})}, {6, 16});
  auto y = t.node(OpKind::kGemm, "c_proj",
                  {f.rows, t.constant("w", random_tensor({16, 10}, seed)), t.constant("b", random_tensor({10}, seed + 1))},
                  {6, 10});
  auto back = t.node(OpKind::kReshape, "to_tokens", {y, t.ints("tokens_shape", {2, 3, 10})}, ys);
  f.r = t.input("r", ys);
  t.g.outputs = {t.node(OpKind::kAdd, "residual", residual_first ? std::vector{f.r, back} : std::vector{back, f.r}, ys)};
  f.in = {random_tensor(xs, seed + 2, -2.f, 2.f), random_tensor(ys, seed + 3)};
  return f;
}

// GPT-2's Conv1D as the TorchScript exporter writes it — Reshape to rows, Gemm, Reshape back — and
// the residual Add after it: fuse_matmul_add makes one MatMulBias of the rank-3 input, and
// fuse_gemm_residual gives it the residual; no Reshape left.
TEST(GemmResidual, GemmOnFlattenedRowsJoinsAsMatMulBias) {
  TinyGraph t;
  const FlatLinear f = flat_linear_with_residual(t, {2, 3, 16}, 21, true);
  // fuse_matmul_add's unflatten_gemm makes the MatMulBias, then the residual joins it.
  ir::Graph opt = check_pass(check_pass(t.g, passes::fuse_matmul_add, f.in), passes::fuse_gemm_residual, f.in);
  EXPECT_EQ(count_op(opt, OpKind::kAdd), 0);
  EXPECT_EQ(count_op(opt, OpKind::kGemm), 0);
  EXPECT_EQ(count_op(opt, OpKind::kReshape), 0);
  const ir::Node& mm = only(opt, OpKind::kMatMulBias);
  ASSERT_EQ(mm.inputs.size(), 4u);
  EXPECT_EQ(mm.inputs[0], f.h);
  EXPECT_EQ(mm.inputs[3], f.r);
  EXPECT_EQ(mm.outputs[0], t.g.outputs[0]);
}

// The same after an attention output [B, S, H, D] (GPT-2's c_proj): the first Reshape stays, now to
// [B, S, H · D], and feeds the MatMulBias.
TEST(GemmResidual, GemmOnFlattenedHeadsJoinsAsMatMulBias) {
  TinyGraph t;
  const FlatLinear f = flat_linear_with_residual(t, {2, 3, 4, 4}, 31, false);
  ir::Graph opt = check_pass(check_pass(t.g, passes::fuse_matmul_add, f.in), passes::fuse_gemm_residual, f.in);
  EXPECT_EQ(count_op(opt, OpKind::kAdd), 0);
  EXPECT_EQ(count_op(opt, OpKind::kGemm), 0);
  EXPECT_EQ(count_op(opt, OpKind::kReshape), 1);
  const ir::Node& mm = only(opt, OpKind::kMatMulBias);
  ASSERT_EQ(mm.inputs.size(), 4u);
  EXPECT_EQ(mm.inputs[0], f.rows);
  EXPECT_EQ(opt.value(f.rows).shape->size(), 3u);
  EXPECT_EQ(mm.inputs[3], f.r);
}

// Left alone: a broadcast operand, a residual computed after the GEMM in the layer order, a GEMM
// with an activation, a GEMM result read elsewhere.
TEST(GemmResidual, OtherAddsAreLeftAlone) {
  const Shape xs = {2, 5, 8};
  auto gemm = [&](TinyGraph& t, ir::ValueId in, const char* act) {
    std::map<std::string, ir::Attribute> attrs;
    if (act) attrs["activation"] = ir::Attribute::of_string(act);
    return t.node(OpKind::kMatMulBias, "proj", {in, t.constant("w", random_tensor({8, 8}, 4)), t.constant("b", random_tensor({8}, 5))},
                  xs, attrs);
  };
  const std::vector<Tensor> in = {random_tensor(xs, 6, -2.f, 2.f)};
  {
    TinyGraph t;
    auto y = gemm(t, t.input("x", xs), nullptr);
    t.g.outputs = {t.node(OpKind::kAdd, "bcast", {y, t.input("r", {8})}, xs)};
    ir::Graph opt = check_pass(t.g, passes::fuse_gemm_residual, {in[0], random_tensor({8}, 9)});
    EXPECT_EQ(count_op(opt, OpKind::kAdd), 1);
  }
  {
    TinyGraph t;
    auto x = t.input("x", xs);
    auto y = gemm(t, x, nullptr);
    auto later = t.node(OpKind::kRelu, "later", {x}, xs);
    t.g.outputs = {t.node(OpKind::kAdd, "residual", {y, later}, xs)};
    ir::Graph opt = check_pass(t.g, passes::fuse_gemm_residual, in);
    EXPECT_EQ(count_op(opt, OpKind::kAdd), 1);
  }
  {
    TinyGraph t;
    auto x = t.input("x", xs);
    auto y = gemm(t, x, "Relu");
    t.g.outputs = {t.node(OpKind::kAdd, "residual", {y, x}, xs)};
    ir::Graph opt = check_pass(t.g, passes::fuse_gemm_residual, in);
    EXPECT_EQ(count_op(opt, OpKind::kAdd), 1);
  }
  {
    TinyGraph t;
    auto x = t.input("x", xs);
    auto y = gemm(t, x, nullptr);
    t.g.outputs = {t.node(OpKind::kAdd, "residual", {y, x}, xs), y};
    ir::Graph opt = check_pass(t.g, passes::fuse_gemm_residual, in);
    EXPECT_EQ(count_op(opt, OpKind::kAdd), 1);
  }
}

}  // namespace
}  // namespace kiln::testing
