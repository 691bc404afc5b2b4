// Differential tests of CSE, transpose/reshape cancellation, MatMul+Add -> Gemm, Pad -> Conv
// and ReduceMean -> GlobalAveragePool: same outputs before and after, then the expected
// structure, plus one pattern per pass that must stay as it is. Also the pipeline's hooks.
#include "passes/pass_test_util.h"

namespace kiln::testing {
namespace {

using ir::OpKind;




ir::Node& producer(ir::Graph& g, ir::ValueId v) { return g.node(g.value(v).producer); }

const ir::Node* first_of(const ir::Graph& g, OpKind op) {
  for (const auto& n : g.nodes)
    if (!n.removed && n.op == op) return &n;
  return nullptr;
}

// The rewrite, then dead-layer removal (as the pipeline does last), so counts are final.
template <Status (*kPass)(ir::Graph&, const passes::PassOptions&)>
Status then_clean(ir::Graph& g, const passes::PassOptions& o) {
  Status s = kPass(g, o);
  passes::remove_dead_nodes(g);
  return s;
}

// --- common_subexpression ---

TEST(PassesMore, CseMergesTwinLayersAndEqualConstants) {
  TinyGraph t;
  auto x = t.input("x", {2, 3});
  auto c1 = t.constant("c1", random_tensor({3}, 1));
  auto c2 = t.constant("c2", random_tensor({3}, 1));  // same bytes as c1
  auto a = t.node(OpKind::kMul, "mul_a", {x, c1}, {2, 3});
  auto b = t.node(OpKind::kMul, "mul_b", {x, c2}, {2, 3});
  auto ra = t.node(OpKind::kRelu, "relu_a", {a}, {2, 3});
  auto rb = t.node(OpKind::kRelu, "relu_b", {b}, {2, 3});  // a twin only once mul_b is merged
  auto y = t.node(OpKind::kAdd, "add", {ra, rb}, {2, 3});
  t.g.outputs = {y, rb};
  const std::string rb_name = t.g.value(rb).name;
  ir::Graph opt = check_pass(t.g, then_clean<passes::common_subexpression>, {random_tensor({2, 3}, 2)});
  EXPECT_EQ(count_op(opt, OpKind::kMul), 1);
  EXPECT_EQ(count_op(opt, OpKind::kRelu), 1);
  // The surviving Relu took over the graph output's name.
  EXPECT_EQ(opt.value(opt.outputs[1]).name, rb_name);
  const ir::Node* add = first_of(opt, OpKind::kAdd);
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->inputs[0], add->inputs[1]);
}

TEST(PassesMore, CseKeepsLayersWithDifferentAttributesOrConstants) {
  TinyGraph t;
  auto x = t.input("x", {2, 3});
  auto a = t.node(OpKind::kLeakyRelu, "lr_a", {x}, {2, 3}, {{"alpha", ir::Attribute::of_float(0.1f)}});
  auto b = t.node(OpKind::kLeakyRelu, "lr_b", {x}, {2, 3}, {{"alpha", ir::Attribute::of_float(0.2f)}});
  auto c1 = t.constant("c1", random_tensor({3}, 3));
  auto c2 = t.constant("c2", random_tensor({3}, 4));
  auto m1 = t.node(OpKind::kMul, "mul_a", {a, c1}, {2, 3});
  auto m2 = t.node(OpKind::kMul, "mul_b", {a, c2}, {2, 3});
  auto y = t.node(OpKind::kSum, "sum", {b, m1, m2}, {2, 3});
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, then_clean<passes::common_subexpression>, {random_tensor({2, 3}, 5)});
  EXPECT_EQ(count_op(opt, OpKind::kLeakyRelu), 2);
  EXPECT_EQ(count_op(opt, OpKind::kMul), 2);
}

// --- cancel_transpose_reshape ---

TEST(PassesMore, TransposePairCancels) {
  TinyGraph t;
  auto x = t.input("x", {1, 2, 3, 4});
  auto a = t.node(OpKind::kTranspose, "to_nhwc", {x}, {1, 3, 4, 2}, {{"perm", ir::Attribute::of_ints({0, 2, 3, 1})}});
  auto b = t.node(OpKind::kTranspose, "to_nchw", {a}, {1, 2, 3, 4}, {{"perm", ir::Attribute::of_ints({0, 3, 1, 2})}});
  auto y = t.node(OpKind::kRelu, "relu", {b}, {1, 2, 3, 4});
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, then_clean<passes::cancel_transpose_reshape>, {random_tensor({1, 2, 3, 4}, 6)});
  EXPECT_EQ(count_op(opt, OpKind::kTranspose), 0);
  EXPECT_EQ(passes::live_layers(opt), 1);
}

TEST(PassesMore, TransposePairComposesIntoOne) {
  TinyGraph t;
  auto x = t.input("x", {2, 3, 4});
  auto a = t.node(OpKind::kTranspose, "t1", {x}, {3, 2, 4}, {{"perm", ir::Attribute::of_ints({1, 0, 2})}});
  auto y = t.node(OpKind::kTranspose, "t2", {a}, {3, 4, 2}, {{"perm", ir::Attribute::of_ints({0, 2, 1})}});
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, then_clean<passes::cancel_transpose_reshape>, {random_tensor({2, 3, 4}, 7)});
  ASSERT_EQ(count_op(opt, OpKind::kTranspose), 1);
  EXPECT_EQ(first_of(opt, OpKind::kTranspose)->attr_ints("perm"), (std::vector<int64_t>{1, 2, 0}));
}

TEST(PassesMore, ReshapeChainsCollapseAndNoOpReshapesGo) {
  TinyGraph t;
  auto x = t.input("x", {2, 3, 4});
  auto f = t.node(OpKind::kFlatten, "flatten", {x}, {2, 12}, {{"axis", ir::Attribute::of_int(1)}});
  auto s1 = t.constant("s1", int64_tensor({4, -1}));
  auto r = t.node(OpKind::kReshape, "reshape", {f, s1}, {4, 6});
  auto y = t.node(OpKind::kRelu, "relu", {r}, {4, 6});
  auto s2 = t.constant("s2", int64_tensor({4, 6}));
  auto same = t.node(OpKind::kReshape, "noop_reshape", {y, s2}, {4, 6});
  auto z = t.node(OpKind::kSigmoid, "sigmoid", {same}, {4, 6});
  t.g.outputs = {z};
  ir::Graph opt = check_pass(t.g, then_clean<passes::cancel_transpose_reshape>, {random_tensor({2, 3, 4}, 8)});
  EXPECT_EQ(count_op(opt, OpKind::kFlatten), 0);
  ASSERT_EQ(count_op(opt, OpKind::kReshape), 1);
  EXPECT_EQ(first_of(opt, OpKind::kReshape)->inputs[0], opt.inputs[0]);
}

TEST(PassesMore, ReshapeWithZeroTargetKeepsItsProducer) {
  TinyGraph t;
  auto x = t.input("x", {2, 3, 4});
  auto s1 = t.constant("s1", int64_tensor({6, 4}));
  auto r1 = t.node(OpKind::kReshape, "r1", {x, s1}, {6, 4});
  auto s2 = t.constant("s2", int64_tensor({0, 2, 2}));  // 0 copies r1's dim 0 (6), not x's (2)
  auto y = t.node(OpKind::kReshape, "r2", {r1, s2}, {6, 2, 2});
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, then_clean<passes::cancel_transpose_reshape>, {random_tensor({2, 3, 4}, 9)});
  EXPECT_EQ(count_op(opt, OpKind::kReshape), 2);
}

// --- fuse_matmul_add ---

TEST(PassesMore, MatMulPlusBiasBecomesGemm) {
  TinyGraph t;
  auto a = t.input("a", {3, 4});
  auto w = t.constant("w", random_tensor({4, 5}, 10));
  auto b = t.constant("b", random_tensor({5}, 11));
  auto mm = t.node(OpKind::kMatMul, "fc", {a, w}, {3, 5});
  auto y = t.node(OpKind::kAdd, "bias", {b, mm}, {3, 5});  // bias on the left
  t.g.outputs = {y};
  const std::string out_name = t.g.value(y).name;
  ir::Graph opt = check_pass(t.g, passes::fuse_matmul_add, {random_tensor({3, 4}, 12)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  ASSERT_EQ(count_op(opt, OpKind::kGemm), 1);
  EXPECT_EQ(opt.nodes[0].origin, (std::vector<std::string>{"fc", "bias"}));
  EXPECT_EQ(opt.value(opt.outputs[0]).name, out_name);
}

// A batched A [2,3,4] becomes MatMulBias (Gemm is 2-D only); a variable weight is not fused.
TEST(PassesMore, MatMulAddBatchedABecomesMatMulBiasVariableWeightNotFused) {
  TinyGraph t;
  auto a = t.input("a", {2, 3, 4});
  auto w = t.constant("w", random_tensor({4, 5}, 13));
  auto b = t.constant("b", random_tensor({5}, 14));
  auto mm = t.node(OpKind::kMatMul, "fc3d", {a, w}, {2, 3, 5});
  auto y1 = t.node(OpKind::kAdd, "bias3d", {mm, b}, {2, 3, 5});
  auto a2 = t.input("a2", {3, 4});
  auto w2 = t.input("w2", {4, 5});
  auto mm2 = t.node(OpKind::kMatMul, "fc_var", {a2, w2}, {3, 5});
  auto y2 = t.node(OpKind::kAdd, "bias_var", {mm2, b}, {3, 5});
  t.g.outputs = {y1, y2};
  ir::Graph opt = check_pass(t.g, passes::fuse_matmul_add,
                             {random_tensor({2, 3, 4}, 15), random_tensor({3, 4}, 16), random_tensor({4, 5}, 17)});
  EXPECT_EQ(count_op(opt, OpKind::kGemm), 0);
  EXPECT_EQ(count_op(opt, OpKind::kMatMulBias), 1);
  EXPECT_EQ(count_op(opt, OpKind::kMatMul), 1);
}

// --- fold_pad_into_conv ---

TEST(PassesMore, ZeroPadFoldsIntoConvPads) {
  TinyGraph t;
  auto x = t.input("x", {1, 2, 5, 5});
  auto pads = t.constant("pads", int64_tensor({0, 0, 1, 2, 0, 0, 2, 1}));
  auto p = t.node(OpKind::kPad, "pad", {x, pads}, {1, 2, 8, 8});
  auto w = t.constant("w", random_tensor({3, 2, 3, 3}, 18));
  auto y = t.node(OpKind::kConv, "conv", {p, w}, {1, 3, 8, 8}, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, passes::fold_pad_into_conv, {random_tensor({1, 2, 5, 5}, 19)});
  EXPECT_EQ(count_op(opt, OpKind::kPad), 0);
  const ir::Node* conv = first_of(opt, OpKind::kConv);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->attr_ints("pads"), (std::vector<int64_t>{2, 3, 3, 2}));
  EXPECT_EQ(conv->inputs[0], opt.inputs[0]);
}

TEST(PassesMore, ZeroPadAttributeFormFoldsIntoConv) {
  TinyGraph t;
  auto x = t.input("x", {1, 2, 5, 5});
  auto p = t.node(OpKind::kPad, "pad", {x}, {1, 2, 7, 6}, {{"pads", ir::Attribute::of_ints({0, 0, 1, 0, 0, 0, 1, 1})}});
  producer(t.g, p).opset = 2;  // pads as an attribute (ONNX Pad before version 11)
  auto w = t.constant("w", random_tensor({3, 2, 3, 3}, 20));
  auto y = t.node(OpKind::kConv, "conv", {p, w}, {1, 3, 5, 4});
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, passes::fold_pad_into_conv, {random_tensor({1, 2, 5, 5}, 21)});
  EXPECT_EQ(count_op(opt, OpKind::kPad), 0);
  EXPECT_EQ(first_of(opt, OpKind::kConv)->attr_ints("pads"), (std::vector<int64_t>{1, 0, 1, 1}));
}

TEST(PassesMore, PadNotFoldedWhenReflectNonzeroOrOnChannels) {
  TinyGraph t;
  auto x = t.input("x", {1, 2, 5, 5});
  auto w = t.constant("w", random_tensor({3, 2, 3, 3}, 22));
  auto w4 = t.constant("w4", random_tensor({3, 4, 3, 3}, 23));
  auto spatial = t.constant("spatial", int64_tensor({0, 0, 1, 1, 0, 0, 1, 1}));
  auto channels = t.constant("channels", int64_tensor({0, 1, 1, 1, 0, 1, 1, 1}));
  auto one = t.constant("one", Tensor::scalar<float>(DataType::kFloat32, 1.f));
  auto p1 = t.node(OpKind::kPad, "reflect", {x, spatial}, {1, 2, 7, 7}, {{"mode", ir::Attribute::of_string("reflect")}});
  auto y1 = t.node(OpKind::kConv, "conv1", {p1, w}, {1, 3, 5, 5});
  auto p2 = t.node(OpKind::kPad, "ones", {x, spatial, one}, {1, 2, 7, 7});
  auto y2 = t.node(OpKind::kConv, "conv2", {p2, w}, {1, 3, 5, 5});
  auto p3 = t.node(OpKind::kPad, "chan", {x, channels}, {1, 4, 7, 7});
  auto y3 = t.node(OpKind::kConv, "conv3", {p3, w4}, {1, 3, 5, 5});
  t.g.outputs = {y1, y2, y3};
  ir::Graph opt = check_pass(t.g, passes::fold_pad_into_conv, {random_tensor({1, 2, 5, 5}, 24)});
  EXPECT_EQ(count_op(opt, OpKind::kPad), 3);
}

// --- reduce_mean_to_global_pool ---

TEST(PassesMore, SpatialReduceMeanBecomesGlobalAveragePool) {
  TinyGraph t;
  auto x = t.input("x", {2, 3, 4, 5});
  auto y1 = t.node(OpKind::kReduceMean, "mean_attr", {x}, {2, 3, 1, 1}, {{"axes", ir::Attribute::of_ints({2, 3})}});
  auto axes = t.constant("axes", int64_tensor({-1, -2}));
  auto y2 = t.node(OpKind::kReduceMean, "mean_input", {x, axes}, {2, 3, 1, 1});
  producer(t.g, y2).opset = 18;  // axes as an input
  t.g.outputs = {y1, y2};
  ir::Graph opt = check_pass(t.g, passes::reduce_mean_to_global_pool, {random_tensor({2, 3, 4, 5}, 25)});
  EXPECT_EQ(count_op(opt, OpKind::kReduceMean), 0);
  EXPECT_EQ(count_op(opt, OpKind::kGlobalAveragePool), 2);
}

Status reduce_mean_level3(ir::Graph& g, const passes::PassOptions&) {
  passes::PassOptions o;
  o.opt_level = 3;
  return passes::reduce_mean_to_global_pool(g, o);
}

TEST(PassesMore, ReduceMeanWithoutKeepdimsNeedsLevel3) {
  TinyGraph t;
  auto x = t.input("x", {2, 3, 4, 5});
  auto y = t.node(OpKind::kReduceMean, "mean", {x}, {2, 3}, {{"axes", ir::Attribute::of_ints({2, 3})}, {"keepdims", ir::Attribute::of_int(0)}});
  t.g.outputs = {y};
  const std::string out_name = t.g.value(y).name;
  ir::Graph at2 = check_pass(t.g, passes::reduce_mean_to_global_pool, {random_tensor({2, 3, 4, 5}, 26)});
  EXPECT_EQ(count_op(at2, OpKind::kReduceMean), 1);
  ir::Graph at3 = check_pass(t.g, reduce_mean_level3, {random_tensor({2, 3, 4, 5}, 26)});
  EXPECT_EQ(count_op(at3, OpKind::kGlobalAveragePool), 1);
  EXPECT_EQ(count_op(at3, OpKind::kFlatten), 1);
  EXPECT_EQ(at3.value(at3.outputs[0]).name, out_name);
}

TEST(PassesMore, ReduceMeanOverOtherAxesStays) {
  TinyGraph t;
  auto x = t.input("x", {2, 3, 4, 5});
  auto y = t.node(OpKind::kReduceMean, "mean", {x}, {2, 1, 1, 5}, {{"axes", ir::Attribute::of_ints({1, 2})}});
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, passes::reduce_mean_to_global_pool, {random_tensor({2, 3, 4, 5}, 27)});
  EXPECT_EQ(count_op(opt, OpKind::kReduceMean), 1);
  EXPECT_EQ(count_op(opt, OpKind::kGlobalAveragePool), 0);
}

// --- the pipeline's hooks ---

TEST(PassesMore, PipelineLogsVerifiesDumpsAndSkipsDisabled) {
  TinyGraph t;
  auto x = t.input("x", {3, 4});
  auto w = t.constant("w", random_tensor({4, 5}, 28));
  auto b = t.constant("b", random_tensor({5}, 29));
  auto mm = t.node(OpKind::kMatMul, "fc", {x, w}, {3, 5});
  auto y = t.node(OpKind::kAdd, "bias", {mm, b}, {3, 5});
  t.g.outputs = {y};
  passes::PassOptions o;
  o.verify_each = true;
  o.dump_after = "fuse_matmul_add";
  std::vector<std::string> lines;
  o.log = [&](const std::string& l) { lines.push_back(l); };
  ir::Graph g = t.g;
  ASSERT_TRUE(passes::run_pipeline(g, o).ok());
  EXPECT_EQ(count_op(g, OpKind::kGemm), 1);
  bool logged = false, dumped = false;
  for (const auto& l : lines) {
    logged |= l.find("fuse_matmul_add") == 0 && l.find("2 ->    1 layers") != std::string::npos;
    dumped |= l.find("graph after fuse_matmul_add:") == 0 && l.find("Gemm(") != std::string::npos;
  }
  EXPECT_TRUE(logged);
  EXPECT_TRUE(dumped);

  o.disabled = {"fuse_matmul_add"};
  ir::Graph g2 = t.g;
  ASSERT_TRUE(passes::run_pipeline(g2, o).ok());
  EXPECT_EQ(count_op(g2, OpKind::kGemm), 0);

  o.disabled = {"no_such_pass"};
  ir::Graph g3 = t.g;
  EXPECT_NE(passes::run_pipeline(g3, o).message().find("no_such_pass"), std::string::npos);
}

}  // namespace
}  // namespace kiln::testing
