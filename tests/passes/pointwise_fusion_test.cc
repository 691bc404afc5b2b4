// fuse_pointwise and FusedPointwise: differential tests (unfused vs fused on the CPU reference,
// random non-zero data), the fused structure and program, regions that must not fuse, the
// program text format, the CPU kernel in float16, the verifier, and the plan round trip.
// Also the conv epilogue's SiLU and GELU activations.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "builder/build_from_graph.h"
#include "passes/pass_test_util.h"

#include "core/numerics.h"
#include "ir/pointwise_program.h"
#include "ir/verifier.h"
#include "kiln/builder.h"
#include "plan/plan_format.h"

namespace kiln::testing {
namespace {

using ir::OpKind;

ir::ValueId scalar(TinyGraph& t, const std::string& name, float v) {
  return t.constant(name, Tensor::scalar(DataType::kFloat32, v));
}

const ir::Node* only_fused(const ir::Graph& g) {
  for (const auto& n : g.nodes)
    if (!n.removed && n.op == OpKind::kFusedPointwise) return &n;
  return nullptr;
}

// y = Sigmoid(x * c + 0.5) * z with c per-channel [3,1,1] and z broadcast along the last dim.
TEST(FusePointwise, ChainWithBroadcastBecomesOneProgram) {
  TinyGraph t;
  const Shape xs = {2, 3, 4, 5};
  auto x = t.input("x", xs);
  auto z = t.input("z", {5});
  auto c = t.constant("c", random_tensor({3, 1, 1}, 41, 0.5f, 2.f));
  auto m = t.node(OpKind::kMul, "mul", {x, c}, xs);
  auto a = t.node(OpKind::kAdd, "add", {m, scalar(t, "half", 0.5f)}, xs);
  auto s = t.node(OpKind::kSigmoid, "sig", {a}, xs);
  t.g.outputs = {t.node(OpKind::kMul, "mul_z", {s, z}, xs)};
  const std::string out_name = t.g.value(t.g.outputs[0]).name;
  ir::Graph opt = check_pass(t.g, passes::fuse_pointwise, {random_tensor(xs, 42, -3.f, 3.f), random_tensor({5}, 43)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  const ir::Node* f = only_fused(opt);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->attr_string("program", ""), "r0=Mul(in0,in1); r1=Add(r0,0.5); r2=Sigmoid(r1); r3=Mul(r2,in2)");
  EXPECT_EQ(f->inputs, (std::vector<ir::ValueId>{x, c, z}));
  EXPECT_EQ(f->origin, (std::vector<std::string>{"mul_z", "mul", "add", "sig"}));
  EXPECT_EQ(opt.value(opt.outputs[0]).name, out_name);
  EXPECT_TRUE(ir::verify(opt).ok());
}

// t * Sigmoid(t) with t = x + y: t feeds two layers of the region (a DAG, not a chain).
TEST(FusePointwise, SiluDagOverAnAddBecomesOneProgram) {
  TinyGraph t;
  const Shape xs = {4, 6};
  auto x = t.input("x", xs);
  auto y = t.input("y", {1, 6});
  auto s = t.node(OpKind::kAdd, "add", {x, y}, xs);
  auto sg = t.node(OpKind::kSigmoid, "sig", {s}, xs);
  t.g.outputs = {t.node(OpKind::kMul, "mul", {s, sg}, xs)};
  ir::Graph opt = check_pass(t.g, passes::fuse_pointwise, {random_tensor(xs, 44, -4.f, 4.f), random_tensor({1, 6}, 45)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  const ir::Node* f = only_fused(opt);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->attr_string("program", ""), "r0=Add(in0,in1); r1=Sigmoid(r0); r2=Mul(r0,r1)");
}

// Every opcode in one chain (domains kept valid: log/sqrt see positive values).
TEST(FusePointwise, EveryOpcodeMatchesTheUnfusedLayers) {
  TinyGraph t;
  const Shape xs = {3, 7, 5};
  auto x = t.input("x", xs);
  auto w = t.input("w", {7, 1});
  auto v = x;
  int i = 0;
  auto un = [&](OpKind op, std::map<std::string, ir::Attribute> attrs = {}) {
    v = t.node(op, "u" + std::to_string(i++), {v}, xs, std::move(attrs));
  };
  auto bin = [&](OpKind op, ir::ValueId other) { v = t.node(op, "b" + std::to_string(i++), {v, other}, xs); };
  un(OpKind::kAbs);
  bin(OpKind::kAdd, scalar(t, "one", 1.f));
  un(OpKind::kLog);
  un(OpKind::kSqrt);
  un(OpKind::kReciprocal);
  un(OpKind::kNeg);
  bin(OpKind::kMul, x);
  un(OpKind::kExp);
  bin(OpKind::kSub, w);
  un(OpKind::kTanh);
  bin(OpKind::kMul, scalar(t, "three", 3.f));
  un(OpKind::kErf);
  bin(OpKind::kDiv, scalar(t, "two", 0.7f));
  un(OpKind::kLeakyRelu, {{"alpha", ir::Attribute::of_float(0.2f)}});
  un(OpKind::kElu, {{"alpha", ir::Attribute::of_float(0.9f)}});
  un(OpKind::kSoftplus);
  bin(OpKind::kSub, scalar(t, "shift", 1.2f));
  un(OpKind::kHardSigmoid, {{"alpha", ir::Attribute::of_float(0.3f)}, {"beta", ir::Attribute::of_float(0.4f)}});
  bin(OpKind::kMul, x);
  un(OpKind::kHardSwish);
  v = t.node(OpKind::kClip, "clip", {v, scalar(t, "lo", -0.6f), scalar(t, "hi", 0.9f)}, xs);
  un(OpKind::kGelu);
  un(OpKind::kGelu, {{"approximate", ir::Attribute::of_string("tanh")}});
  bin(OpKind::kPow, scalar(t, "p", 2.f));
  bin(OpKind::kMax, w);
  bin(OpKind::kMin, x);
  un(OpKind::kRelu);
  un(OpKind::kSigmoid);
  // QuantizeLinear -> DequantizeLinear pairs (int8 zp -3, uint8 zp 128, fp8 e4m3fn): one
  // instruction each, the Q absorbed with its DQ.
  auto qdq = [&](DataType zt, const Tensor& zp, float scale) {
    const ir::ValueId sv = scalar(t, "qs" + std::to_string(i), scale);
    const ir::ValueId zv = t.constant("qz" + std::to_string(i), zp);
    const ir::ValueId q = t.node(OpKind::kQuantizeLinear, "q" + std::to_string(i++), {v, sv, zv}, xs);
    t.g.value(q).dtype = zt;
    v = t.node(OpKind::kDequantizeLinear, "dq" + std::to_string(i++), {q, sv, zv}, xs);
  };
  qdq(DataType::kInt8, Tensor::scalar<int8_t>(DataType::kInt8, -3), 0.01f);
  qdq(DataType::kUInt8, Tensor::scalar<uint8_t>(DataType::kUInt8, 128), 0.02f);
  qdq(DataType::kFloat8E4M3FN, Tensor(DataType::kFloat8E4M3FN, {}), 0.005f);
  qdq(DataType::kFloat8E5M2, Tensor(DataType::kFloat8E5M2, {}), 0.0001f);
  t.g.outputs = {v};
  ir::Graph opt = check_pass(t.g, passes::fuse_pointwise, {random_tensor(xs, 46, -2.f, 2.f), random_tensor({7, 1}, 47, -0.3f, 0.3f)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  const ir::Node* f = only_fused(opt);
  ASSERT_NE(f, nullptr);
  auto prog = ir::parse_pw_program(f->attr_string("program", ""));
  ASSERT_TRUE(prog.ok()) << prog.status().to_string();
  EXPECT_EQ(prog->instrs.size(), 32u);
  EXPECT_EQ(f->inputs.size(), 2u);  // x and w; every scalar became an immediate
  std::set<ir::PwOpcode> ops;
  for (const auto& in : prog->instrs) ops.insert(in.op);
  EXPECT_EQ(static_cast<int>(ops.size()), static_cast<int>(ir::PwOpcode::kSelu));  // the rest: the next test
}

// The opcodes from Selu on (the remaining ONNX float activations, unary math and float Mod) in one
// chain, domains kept valid (asin / acos / atanh see (-1, 1), acosh sees >= 1).
TEST(FusePointwise, ActivationAndMathOpcodesMatchTheUnfusedLayers) {
  TinyGraph t;
  const Shape xs = {3, 7, 5};
  auto x = t.input("x", xs);
  auto w = t.input("w", {7, 1});
  auto v = x;
  int i = 0;
  auto un = [&](OpKind op, std::map<std::string, ir::Attribute> attrs = {}) {
    v = t.node(op, "u" + std::to_string(i++), {v}, xs, std::move(attrs));
  };
  auto bin = [&](OpKind op, ir::ValueId other, std::map<std::string, ir::Attribute> attrs = {}) {
    v = t.node(op, "b" + std::to_string(i++), {v, other}, xs, std::move(attrs));
  };
  un(OpKind::kSelu, {{"alpha", ir::Attribute::of_float(1.5f)}, {"gamma", ir::Attribute::of_float(1.1f)}});
  un(OpKind::kCelu, {{"alpha", ir::Attribute::of_float(0.8f)}});
  un(OpKind::kSoftsign);                       // (-1, 1)
  un(OpKind::kAsin);
  un(OpKind::kSinh);
  un(OpKind::kAsinh);
  un(OpKind::kTanh);                           // (-1, 1)
  un(OpKind::kAtanh);
  un(OpKind::kAtan);                           // (-pi/2, pi/2)
  un(OpKind::kMish);
  un(OpKind::kCosh);                           // >= 1
  un(OpKind::kAcosh);                          // >= 0
  un(OpKind::kTan);                            // atan-free: acosh(cosh(mish)) = |mish| < 1.2 here
  bin(OpKind::kMod, w, {{"fmod", ir::Attribute::of_int(1)}});
  bin(OpKind::kMod, w, {{"fmod", ir::Attribute::of_int(0)}});
  un(OpKind::kShrink, {{"lambd", ir::Attribute::of_float(0.1f)}, {"bias", ir::Attribute::of_float(0.05f)}});
  un(OpKind::kThresholdedRelu, {{"alpha", ir::Attribute::of_float(-0.2f)}});
  bin(OpKind::kMul, scalar(t, "four", 4.f));
  un(OpKind::kRound);
  bin(OpKind::kAdd, x);
  un(OpKind::kCeil);
  bin(OpKind::kSub, x);
  un(OpKind::kFloor);
  bin(OpKind::kAdd, x);
  un(OpKind::kSign);
  bin(OpKind::kMul, scalar(t, "half", 0.5f));
  un(OpKind::kAcos);                           // sign * 0.5 in {-0.5, 0, 0.5}
  t.g.outputs = {v};
  ir::Graph opt = check_pass(t.g, passes::fuse_pointwise, {random_tensor(xs, 46, -2.f, 2.f), random_tensor({7, 1}, 47, 0.5f, 1.f)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  const ir::Node* f = only_fused(opt);
  ASSERT_NE(f, nullptr);
  auto prog = ir::parse_pw_program(f->attr_string("program", ""));
  ASSERT_TRUE(prog.ok()) << prog.status().to_string();
  std::set<ir::PwOpcode> ops;
  for (const auto& in : prog->instrs)
    if (in.op >= ir::PwOpcode::kSelu) ops.insert(in.op);
  EXPECT_EQ(static_cast<int>(ops.size()), static_cast<int>(ir::PwOpcode::kCount) - static_cast<int>(ir::PwOpcode::kSelu));
}

// Max / Min propagate NaN from either operand (numpy.maximum / minimum, the CPU reference's Max
// and Min), in the fused program as in the unfused layers.
TEST(FusePointwise, MaxMinPropagateNaNFromEitherOperand) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (ir::PwOpcode op : {ir::PwOpcode::kMax, ir::PwOpcode::kMin}) {
    EXPECT_TRUE(std::isnan(ir::pw_apply(op, nan, 1.f, 0.f)));
    EXPECT_TRUE(std::isnan(ir::pw_apply(op, 1.f, nan, 0.f)));
  }
  EXPECT_EQ(ir::pw_apply(ir::PwOpcode::kMax, -1.f, 2.f, 0.f), 2.f);
  EXPECT_EQ(ir::pw_apply(ir::PwOpcode::kMin, -1.f, 2.f, 0.f), -1.f);
  // Python's % takes the divisor's sign; C fmod the dividend's.
  EXPECT_EQ(ir::pw_apply(ir::PwOpcode::kPyMod, -7.f, 3.f, 0.f), 2.f);
  EXPECT_EQ(ir::pw_apply(ir::PwOpcode::kPyMod, 7.f, -3.f, 0.f), -2.f);
  EXPECT_EQ(ir::pw_apply(ir::PwOpcode::kFmod, -7.f, 3.f, 0.f), -1.f);
  EXPECT_EQ(ir::pw_apply(ir::PwOpcode::kRound, 2.5f, 0.f, 0.f), 2.f);  // half to even
  EXPECT_EQ(ir::pw_apply(ir::PwOpcode::kRound, -3.5f, 0.f, 0.f), -4.f);
}

// The QDQ opcodes' FP8 rounding is the bit-exact converter's (core/numerics: ONNX Cast with
// saturate): every E4M3FN / E5M2 code's value, the midpoints between neighbours (ties to even),
// values past the largest finite one, and a sweep of magnitudes.
TEST(FusePointwise, Fp8QdqRoundingMatchesTheBitExactConverters) {
  std::vector<float> probes;
  for (int c = 0; c < 256; ++c) {
    const float e4 = fp8e4m3fn_to_float(static_cast<uint8_t>(c)), e5 = fp8e5m2_to_float(static_cast<uint8_t>(c));
    for (float v : {e4, e5})
      if (std::isfinite(v)) probes.push_back(v);
  }
  const size_t n = probes.size();
  std::sort(probes.begin(), probes.end());
  for (size_t i = 0; i + 1 < n; ++i) probes.push_back(0.5f * (probes[i] + probes[i + 1]));
  for (float v : {500.f, 1e4f, 6e4f, 61440.f, 1e9f, 3e-9f, 1e-30f})
    for (float sgn : {1.f, -1.f}) probes.push_back(sgn * v);
  for (float v = 1e-7f; v < 1e5f; v *= 1.0137f) probes.push_back(v);
  for (float v : probes) {
    EXPECT_EQ(ir::round_to_e4m3fn(v), fp8e4m3fn_to_float(float_to_fp8e4m3fn(v, true))) << v;
    EXPECT_EQ(ir::round_to_e5m2(v), fp8e5m2_to_float(float_to_fp8e5m2(v, true))) << v;
  }
}

// A lone per-tensor Q/DQ pair becomes a one-instruction program (the GPU has no Q/DQ layers);
// a pair whose quantized tensor is also read elsewhere, or with different scales, stays.
TEST(FusePointwise, LoneQdqPairBecomesOneInstruction) {
  TinyGraph t;
  const Shape xs = {2, 9};
  auto x = t.input("x", xs);
  auto s = scalar(t, "s", 0.05f);
  auto z = t.constant("z", Tensor::scalar<int8_t>(DataType::kInt8, 0));
  auto q = t.node(OpKind::kQuantizeLinear, "q", {x, s, z}, xs);
  t.g.value(q).dtype = DataType::kInt8;
  t.g.outputs = {t.node(OpKind::kDequantizeLinear, "dq", {q, s, z}, xs)};
  ir::Graph opt = check_pass(t.g, passes::fuse_pointwise, {random_tensor(xs, 48, -8.f, 8.f)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  const ir::Node* f = only_fused(opt);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->attr_string("program", ""), "r0=QdqS8(in0,0.05,0)");
  EXPECT_EQ(f->origin, (std::vector<std::string>{"dq", "q"}));

  TinyGraph u;
  auto ux = u.input("x", xs);
  auto us = scalar(u, "s", 0.05f), us2 = scalar(u, "s2", 0.1f);
  auto uz = u.constant("z", Tensor::scalar<int8_t>(DataType::kInt8, 0));
  auto uq = u.node(OpKind::kQuantizeLinear, "q", {ux, us, uz}, xs);
  u.g.value(uq).dtype = DataType::kInt8;
  u.g.outputs = {u.node(OpKind::kDequantizeLinear, "dq", {uq, us2, uz}, xs)};
  ir::Graph kept = check_pass(u.g, passes::fuse_pointwise, {random_tensor(xs, 49, -8.f, 8.f)});
  EXPECT_EQ(passes::live_layers(kept), 2);  // scales differ: not a pair
}

// sig's output is also a graph output: it must stay materialized, so the Mul after it cannot
// take it as a register; {add, sig} fuse, the lone Mul stays.
TEST(FusePointwise, RegionStopsWhereAnIntermediateIsAGraphOutput) {
  TinyGraph t;
  const Shape xs = {2, 8};
  auto x = t.input("x", xs);
  auto a = t.node(OpKind::kAdd, "add", {x, scalar(t, "c", 0.25f)}, xs);
  auto s = t.node(OpKind::kSigmoid, "sig", {a}, xs);
  auto m = t.node(OpKind::kMul, "mul", {s, x}, xs);
  t.g.outputs = {m, s};
  ir::Graph opt = check_pass(t.g, passes::fuse_pointwise, {random_tensor(xs, 48)});
  EXPECT_EQ(passes::live_layers(opt), 2);
  EXPECT_EQ(count_op(opt, OpKind::kMul), 1);
  const ir::Node* f = only_fused(opt);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->outputs[0], s);
  EXPECT_EQ(f->attr_string("program", ""), "r0=Add(in0,0.25); r1=Sigmoid(r0)");
}

// relu's output also feeds a ReduceMean outside any region: relu ends its own region.
TEST(FusePointwise, NotFusedWhenAnIntermediateEscapesToAnotherLayer) {
  TinyGraph t;
  const Shape xs = {3, 4};
  auto x = t.input("x", xs);
  auto r = t.node(OpKind::kRelu, "relu", {x}, xs);
  auto mean = t.node(OpKind::kReduceMean, "mean", {r}, {3, 1}, {{"axes", ir::Attribute::of_ints({1})}});
  auto e = t.node(OpKind::kExp, "exp", {r}, xs);
  t.g.outputs = {t.node(OpKind::kSub, "sub", {e, mean}, xs)};
  ir::Graph opt = check_pass(t.g, passes::fuse_pointwise, {random_tensor(xs, 49)});
  EXPECT_EQ(count_op(opt, OpKind::kRelu), 1);
  EXPECT_EQ(count_op(opt, OpKind::kReduceMean), 1);
  const ir::Node* f = only_fused(opt);
  ASSERT_NE(f, nullptr);  // exp -> sub (mean is an input)
  EXPECT_EQ(f->attr_string("program", ""), "r0=Exp(in0); r1=Sub(r0,in1)");
  EXPECT_EQ(f->inputs, (std::vector<ir::ValueId>{r, mean}));
}

TEST(FusePointwise, SingleLayersAndTensorExponentsStayAsTheyAre) {
  TinyGraph t;
  const Shape xs = {4};
  auto x = t.input("x", xs);
  auto y = t.input("y", xs);
  auto p = t.node(OpKind::kPow, "pow", {x, y}, xs);  // exponent is not a constant
  auto r = t.node(OpKind::kTanh, "tanh", {p}, xs);
  auto q = t.node(OpKind::kSigmoid, "lone", {y}, xs);
  t.g.outputs = {r, q};
  ir::Graph opt = check_pass(t.g, passes::fuse_pointwise, {random_tensor(xs, 50, 0.5f, 2.f), random_tensor(xs, 51)});
  EXPECT_EQ(count_op(opt, OpKind::kFusedPointwise), 0);
  EXPECT_EQ(passes::live_layers(opt), 3);
}

// Ten inputs summed: no region may read more than 8 inputs, the result is unchanged.
TEST(FusePointwise, InputLimitSplitsRegions) {
  TinyGraph t;
  const Shape xs = {2, 3};
  std::vector<Tensor> in;
  ir::ValueId v = t.input("x0", xs);
  in.push_back(random_tensor(xs, 60));
  for (int k = 1; k < 10; ++k) {
    v = t.node(OpKind::kAdd, "add" + std::to_string(k), {v, t.input("x" + std::to_string(k), xs)}, xs);
    in.push_back(random_tensor(xs, 60 + k));
  }
  t.g.outputs = {v};
  ir::Graph opt = check_pass(t.g, passes::fuse_pointwise, in);
  EXPECT_LT(passes::live_layers(opt), 9);
  for (const auto& n : opt.nodes) {
    if (!n.removed) {
      EXPECT_LE(n.inputs.size(), static_cast<size_t>(ir::kMaxPwInputs));
    }
  }
  EXPECT_TRUE(ir::verify(opt).ok());
}

// The full pipeline keeps GELU for fuse_gelu and the residual for the conv; the rest fuses.
TEST(FusePointwise, PipelineLeavesPatternsToThePatternPasses) {
  TinyGraph t;
  const Shape xs = {1, 4, 5, 5};
  auto x = t.input("x", xs);
  auto w = t.constant("w", random_tensor({4, 4, 3, 3}, 70, -0.4f, 0.4f));
  auto conv = t.node(OpKind::kConv, "conv", {x, w}, xs, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  auto add = t.node(OpKind::kAdd, "res", {conv, x}, xs);
  auto sig = t.node(OpKind::kSigmoid, "sig", {add}, xs);
  auto silu = t.node(OpKind::kMul, "silu", {add, sig}, xs);
  auto scale = t.node(OpKind::kMul, "scale", {silu, t.constant("g", random_tensor({4, 1, 1}, 71, 0.5f, 1.5f))}, xs);
  t.g.outputs = {t.node(OpKind::kTanh, "tanh", {scale}, xs)};
  std::vector<Tensor> in = {random_tensor(xs, 72)};
  auto before = interpret(t.g, in);
  ASSERT_TRUE(before.ok());
  ir::Graph opt = t.g;
  ASSERT_TRUE(passes::run_pipeline(opt, kiln::testing::reference_pass_options()).ok());
  auto after = interpret(opt, in);
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  EXPECT_LE(relative_diff(*before, *after), 1e-5);
  EXPECT_EQ(passes::live_layers(opt), 2);
  ASSERT_EQ(count_op(opt, OpKind::kFusedConv), 1);
  EXPECT_EQ(count_op(opt, OpKind::kFusedPointwise), 1);
  for (const auto& n : opt.nodes) {
    if (n.op == OpKind::kFusedConv) {
      EXPECT_EQ(n.attr_string("activation", ""), "Silu");
    }
  }
}

// ------------------------------------------------------------------ conv epilogue: SiLU, GELU

struct ConvGraph {
  TinyGraph t;
  ir::ValueId x, conv;
  Shape xs = {1, 3, 6, 6}, ys = {1, 4, 6, 6};
  ConvGraph() {
    x = t.input("x", xs);
    auto w = t.constant("w", random_tensor({4, 3, 3, 3}, 80, -0.5f, 0.5f));
    auto b = t.constant("b", random_tensor({4}, 81));
    conv = t.node(OpKind::kConv, "conv", {x, w, b}, ys, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  }
};

TEST(FuseConvEpilogue, ConvSiluBecomesOneLayer) {
  for (bool sig_first : {true, false}) {
    ConvGraph c;
    auto s = c.t.node(OpKind::kSigmoid, "sig", {c.conv}, c.ys);
    auto m = c.t.node(OpKind::kMul, "mul", sig_first ? std::vector<ir::ValueId>{s, c.conv} : std::vector<ir::ValueId>{c.conv, s}, c.ys);
    c.t.g.outputs = {m};
    ir::Graph opt = check_pass(c.t.g, passes::fuse_conv_epilogue, {random_tensor(c.xs, 82, -2.f, 2.f)});
    EXPECT_EQ(passes::live_layers(opt), 1);
    ASSERT_EQ(count_op(opt, OpKind::kFusedConv), 1);
    EXPECT_EQ(opt.nodes[0].attr_string("activation", ""), "Silu");
    EXPECT_EQ(opt.nodes[0].origin, (std::vector<std::string>{"conv", "sig", "mul"}));
    EXPECT_EQ(opt.nodes[0].outputs[0], m);
  }
}

TEST(FuseConvEpilogue, ConvResidualSiluBecomesOneLayer) {
  ConvGraph c;
  auto r = c.t.input("r", c.ys);
  auto a = c.t.node(OpKind::kAdd, "add", {c.conv, r}, c.ys);
  auto s = c.t.node(OpKind::kSigmoid, "sig", {a}, c.ys);
  c.t.g.outputs = {c.t.node(OpKind::kMul, "mul", {a, s}, c.ys)};
  ir::Graph opt = check_pass(c.t.g, passes::fuse_conv_epilogue, {random_tensor(c.xs, 83), random_tensor(c.ys, 84)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  ASSERT_EQ(count_op(opt, OpKind::kFusedConv), 1);
  EXPECT_EQ(opt.nodes[0].attr_string("activation", ""), "Silu");
  EXPECT_EQ(opt.nodes[0].inputs.size(), 4u);
}

TEST(FuseConvEpilogue, ConvGeluBothFormsBecomeOneLayer) {
  for (const char* approx : {"none", "tanh"}) {
    ConvGraph c;
    c.t.g.outputs = {c.t.node(OpKind::kGelu, "gelu", {c.conv}, c.ys, {{"approximate", ir::Attribute::of_string(approx)}})};
    ir::Graph opt = check_pass(c.t.g, passes::fuse_conv_epilogue, {random_tensor(c.xs, 85, -2.f, 2.f)});
    EXPECT_EQ(passes::live_layers(opt), 1);
    ASSERT_EQ(count_op(opt, OpKind::kFusedConv), 1);
    EXPECT_EQ(opt.nodes[0].attr_string("activation", ""), std::string(approx) == "tanh" ? "GeluTanh" : "Gelu");
  }
}

// The sigmoid is also read elsewhere: no SiLU (the conv keeps a plain output).
TEST(FuseConvEpilogue, SiluNotFusedWhenTheSigmoidEscapes) {
  ConvGraph c;
  auto s = c.t.node(OpKind::kSigmoid, "sig", {c.conv}, c.ys);
  auto m = c.t.node(OpKind::kMul, "mul", {c.conv, s}, c.ys);
  c.t.g.outputs = {m, s};
  ir::Graph opt = check_pass(c.t.g, passes::fuse_conv_epilogue, {random_tensor(c.xs, 86)});
  EXPECT_EQ(count_op(opt, OpKind::kFusedConv), 0);
  EXPECT_EQ(count_op(opt, OpKind::kMul), 1);
}

// ------------------------------------------------------------------ program text, kernel, verifier, plan

TEST(PointwiseProgram, TextRoundTripsAndErrorsSayWhere) {
  const std::string text = "r0=Mul(in0,in1); r1=Clip(r0,-inf,6); r2=LeakyRelu(r1,0.1); r3=Add(r2,in2)";
  auto p = ir::parse_pw_program(text);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->num_inputs, 3);
  EXPECT_EQ(ir::pw_program_text(*p), text);
  EXPECT_EQ(p->instrs[2].args[1].imm, 0.1f);
  for (const auto& [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {"r0=Frob(in0)", "unknown opcode 'Frob'"},
           {"r0=Add(in0,r1)", "register r1 is read before it is defined"},
           {"r0=Sigmoid(in0,in1)", "Sigmoid takes 1 operand(s), got 2"},
           {"r1=Relu(in0)", "must define r0"},
           {"r0=Add(in0,in9)", "past the limit"},
           {"r0=Add(in0,x)", "operand 'x'"},
           {"", "no instructions"}}) {
    auto r = ir::parse_pw_program(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  }
}

// A hand-built FusedPointwise layer: float16 storage agrees with float32 within fp16 rounding,
// and a damaged program is a clean error naming the layer.
TEST(PointwiseProgram, CpuKernelFloat16AndErrors) {
  auto make = [](DataType dt, const std::string& program) {
    ir::Graph g;
    g.opset_imports[""] = 17;
    ir::ValueId a = g.add_value("a", dt), b = g.add_value("b", dt), y = g.add_value("y", dt);
    g.inputs = {a, b};
    ir::Node n;
    n.name = "fp";
    n.op = OpKind::kFusedPointwise;
    n.inputs = {a, b};
    n.outputs = {y};
    n.attrs["program"] = ir::Attribute::of_string(program);
    g.add_node(n);
    g.outputs = {y};
    return g;
  };
  const std::string prog = "r0=Mul(in0,in1); r1=Tanh(r0); r2=HardSwish(r1); r3=Add(r2,in0)";
  Tensor a = random_tensor({2, 3, 4}, 90, -2.f, 2.f), b = random_tensor({3, 1}, 91, -2.f, 2.f);
  auto ref = interpret(make(DataType::kFloat32, prog), {a, b});
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  ASSERT_EQ((*ref)[0].shape(), (Shape{2, 3, 4}));
  auto to_half = [](const Tensor& t) {
    Tensor h(DataType::kFloat16, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) h.data<Float16>()[i] = Float16{float_to_fp16(t.data<float>()[i])};
    return h;
  };
  auto half = interpret(make(DataType::kFloat16, prog), {to_half(a), to_half(b)});
  ASSERT_TRUE(half.ok()) << half.status().to_string();
  ASSERT_EQ((*half)[0].dtype(), DataType::kFloat16);
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const float r = (*ref)[0].data<float>()[i];
    num = std::max(num, abs_diff_nan_aware(fp16_to_float((*half)[0].data<Float16>()[i].bits), r));
    den = std::max(den, static_cast<double>(std::fabs(r)));
  }
  EXPECT_GT(den, 0.1);
  EXPECT_LE(num / den, 4e-3);
  auto bad = interpret(make(DataType::kFloat32, "r0=Mul(in0,in1); r1=Nope(r0)"), {a, b});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("node 'fp' (FusedPointwise)"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("unknown opcode 'Nope'"), std::string::npos) << bad.status().message();
  Status v = ir::verify(make(DataType::kFloat32, "r0=Exp(in0)"));  // reads 1 input, the layer has 2
  EXPECT_FALSE(v.ok());
  EXPECT_NE(v.message().find("the program reads 1 inputs, the layer has 2"), std::string::npos) << v.message();
}

// Built into a plan by the Builder (the full pipeline), read back: the same program, bit-exact
// bytes, and the same outputs as the unoptimized graph.
TEST(PointwiseProgram, PlanRoundTrip) {
  TinyGraph t;
  const Shape xs = {2, 6};
  auto x = t.input("x", xs);
  auto e = t.node(OpKind::kElu, "elu", {x}, xs, {{"alpha", ir::Attribute::of_float(0.7f)}});
  auto m = t.node(OpKind::kMul, "mul", {e, t.constant("k", random_tensor({6}, 92, 0.5f, 1.5f))}, xs);
  t.g.outputs = {t.node(OpKind::kSub, "sub", {scalar(t, "one", 1.f), m}, xs)};
  BuilderConfig c;
  OptimizationProfile prof;
  ASSERT_TRUE(prof.set_dimensions("x", xs, xs, xs).ok());
  c.profiles.push_back(prof);
  auto bytes = build_from_graph(t.g, c);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto plan = plan::read_plan(bytes->data(), bytes->size());
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan::write_plan(*plan), *bytes);
  const ir::Node* f = only_fused(plan->graph);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->attr_string("program", ""), "r0=Elu(in0,0.7); r1=Mul(r0,in1); r2=Sub(1,r1)");
  EXPECT_EQ(plan->graph.nodes.size(), 1u);
  std::vector<Tensor> in = {random_tensor(xs, 93, -2.f, 2.f)};
  auto before = interpret(t.g, in);
  auto after = interpret(plan->graph, in);
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_LE(relative_diff(*before, *after), 1e-6);
}

}  // namespace
}  // namespace kiln::testing
