// fuse_qdq_conv (docs/decisions/0078), differentially: each tiny Q/DQ conv graph runs on the CPU
// reference before and after the pass (equal outputs up to the unfused graph's float summation),
// then the fused structure is asserted; each blocking rule leaves the graph unchanged and records
// itself on the conv (ir::QdqBlocked, decision 0062).
#include <gtest/gtest.h>

#include "ir/layer_annotations.h"
#include "pass_test_util.h"

namespace kiln {
namespace {

using testing::check_pass;
using testing::count_op;
using testing::qdq_scalar;
using testing::random_tensor;
using testing::TinyGraph;

struct ConvGraph : TinyGraph {
  DataType type = DataType::kInt8;
  // x -> Q(s, z) -> DQ(s, z).
  ir::ValueId fq(ir::ValueId x, const Shape& shape, float s, int z) {
    const ir::ValueId sv = constant("act_s", qdq_scalar(DataType::kFloat32, s));
    const ir::ValueId zv = constant("act_z", qdq_scalar(type, static_cast<float>(z)));
    const ir::ValueId q = node(ir::OpKind::kQuantizeLinear, "act_q", {x, sv, zv}, shape);
    g.value(q).dtype = type;
    return node(ir::OpKind::kDequantizeLinear, "act_dq", {q, sv, zv}, shape);
  }
  // DQ(8-bit weight [K, C, R, S] from a formula, one scale per K on axis 0, zero points wzp).
  ir::ValueId weight(const Shape& shape, int wzp = 0) {
    Tensor w(type, shape);
    for (int64_t i = 0; i < w.numel(); ++i)
      w.data<int8_t>()[i] = type == DataType::kInt8 ? static_cast<int8_t>((i * 37) % 201 - 100)
                                                   : static_cast<int8_t>(((i * 29) % 0x38) | ((i % 3) ? 0 : 0x80));
    const int64_t k = shape[0];
    Tensor s(DataType::kFloat32, {k});
    for (int64_t i = 0; i < k; ++i) s.data<float>()[i] = 0.004f * static_cast<float>(i % 5 + 1);
    Tensor z(type, {k});
    for (int64_t i = 0; i < k; ++i) z.data<int8_t>()[i] = static_cast<int8_t>(type == DataType::kInt8 && i == 1 ? wzp : 0);
    return node(ir::OpKind::kDequantizeLinear, "w_dq", {constant("w", std::move(w)), constant("w_s", s), constant("w_z", z)},
                shape, {{"axis", ir::Attribute::of_int(0)}});
  }
};

const ir::Node* only(const ir::Graph& g, ir::OpKind op) {
  for (const ir::Node& n : g.nodes)
    if (!n.removed && n.op == op) return &n;
  return nullptr;
}

// Relu(Conv(DQ(Q(x)), DQ(W), b) + r) -> one QuantConv reading x, W, w_scale, b, r.
TEST(FuseQdqConv, ConvBiasResidualReluBecomeOneLayer) {
  ConvGraph t;
  const ir::ValueId x = t.input("x", {2, 8, 6, 6});
  const ir::ValueId r = t.input("r", {2, 16, 6, 6});
  const ir::ValueId d = t.fq(x, {2, 8, 6, 6}, 0.02f, -3);
  const ir::ValueId c = t.node(ir::OpKind::kConv, "conv", {d, t.weight({16, 8, 1, 1}), t.constant("b", random_tensor({16}, 3, -1.f, 1.f))},
                               {2, 16, 6, 6});
  const ir::ValueId s = t.node(ir::OpKind::kAdd, "add", {r, c}, {2, 16, 6, 6});
  t.g.outputs = {t.node(ir::OpKind::kRelu, "relu", {s}, {2, 16, 6, 6})};
  const std::vector<Tensor> in = {random_tensor({2, 8, 6, 6}, 1, -2.f, 2.f), random_tensor({2, 16, 6, 6}, 2, -1.f, 1.f)};
  ir::Graph fused = check_pass(t.g, passes::fuse_qdq_conv, in);
  ASSERT_EQ(count_op(fused, ir::OpKind::kQuantConv), 1);
  EXPECT_EQ(count_op(fused, ir::OpKind::kAdd) + count_op(fused, ir::OpKind::kRelu) + count_op(fused, ir::OpKind::kConv), 0);
  const ir::Node& q = *only(fused, ir::OpKind::kQuantConv);
  ASSERT_EQ(q.inputs.size(), 5u);
  EXPECT_EQ(q.inputs[0], x);
  EXPECT_EQ(fused.value(q.inputs[1]).constant->dtype(), DataType::kInt8);
  EXPECT_EQ(q.inputs[4], r);
  EXPECT_EQ(q.attr_string("activation", ""), "Relu");
  EXPECT_EQ(q.attr_int("x_zero_point", 0), -3);
  EXPECT_FLOAT_EQ(q.attr_float("x_scale", 0), 0.02f);
  EXPECT_EQ(q.outputs[0], t.g.outputs[0]);
}

// A 3x3 padded conv with zero point 0 fuses (cuDNN INT8's case); its output, a graph output, is
// not fused into the Add that also reads it.
TEST(FuseQdqConv, PaddedConvFusesAndAGraphOutputStaysItsOwn) {
  ConvGraph t;
  const ir::ValueId x = t.input("x", {1, 4, 5, 5});
  const ir::ValueId d = t.fq(x, {1, 4, 5, 5}, 0.03f, 0);
  const ir::ValueId c = t.node(ir::OpKind::kConv, "conv", {d, t.weight({8, 4, 3, 3})}, {1, 8, 3, 3},
                               {{"strides", ir::Attribute::of_ints({2, 2})}, {"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  const ir::ValueId s = t.node(ir::OpKind::kAdd, "add", {c, c}, {1, 8, 3, 3});
  t.g.outputs = {c, s};
  ir::Graph fused = check_pass(t.g, passes::fuse_qdq_conv, {random_tensor({1, 4, 5, 5}, 4, -2.f, 2.f)});
  ASSERT_EQ(count_op(fused, ir::OpKind::kQuantConv), 1);
  EXPECT_EQ(count_op(fused, ir::OpKind::kAdd), 1);
  EXPECT_EQ(only(fused, ir::OpKind::kQuantConv)->inputs.size(), 3u);  // no bias, no residual
}

// FP8 E4M3: 1x1 and 3x3 convs with C, K multiples of 16 fuse; C = 8 keeps Q/DQ and says why.
TEST(FuseQdqConv, Fp8FusesConvsWithChannelsMultipleOf16) {
  struct Case {
    int64_t c, kernel;
    bool fuses;
  };
  for (const Case cs : {Case{16, 1, true}, Case{16, 3, true}, Case{8, 3, false}}) {
    SCOPED_TRACE(std::to_string(cs.c) + " channels, kernel " + std::to_string(cs.kernel));
    ConvGraph t;
    t.type = DataType::kFloat8E4M3FN;
    const ir::ValueId x = t.input("x", {1, cs.c, 4, 4});
    const ir::ValueId d = t.fq(x, {1, cs.c, 4, 4}, 0.01f, 0);
    const int64_t p = cs.kernel / 2;
    t.g.outputs = {t.node(ir::OpKind::kConv, "conv", {d, t.weight({32, cs.c, cs.kernel, cs.kernel})}, {1, 32, 4, 4},
                          {{"pads", ir::Attribute::of_ints({p, p, p, p})}})};
    ir::Graph fused = check_pass(t.g, passes::fuse_qdq_conv, {random_tensor({1, cs.c, 4, 4}, 5, -2.f, 2.f)});
    EXPECT_EQ(count_op(fused, ir::OpKind::kQuantConv), cs.fuses ? 1 : 0);
    if (!cs.fuses) {
      auto b = ir::qdq_blocked(*only(fused, ir::OpKind::kConv));
      ASSERT_TRUE(b.has_value());
      EXPECT_NE(b->rule.find("FP8 conv with C or K not a multiple of 16"), std::string::npos) << b->rule;
      EXPECT_EQ(b->detail, "C = 8, K = 32");
      EXPECT_EQ(b->type, "fp8e4m3");
      EXPECT_EQ(b->nodes, "act_q -> act_dq, w_dq");
    }
  }
}

// Each blocking condition: no QuantConv, the rule recorded on the conv, the outputs unchanged.
TEST(FuseQdqConv, EachBlockedConditionKeepsQdqAndNamesItsRule) {
  struct Case {
    const char* what;
    int64_t c, k, group, pad;
    int act_zp, w_zp;
    const char* rule;
  };
  const Case cases[] = {
      {"C = 3", 3, 8, 1, 0, 0, 0, "C or K not a multiple of 4"},
      {"K = 6", 8, 6, 1, 0, 0, 0, "C or K not a multiple of 4"},
      {"grouped", 8, 8, 2, 0, 0, 0, "grouped convolution"},
      {"weight zero point", 8, 8, 1, 0, 0, 4, "non-zero weight zero point"},
      {"zero point with padding", 8, 8, 1, 1, 5, 0, "zero point with padding"},
  };
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.what);
    ConvGraph t;
    const ir::ValueId x = t.input("x", {1, cs.c, 4, 4});
    const ir::ValueId d = t.fq(x, {1, cs.c, 4, 4}, 0.05f, cs.act_zp);
    const int64_t ks = 2 * cs.pad + 1;
    t.g.outputs = {t.node(ir::OpKind::kConv, "conv", {d, t.weight({cs.k, cs.c / cs.group, ks, ks}, cs.w_zp)},
                          {1, cs.k, 4, 4},
                          {{"group", ir::Attribute::of_int(cs.group)},
                           {"pads", ir::Attribute::of_ints({cs.pad, cs.pad, cs.pad, cs.pad})}})};
    ir::Graph out = check_pass(t.g, passes::fuse_qdq_conv, {random_tensor({1, cs.c, 4, 4}, 6, -2.f, 2.f)});
    EXPECT_EQ(count_op(out, ir::OpKind::kQuantConv), 0);
    const ir::Node* conv = only(out, ir::OpKind::kConv);
    ASSERT_NE(conv, nullptr);
    auto b = ir::qdq_blocked(*conv);
    ASSERT_TRUE(b.has_value());
    EXPECT_NE(b->rule.find(cs.rule), std::string::npos) << b->rule;
    EXPECT_EQ(b->type, "int8");
  }
}

}  // namespace
}  // namespace kiln
