// Layout assignment (src/passes/assign_layouts.cc): which layers get which layout, where Reformat
// layers go, and that the laid-out graph computes the same on the CPU reference.
#include <gtest/gtest.h>

#include "ir/verifier.h"
#include "passes/pass_test_util.h"

namespace kiln::testing {
namespace {

using ir::OpKind;

std::string layout_of(const ir::Graph& g, const std::string& node) {
  for (const auto& n : g.nodes)
    if (!n.removed && n.name == node) return n.attr_string("layout", "");
  return "<no node " + node + ">";
}

// x -> conv1 -> relu -> add(conv2(x)) -> reshape -> softmax; and relu -> GAP -> flatten (second output).
ir::Graph residual_net() {
  TinyGraph t;
  auto x = t.input("x", {2, 8, 6, 6});
  auto w1 = t.constant("w1", random_tensor({8, 8, 3, 3}, 1, -0.3f, 0.3f));
  auto w2 = t.constant("w2", random_tensor({8, 8, 1, 1}, 2, -0.3f, 0.3f));
  auto c1 = t.node(OpKind::kConv, "conv1", {x, w1}, {2, 8, 6, 6}, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  auto r = t.node(OpKind::kRelu, "relu", {c1}, {2, 8, 6, 6});
  auto c2 = t.node(OpKind::kConv, "conv2", {x, w2}, {2, 8, 6, 6});
  auto a = t.node(OpKind::kAdd, "add", {r, c2}, {2, 8, 6, 6});
  Tensor shape_t(DataType::kInt64, {2});
  shape_t.data<int64_t>()[0] = 2;
  shape_t.data<int64_t>()[1] = 288;
  auto shape = t.constant("shape", shape_t);
  auto flat = t.node(OpKind::kReshape, "reshape", {a, shape}, {2, 288});
  auto sm = t.node(OpKind::kSoftmax, "softmax", {flat}, {2, 288}, {{"axis", ir::Attribute::of_int(-1)}});
  auto gap = t.node(OpKind::kGlobalAveragePool, "gap", {r}, {2, 8, 1, 1});
  auto f = t.node(OpKind::kFlatten, "flatten", {gap}, {2, 8});
  t.g.outputs = {sm, f};
  return t.g;
}

TEST(AssignLayouts, TensorCorePreferencePlacesOneReformatBeforeTheReshape) {
  ir::Graph g = residual_net();
  ir::Graph laid = g;
  auto n = passes::assign_layouts(laid, passes::tensor_core_layout_preference);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  // conv/pool NHWC; relu and add follow their NHWC inputs; the reshape wants row-major NCHW.
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(count_op(laid, OpKind::kReformat), 1);
  EXPECT_EQ(layout_of(laid, "conv1"), "NHWC");
  EXPECT_EQ(layout_of(laid, "conv2"), "NHWC");
  EXPECT_EQ(layout_of(laid, "relu"), "NHWC");
  EXPECT_EQ(layout_of(laid, "add"), "NHWC");
  EXPECT_EQ(layout_of(laid, "gap"), "NHWC");
  EXPECT_EQ(layout_of(laid, "reshape"), "");  // no 4-D output: no attribute
  for (const auto& node : laid.nodes) {
    if (node.removed || node.op != OpKind::kReformat) continue;
    EXPECT_EQ(node.attr_string("layout", ""), "NCHW");
    EXPECT_EQ(laid.value(node.inputs[0]).name, "add_out");
    // Its consumer is the reshape.
    bool read_by_reshape = false;
    for (const auto& c : laid.nodes)
      if (!c.removed && c.name == "reshape") read_by_reshape = c.inputs[0] == node.outputs[0];
    EXPECT_TRUE(read_by_reshape);
  }
  // The GAP output [2,8,1,1] is layout-free: the flatten reads it without a Reformat.
  EXPECT_TRUE(ir::verify(laid).ok());
  std::vector<Tensor> in = {random_tensor({2, 8, 6, 6}, 3)};
  auto before = interpret(g, in);
  auto after = interpret(laid, in);
  ASSERT_TRUE(before.ok() && after.ok());
  for (size_t k = 0; k < before->size(); ++k) EXPECT_TRUE((*before)[k].bit_equal((*after)[k])) << k;
}

TEST(AssignLayouts, RowMajorPreferenceInsertsNothing) {
  ir::Graph laid = residual_net();
  auto n = passes::assign_layouts(laid, passes::row_major_layout_preference);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
  EXPECT_EQ(count_op(laid, OpKind::kReformat), 0);
  EXPECT_EQ(layout_of(laid, "conv1"), "NCHW");
  EXPECT_EQ(layout_of(laid, "add"), "NCHW");
}

// One NHWC value read by two row-major layers gets one shared Reformat; an elementwise layer
// whose inputs are all row-major stays NCHW and its NHWC consumer gets the Reformat.
TEST(AssignLayouts, ReformatsAreSharedAndElementwiseFollowsInputs) {
  TinyGraph t;
  auto x = t.input("x", {1, 4, 5, 5});
  auto w = t.constant("w", random_tensor({4, 4, 3, 3}, 4, -0.3f, 0.3f));
  auto perm = ir::Attribute::of_ints({0, 2, 3, 1});
  auto tr = t.node(OpKind::kTranspose, "transpose", {x}, {1, 5, 5, 4}, {{"perm", perm}});
  auto back = t.node(OpKind::kTranspose, "transpose_back", {tr}, {1, 4, 5, 5}, {{"perm", ir::Attribute::of_ints({0, 3, 1, 2})}});
  auto s = t.node(OpKind::kSigmoid, "sigmoid", {back}, {1, 4, 5, 5});  // inputs NCHW -> NCHW
  auto c = t.node(OpKind::kConv, "conv", {s, w}, {1, 4, 5, 5}, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  auto s1 = t.node(OpKind::kSoftmax, "softmax1", {c}, {1, 4, 5, 5}, {{"axis", ir::Attribute::of_int(-1)}});
  auto s2 = t.node(OpKind::kSoftmax, "softmax2", {c}, {1, 4, 5, 5}, {{"axis", ir::Attribute::of_int(1)}});
  t.g.outputs = {s1, s2};
  ir::Graph laid = t.g;
  auto n = passes::assign_layouts(laid, passes::tensor_core_layout_preference);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2);  // sigmoid -> conv (to NHWC), conv -> both softmaxes (one to NCHW)
  EXPECT_EQ(layout_of(laid, "sigmoid"), "NCHW");
  EXPECT_EQ(layout_of(laid, "conv"), "NHWC");
  EXPECT_EQ(layout_of(laid, "softmax1"), "NCHW");
  int to_nchw = 0, to_nhwc = 0;
  for (const auto& node : laid.nodes)
    if (!node.removed && node.op == OpKind::kReformat) (node.attr_string("layout", "") == "NHWC" ? to_nhwc : to_nchw)++;
  EXPECT_EQ(to_nhwc, 1);
  EXPECT_EQ(to_nchw, 1);
  std::vector<Tensor> in = {random_tensor({1, 4, 5, 5}, 5)};
  auto before = interpret(t.g, in);
  auto after = interpret(laid, in);
  ASSERT_TRUE(before.ok() && after.ok());
  for (size_t k = 0; k < before->size(); ++k) EXPECT_TRUE((*before)[k].bit_equal((*after)[k])) << k;
}

// A graph input read by a conv is stored NHWC by the boundary conversion: no Reformat for it.
TEST(AssignLayouts, GraphInputsTakeTheirConsumersLayout) {
  TinyGraph t;
  auto x = t.input("x", {1, 4, 5, 5});
  auto w = t.constant("w", random_tensor({4, 4, 1, 1}, 6, -0.3f, 0.3f));
  auto c = t.node(OpKind::kConv, "conv", {x, w}, {1, 4, 5, 5});
  auto a = t.node(OpKind::kAdd, "add", {c, x}, {1, 4, 5, 5});
  t.g.outputs = {a};
  ir::Graph laid = t.g;
  auto n = passes::assign_layouts(laid, passes::tensor_core_layout_preference);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
  EXPECT_EQ(layout_of(laid, "add"), "NHWC");
}

// The convs and pools the CUDA backend runs on its row-major N-D path (docs/decisions/0070) — a
// runtime weight, explicit asymmetric pads, pool Indices or dilations — want NCHW; the 2-D conv /
// pool beside them keeps NHWC.
TEST(AssignLayouts, NdPathConvsAndPoolsStayNchw) {
  TinyGraph t;
  auto x = t.input("x", {1, 4, 8, 8});
  auto w = t.input("w", {4, 4, 3, 3});
  auto wc = t.constant("wc", random_tensor({4, 4, 3, 3}, 3, -0.3f, 0.3f));
  auto runtime_w = t.node(OpKind::kConv, "runtime_w", {x, w}, {1, 4, 8, 8}, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  auto asym = t.node(OpKind::kConv, "asym", {x, wc}, {1, 4, 7, 7}, {{"pads", ir::Attribute::of_ints({0, 0, 1, 1})}});
  auto plain = t.node(OpKind::kConv, "plain", {x, wc}, {1, 4, 8, 8}, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  auto dil = t.node(OpKind::kMaxPool, "dilated_pool", {x}, {1, 4, 6, 6},
                    {{"kernel_shape", ir::Attribute::of_ints({2, 2})}, {"dilations", ir::Attribute::of_ints({2, 2})}});
  auto pool = t.node(OpKind::kMaxPool, "pool", {x}, {1, 4, 4, 4},
                     {{"kernel_shape", ir::Attribute::of_ints({2, 2})}, {"strides", ir::Attribute::of_ints({2, 2})}});
  t.g.outputs = {runtime_w, asym, plain, dil, pool};
  ir::Graph laid = t.g;
  auto n = passes::assign_layouts(laid, passes::tensor_core_layout_preference);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(layout_of(laid, "runtime_w"), "NCHW");
  EXPECT_EQ(layout_of(laid, "asym"), "NCHW");
  EXPECT_EQ(layout_of(laid, "dilated_pool"), "NCHW");
  EXPECT_EQ(layout_of(laid, "plain"), "NHWC");
  EXPECT_EQ(layout_of(laid, "pool"), "NHWC");
}

}  // namespace
}  // namespace kiln::testing
