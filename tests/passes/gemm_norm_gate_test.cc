// Differential tests of fuse_rmsnorm_gemm and fuse_gated_gemm (docs/decisions/0092): a decoder
// layer's RMSNorm before its q/k/v (or gate/up) GEMM becomes the GEMM's prologue (MatMulBias input
// 4), and silu(gate) * up over the halves of the horizontally fused gate/up GEMM its epilogue
// (attribute gate) — the same outputs on the CPU reference; forms the GPU cannot run as one layer,
// or whose intermediate values something else reads, are left alone; the whole pipeline leaves a
// Llama MLP as two layers.
#include <algorithm>
#include <random>

#include "ir/pointwise_program.h"
#include "ir/verifier.h"
#include "passes/pass_test_util.h"

namespace kiln::testing {
namespace {

using ir::OpKind;

const ir::Node* only(const ir::Graph& g, OpKind op) { return only_node(g, op); }

std::map<std::string, ir::Attribute> rms_attrs(float eps) {
  return {{"axis", ir::Attribute::of_int(-1)}, {"epsilon", ir::Attribute::of_float(eps)}};
}

// x [2, 5, 16] -> RMSNorm(scale [16]) -> MatMul(W [16, 12]).
TEST(RmsNormGemm, NormReadOnlyByTheGemmBecomesItsPrologue) {
  TinyGraph t;
  auto x = t.input("x", {2, 5, 16});
  auto scale = t.constant("scale", random_tensor({16}, 3, 0.5f, 1.5f));
  auto h = t.node(OpKind::kRMSNormalization, "input_layernorm", {x, scale}, {2, 5, 16}, rms_attrs(1e-6f));
  t.g.outputs = {t.node(OpKind::kMatMul, "q_proj", {h, t.constant("w", random_tensor({16, 12}, 4))}, {2, 5, 12})};
  ir::Graph opt = check_pass(t.g, passes::fuse_rmsnorm_gemm, {random_tensor({2, 5, 16}, 5, -3.f, 3.f)});
  EXPECT_EQ(count_op(opt, OpKind::kRMSNormalization), 0);
  const ir::Node* mm = only(opt, OpKind::kMatMulBias);
  ASSERT_NE(mm, nullptr);
  ASSERT_EQ(mm->inputs.size(), 5u);
  EXPECT_EQ(mm->inputs[0], x);
  EXPECT_EQ(mm->inputs[3], ir::kNoValue);  // no residual
  EXPECT_EQ(mm->inputs[4], scale);
  EXPECT_FLOAT_EQ(mm->attr_float("norm_epsilon", 0.f), 1e-6f);
  EXPECT_EQ(mm->origin.front(), "input_layernorm");  // it runs first
  EXPECT_TRUE(ir::verify(opt).ok());
}

// A MatMulBias with a residual keeps it; a [1, K] scale is read as [K].
TEST(RmsNormGemm, KeepsTheResidualAndReadsAOneRowScale) {
  TinyGraph t;
  auto x = t.input("x", {6, 8});
  auto r = t.input("r", {6, 10});
  auto h = t.node(OpKind::kRMSNormalization, "norm", {x, t.constant("scale", random_tensor({1, 8}, 7))}, {6, 8},
                  rms_attrs(1e-5f));
  t.g.outputs = {t.node(OpKind::kMatMulBias, "proj",
                        {h, t.constant("w", random_tensor({8, 10}, 8)), t.constant("b", random_tensor({10}, 9)), r},
                        {6, 10})};
  ir::Graph opt = check_pass(t.g, passes::fuse_rmsnorm_gemm, {random_tensor({6, 8}, 10), random_tensor({6, 10}, 11)});
  const ir::Node* mm = only(opt, OpKind::kMatMulBias);
  ASSERT_NE(mm, nullptr);
  ASSERT_EQ(mm->inputs.size(), 5u);
  EXPECT_EQ(mm->inputs[3], r);
  EXPECT_EQ(opt.value(mm->inputs[4]).constant->shape(), Shape{8});
}

// Left alone: the normalized values read elsewhere too, the norm as a graph output, a norm over
// more than the last axis, a runtime weight.
TEST(RmsNormGemm, OtherNormsAreLeftAlone) {
  const std::vector<Tensor> in = {random_tensor({4, 8}, 12)};
  for (int variant = 0; variant < 4; ++variant) {
    TinyGraph t;
    auto x = t.input("x", {4, 8});
    std::map<std::string, ir::Attribute> a = rms_attrs(1e-5f);
    if (variant == 2) a["axis"] = ir::Attribute::of_int(0);
    const Shape ss = variant == 2 ? Shape{4, 8} : Shape{8};
    auto h = t.node(OpKind::kRMSNormalization, "norm", {x, t.constant("scale", random_tensor(ss, 13))}, {4, 8}, a);
    std::vector<Tensor> inputs = in;
    ir::ValueId w = t.constant("w", random_tensor({8, 3}, 14));
    if (variant == 3) {
      w = t.input("w_runtime", {8, 3});
      inputs.push_back(random_tensor({8, 3}, 15));
    }
    auto y = t.node(OpKind::kMatMul, "mm", {h, w}, {4, 3});
    if (variant == 0) t.g.outputs = {y, t.node(OpKind::kRelu, "other", {h}, {4, 8})};
    else if (variant == 1) t.g.outputs = {y, h};
    else t.g.outputs = {y};
    ir::Graph opt = check_pass(t.g, passes::fuse_rmsnorm_gemm, inputs);
    EXPECT_EQ(count_op(opt, OpKind::kRMSNormalization), 1) << "variant " << variant;
  }
}

// A Llama MLP's front: gate_proj and up_proj of one input, silu(gate) * up.
struct Mlp {
  TinyGraph t;
  ir::ValueId x;
  std::vector<Tensor> in;
};
void mlp(Mlp& m, bool up_first, bool gelu = false) {
  TinyGraph& t = m.t;
  const Shape xs = {3, 16}, hs = {3, 24};
  m.x = t.input("x", xs);
  auto g = t.node(OpKind::kMatMul, "gate_proj", {m.x, t.constant("wg", random_tensor({16, 24}, 21))}, hs);
  auto u = t.node(OpKind::kMatMul, "up_proj", {m.x, t.constant("wu", random_tensor({16, 24}, 22))}, hs);
  ir::ValueId act;
  if (gelu) {
    act = t.node(OpKind::kGelu, "act", {g}, hs);
  } else {
    auto s = t.node(OpKind::kSigmoid, "act.sigmoid", {g}, hs);
    act = t.node(OpKind::kMul, "act", {g, s}, hs);
  }
  auto y = t.node(OpKind::kMul, "gate_up", up_first ? std::vector{u, act} : std::vector{act, u}, hs);
  t.g.outputs = {t.node(OpKind::kMatMul, "down_proj", {y, t.constant("wd", random_tensor({24, 16}, 23))}, xs)};
  m.in = {random_tensor(xs, 24, -2.f, 2.f)};
}

ir::Graph through_gate(const ir::Graph& g, const std::vector<Tensor>& in) {
  ir::Graph a = check_pass(g, passes::fuse_horizontal_gemm, in);
  ir::Graph b = check_pass(a, passes::fuse_pointwise, in);
  return check_pass(b, passes::fuse_gated_gemm, in);
}

TEST(GatedGemm, SiluGateJoinsTheWideGemm) {
  for (bool up_first : {false, true}) {
    Mlp m;
    mlp(m, up_first);
    ir::Graph opt = through_gate(m.t.g, m.in);
    EXPECT_EQ(count_op(opt, OpKind::kSplit), 0) << up_first;
    EXPECT_EQ(count_op(opt, OpKind::kFusedPointwise), 0) << up_first;
    const ir::Node* mm = only(opt, OpKind::kMatMulBias);
    ASSERT_NE(mm, nullptr);
    auto prog = ir::parse_pw_program(mm->attr_string("gate", ""));
    ASSERT_TRUE(prog.ok()) << prog.status().to_string();
    EXPECT_TRUE(ir::pw_is_silu_gate(*prog)) << mm->attr_string("gate", "");
    EXPECT_EQ(opt.value(mm->outputs[0]).shape, sym({3, 24}));
    EXPECT_EQ(opt.value(mm->inputs[1]).constant->shape(), (Shape{16, 48}));
    EXPECT_TRUE(ir::verify(opt).ok());
  }
}

// The 8-bit form (an FP8 / INT8 plan's gate/up): two QuantLinears of one input and scale become one
// wide QuantLinear, then its gate.
TEST(GatedGemm, QuantLinearGateJoins) {
  TinyGraph t;
  const Shape xs = {3, 16}, hs = {3, 24};
  auto x = t.input("x", xs);
  auto q8 = [&](const std::string& name, uint32_t seed) {
    Tensor w(DataType::kInt8, {24, 16});
    std::mt19937 rng(seed);
    for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    return t.node(OpKind::kQuantLinear, name,
                  {x, t.constant(name + ".w", std::move(w)), t.constant(name + ".s", random_tensor({24}, seed + 1, 0.001f, 0.01f))},
                  hs, {{"x_scale", ir::Attribute::of_float(0.02f)}, {"x_zero_point", ir::Attribute::of_int(0)}});
  };
  auto g = q8("gate_proj", 41);
  auto u = q8("up_proj", 43);
  auto sg = t.node(OpKind::kSigmoid, "act.sigmoid", {g}, hs);
  auto a = t.node(OpKind::kMul, "act", {g, sg}, hs);
  t.g.outputs = {t.node(OpKind::kMul, "gate_up", {a, u}, hs)};
  const std::vector<Tensor> in = {random_tensor(xs, 45, -2.f, 2.f)};
  ir::Graph opt = through_gate(t.g, in);
  EXPECT_EQ(count_op(opt, OpKind::kSplit), 0);
  EXPECT_EQ(count_op(opt, OpKind::kFusedPointwise), 0);
  const ir::Node* q = only(opt, OpKind::kQuantLinear);
  ASSERT_NE(q, nullptr);
  EXPECT_FALSE(q->attr_string("gate", "").empty());
  EXPECT_EQ(opt.value(q->outputs[0]).shape, sym(hs));
  EXPECT_TRUE(ir::verify(opt).ok());
}

// A gate other than silu (here erf GELU) stays a FusedPointwise: the GPU computes silu only.
TEST(GatedGemm, OtherGatesAreLeftAlone) {
  Mlp m;
  mlp(m, false, /*gelu=*/true);
  ir::Graph opt = through_gate(m.t.g, m.in);
  EXPECT_EQ(count_op(opt, OpKind::kSplit), 1);
  EXPECT_EQ(count_op(opt, OpKind::kFusedPointwise), 1);
}

// The recognizer: the silu gate in either operand order of each Mul, not other programs.
TEST(GatedGemm, RecognizesTheSiluGateProgram) {
  for (const char* text : {"r0=Sigmoid(in0); r1=Mul(in0,r0); r2=Mul(r1,in1)",
                           "r0=Sigmoid(in0); r1=Mul(r0,in0); r2=Mul(in1,r1)"}) {
    auto p = ir::parse_pw_program(text);
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(ir::pw_is_silu_gate(*p)) << text;
  }
  for (const char* text : {"r0=Sigmoid(in1); r1=Mul(in1,r0); r2=Mul(r1,in0)", "r0=Sigmoid(in0); r1=Mul(in0,r0)",
                           "r0=Sigmoid(in0); r1=Mul(in0,r0); r2=Add(r1,in1)",
                           "r0=Tanh(in0); r1=Mul(in0,r0); r2=Mul(r1,in1)"}) {
    auto p = ir::parse_pw_program(text);
    ASSERT_TRUE(p.ok());
    EXPECT_FALSE(ir::pw_is_silu_gate(*p)) << text;
  }
  auto swapped = ir::parse_pw_program("r0=Sigmoid(in1); r1=Mul(in1,r0); r2=Mul(r1,in0)");
  ASSERT_TRUE(swapped.ok());
  EXPECT_TRUE(ir::pw_is_silu_gate(ir::pw_swap_inputs01(*swapped)));
}

// The default pipeline: RMSNorm -> gate/up -> silu * up -> down is two layers — the gated GEMM
// with the norm in its prologue, and the down projection.
TEST(GatedGemm, PipelineLeavesALlamaMlpAsTwoLayers) {
  TinyGraph t;
  const Shape xs = {3, 16}, hs = {3, 24};
  auto x = t.input("x", xs);
  auto h = t.node(OpKind::kRMSNormalization, "post_attention_layernorm",
                  {x, t.constant("scale", random_tensor({16}, 30, 0.5f, 1.5f))}, xs, rms_attrs(1e-5f));
  auto g = t.node(OpKind::kMatMul, "gate_proj", {h, t.constant("wg", random_tensor({16, 24}, 31))}, hs);
  auto u = t.node(OpKind::kMatMul, "up_proj", {h, t.constant("wu", random_tensor({16, 24}, 32))}, hs);
  auto s = t.node(OpKind::kSigmoid, "act.sigmoid", {g}, hs);
  auto act = t.node(OpKind::kMul, "act", {g, s}, hs);
  auto y = t.node(OpKind::kMul, "gate_up", {act, u}, hs);
  auto d = t.node(OpKind::kMatMul, "down_proj", {y, t.constant("wd", random_tensor({24, 16}, 33))}, xs);
  t.g.outputs = {t.node(OpKind::kAdd, "mlp.residual", {x, d}, xs)};
  const std::vector<Tensor> in = {random_tensor(xs, 34, -2.f, 2.f)};
  auto before = interpret(t.g, in);
  ASSERT_TRUE(before.ok());
  ir::Graph opt = t.g;
  passes::PassOptions o = reference_pass_options();
  ASSERT_TRUE(passes::run_pipeline(opt, o).ok());
  EXPECT_EQ(passes::live_layers(opt), 2);
  EXPECT_EQ(count_op(opt, OpKind::kMatMulBias), 2);
  bool gated = false;
  for (const auto& n : opt.nodes)
    if (!n.removed && n.op == OpKind::kMatMulBias && n.attrs.count("gate")) {
      gated = true;
      EXPECT_EQ(n.inputs.size(), 5u);  // with the norm
    }
  EXPECT_TRUE(gated);
  auto after = interpret(opt, in);
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  EXPECT_LE(relative_diff(*before, *after), 1e-5);
}

}  // namespace
}  // namespace kiln::testing
