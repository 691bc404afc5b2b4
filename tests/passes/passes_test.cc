// Differential tests of the optimizer passes: same outputs before and after, expected structure.
#include "passes/pass_test_util.h"

namespace kiln::testing {
namespace {

using ir::OpKind;

TEST(Passes, EliminateNoopsRemovesIdentityAndDropoutKeepsOutputName) {
  TinyGraph t;
  auto x = t.input("x", {2, 3});
  auto a = t.node(OpKind::kIdentity, "id1", {x}, {2, 3});
  auto b = t.node(OpKind::kRelu, "relu", {a}, {2, 3});
  auto c = t.node(OpKind::kDropout, "drop", {b}, {2, 3});
  t.g.outputs = {c};
  const std::string out_name = t.g.value(c).name;
  ir::Graph opt = check_pass(t.g, passes::eliminate_noops, {random_tensor({2, 3}, 1)});
  EXPECT_EQ(count_op(opt, OpKind::kIdentity), 0);
  EXPECT_EQ(count_op(opt, OpKind::kDropout), 0);
  EXPECT_EQ(count_op(opt, OpKind::kRelu), 1);
  EXPECT_EQ(opt.value(opt.outputs[0]).name, out_name);
}

TEST(Passes, FoldConstantsEvaluatesConstantLayers) {
  TinyGraph t;
  auto x = t.input("x", {4});
  auto c1 = t.constant("c1", random_tensor({4}, 2));
  auto c2 = t.constant("c2", random_tensor({4}, 3));
  auto s = t.node(OpKind::kAdd, "const_add", {c1, c2}, {4});
  auto y = t.node(OpKind::kMul, "mul", {x, s}, {4});
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, passes::fold_constants, {random_tensor({4}, 4)});
  EXPECT_EQ(count_op(opt, OpKind::kAdd), 0);
  EXPECT_EQ(count_op(opt, OpKind::kMul), 1);
}

TEST(Passes, FoldBatchNormIntoConv) {
  TinyGraph t;
  auto x = t.input("x", {1, 3, 8, 8});
  auto w = t.constant("w", random_tensor({4, 3, 3, 3}, 5));
  auto b = t.constant("b", random_tensor({4}, 6));
  auto conv = t.node(OpKind::kConv, "conv", {x, w, b}, {1, 4, 8, 8}, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  auto gamma = t.constant("gamma", random_tensor({4}, 7, 0.5f, 1.5f));
  auto beta = t.constant("beta", random_tensor({4}, 8));
  auto mean = t.constant("mean", random_tensor({4}, 9));
  auto var = t.constant("var", random_tensor({4}, 10, 0.1f, 2.f));
  auto y = t.node(OpKind::kBatchNormalization, "bn", {conv, gamma, beta, mean, var}, {1, 4, 8, 8});
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, passes::fold_batchnorm, {random_tensor({1, 3, 8, 8}, 11)});
  EXPECT_EQ(count_op(opt, OpKind::kBatchNormalization), 0);
  ASSERT_EQ(count_op(opt, OpKind::kConv), 1);
  EXPECT_EQ(opt.nodes[0].origin, (std::vector<std::string>{"conv", "bn"}));
}

// BN over Gemm's N axis, with transB = 1 and 0, with and without C; alpha != 1 stays unfolded.
TEST(Passes, FoldBatchNormIntoGemm) {
  for (int trans_b : {1, 0}) {
    for (bool with_c : {true, false}) {
      TinyGraph t;
      auto x = t.input("x", {3, 5});
      auto w = t.constant("w", random_tensor(trans_b ? Shape{4, 5} : Shape{5, 4}, 20));
      std::vector<ir::ValueId> in = {x, w};
      if (with_c) in.push_back(t.constant("c", random_tensor({4}, 21)));
      auto gemm = t.node(OpKind::kGemm, "gemm", in, {3, 4}, {{"transB", ir::Attribute::of_int(trans_b)}});
      auto gamma = t.constant("gamma", random_tensor({4}, 22, 0.5f, 1.5f));
      auto beta = t.constant("beta", random_tensor({4}, 23));
      auto mean = t.constant("mean", random_tensor({4}, 24));
      auto var = t.constant("var", random_tensor({4}, 25, 0.1f, 2.f));
      auto y = t.node(OpKind::kBatchNormalization, "bn", {gemm, gamma, beta, mean, var}, {3, 4});
      t.g.outputs = {y};
      ir::Graph opt = check_pass(t.g, passes::fold_batchnorm, {random_tensor({3, 5}, 26)});
      EXPECT_EQ(count_op(opt, OpKind::kBatchNormalization), 0) << trans_b << with_c;
      EXPECT_EQ(count_op(opt, OpKind::kGemm), 1);
      // alpha = 2 is not folded (the rewrite assumes alpha = 1).
      for (auto& n : t.g.nodes)
        if (n.op == OpKind::kGemm) n.attrs["alpha"] = ir::Attribute::of_float(2.f);
      ir::Graph kept = check_pass(t.g, passes::fold_batchnorm, {random_tensor({3, 5}, 27)});
      EXPECT_EQ(count_op(kept, OpKind::kBatchNormalization), 1);
    }
  }
}

TEST(Passes, FuseConvResidualAddRelu) {
  TinyGraph t;
  auto x = t.input("x", {1, 4, 6, 6});
  auto w = t.constant("w", random_tensor({4, 4, 3, 3}, 12));
  auto conv = t.node(OpKind::kConv, "conv", {x, w}, {1, 4, 6, 6}, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  auto add = t.node(OpKind::kAdd, "add", {conv, x}, {1, 4, 6, 6});
  auto y = t.node(OpKind::kRelu, "relu", {add}, {1, 4, 6, 6});
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, passes::fuse_conv_epilogue, {random_tensor({1, 4, 6, 6}, 13)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  ASSERT_EQ(count_op(opt, OpKind::kFusedConv), 1);
  EXPECT_EQ(opt.nodes[0].attr_string("activation", ""), "Relu");
  EXPECT_EQ(opt.nodes[0].origin, (std::vector<std::string>{"conv", "add", "relu"}));
}

TEST(Passes, ConvEpilogueNotFusedWhenResidualBroadcasts) {
  TinyGraph t;
  auto x = t.input("x", {1, 4, 6, 6});
  auto bias = t.input("bias", {1, 4, 1, 1});
  auto w = t.constant("w", random_tensor({4, 4, 3, 3}, 14));
  auto conv = t.node(OpKind::kConv, "conv", {x, w}, {1, 4, 6, 6}, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  auto add = t.node(OpKind::kAdd, "add", {conv, bias}, {1, 4, 6, 6});
  t.g.outputs = {add};
  ir::Graph opt = check_pass(t.g, passes::fuse_conv_epilogue,
                             {random_tensor({1, 4, 6, 6}, 15), random_tensor({1, 4, 1, 1}, 16)});
  EXPECT_EQ(count_op(opt, OpKind::kAdd), 1);
  EXPECT_EQ(count_op(opt, OpKind::kFusedConv), 0);
}

TEST(Passes, DeadLayersRemoved) {
  TinyGraph t;
  auto x = t.input("x", {3});
  t.node(OpKind::kRelu, "unused", {x}, {3});
  auto y = t.node(OpKind::kSigmoid, "used", {x}, {3});
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, passes::eliminate_dead_layers, {random_tensor({3}, 17)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  EXPECT_EQ(count_op(opt, OpKind::kRelu), 0);
}

}  // namespace
}  // namespace kiln::testing
