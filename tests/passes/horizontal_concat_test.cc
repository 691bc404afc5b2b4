// Differential tests of fuse_horizontal_conv (sibling convs -> one conv + Split, Split+Concat
// cancelling, the cases that must stay apart) and of concat_in_place with the interpreter's
// slices: same outputs as the unoptimized graph, producers writing into the Concat's output.
#include <map>

#include "passes/pass_test_util.h"

namespace kiln::testing {
namespace {

using ir::Attribute;
using ir::OpKind;

std::map<std::string, Attribute> pads1() { return {{"pads", Attribute::of_ints({1, 1, 1, 1})}}; }

std::map<std::string, Attribute> relu_epilogue() {
  return {{"activation", Attribute::of_string("Relu")},
          {"act_alpha", Attribute::of_float(0)},
          {"act_beta", Attribute::of_float(0)}};
}

const ir::Node* only(const ir::Graph& g, OpKind op) {
  const ir::Node* found = nullptr;
  for (const auto& n : g.nodes)
    if (!n.removed && n.op == op) {
      if (found) return nullptr;
      found = &n;
    }
  return found;
}

// --- fuse_horizontal_conv ---

// Three 1x1 convs on x (one without bias) with separate readers: one conv [13, 4, 1, 1] + Split.
TEST(HorizontalConv, SiblingConvsBecomeOneConvAndSplit) {
  TinyGraph t;
  auto x = t.input("x", {2, 4, 5, 5});
  auto a = t.node(OpKind::kConv, "a", {x, t.constant("wa", random_tensor({3, 4, 1, 1}, 1)), t.constant("ba", random_tensor({3}, 2))},
                  {2, 3, 5, 5});
  auto b = t.node(OpKind::kConv, "b", {x, t.constant("wb", random_tensor({8, 4, 1, 1}, 3))}, {2, 8, 5, 5});
  auto c = t.node(OpKind::kConv, "c", {x, t.constant("wc", random_tensor({2, 4, 1, 1}, 4)), t.constant("bc", random_tensor({2}, 5))},
                  {2, 2, 5, 5});
  auto ra = t.node(OpKind::kRelu, "ra", {a}, {2, 3, 5, 5});
  auto sb = t.node(OpKind::kSigmoid, "sb", {b}, {2, 8, 5, 5});
  t.g.outputs = {ra, sb, c};
  for (auto& n : t.g.nodes) n.origin = {n.name};
  ir::Graph opt = check_pass(t.g, passes::fuse_horizontal_conv, {random_tensor({2, 4, 5, 5}, 6)});
  ASSERT_EQ(count_op(opt, OpKind::kConv), 1);
  ASSERT_EQ(count_op(opt, OpKind::kSplit), 1);
  const ir::Node* conv = only(opt, OpKind::kConv);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(opt.value(conv->inputs[1]).constant->shape(), (Shape{13, 4, 1, 1}));
  ASSERT_EQ(conv->inputs.size(), 3u);
  // b had no bias: its 8 channels of the fused bias are zero.
  const float* bias = opt.value(conv->inputs[2]).constant->data<float>();
  for (int k = 3; k < 11; ++k) EXPECT_EQ(bias[k], 0.f);
  EXPECT_NE(bias[0], 0.f);
  EXPECT_EQ(conv->origin, (std::vector<std::string>{"a", "b", "c"}));
  // The branches' weights live on only in the fused constant (the plan stores them once).
  EXPECT_EQ(opt.value(opt.find_value("wb")).constant, nullptr);
  EXPECT_EQ(opt.value(opt.find_value("ba")).constant, nullptr);
  // The graph output c keeps its name (the Split writes the original value).
  EXPECT_EQ(opt.value(opt.outputs[2]).name, "c_out");
}

// Branches read by one Concat in another order: the fused conv takes the Concat's order and the
// Split+Concat pair disappears.
TEST(HorizontalConv, SplitConcatCancels) {
  TinyGraph t;
  auto x = t.input("x", {1, 3, 6, 6});
  std::vector<ir::ValueId> br;
  const int64_t ks[] = {4, 2, 5};
  for (int i = 0; i < 3; ++i) {
    auto attrs = pads1();
    for (auto& [k, v] : relu_epilogue()) attrs[k] = v;
    const std::string n = "br" + std::to_string(i);
    br.push_back(t.node(OpKind::kFusedConv, n,
                        {x, t.constant(n + "_w", random_tensor({ks[i], 3, 3, 3}, 10 + i)),
                         t.constant(n + "_b", random_tensor({ks[i]}, 20 + i))},
                        {1, ks[i], 6, 6}, attrs));
  }
  auto cat = t.node(OpKind::kConcat, "cat", {br[2], br[0], br[1]}, {1, 11, 6, 6}, {{"axis", Attribute::of_int(1)}});
  t.g.outputs = {cat};
  ir::Graph opt = check_pass(t.g, passes::fuse_horizontal_conv, {random_tensor({1, 3, 6, 6}, 7)});
  EXPECT_EQ(count_op(opt, OpKind::kFusedConv), 1);
  EXPECT_EQ(count_op(opt, OpKind::kSplit), 0);
  EXPECT_EQ(count_op(opt, OpKind::kConcat), 0);
  EXPECT_EQ(opt.value(opt.outputs[0]).name, "cat_out");
  const ir::Node* conv = only(opt, OpKind::kFusedConv);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->attr_string("activation", ""), "Relu");
  // Output channels in the Concat's order: br2 (5), br0 (4), br1 (2).
  const Tensor& w = *opt.value(conv->inputs[1]).constant;
  EXPECT_EQ(w.data<float>()[0], random_tensor({5, 3, 3, 3}, 12).data<float>()[0]);
  EXPECT_EQ(w.data<float>()[5 * 27], random_tensor({4, 3, 3, 3}, 10).data<float>()[0]);
}

// Pairs that must stay apart: other strides, a residual, a weight that is not a constant, another
// activation, group 2. Each pair shares x; no Split may appear.
TEST(HorizontalConv, KeepsIncompatibleSiblings) {
  TinyGraph t;
  auto x = t.input("x", {1, 4, 6, 6});
  auto wdyn = t.input("w_dyn", {3, 4, 1, 1});
  auto w = [&](const std::string& n, int64_t k, int64_t c, uint32_t seed) {
    return t.constant(n, random_tensor({k, c, 1, 1}, seed));
  };
  auto s1 = t.node(OpKind::kConv, "s1", {x, w("w1", 3, 4, 1)}, {1, 3, 6, 6});
  auto s2 = t.node(OpKind::kConv, "s2", {x, w("w2", 3, 4, 2)}, {1, 3, 3, 3}, {{"strides", Attribute::of_ints({2, 2})}});
  auto res = t.input("r", {1, 3, 6, 6});
  auto fr = t.node(OpKind::kFusedConv, "fr", {x, w("w3", 3, 4, 3), ir::kNoValue, res}, {1, 3, 6, 6},
                   {{"activation", Attribute::of_string("")}});
  auto dyn = t.node(OpKind::kConv, "dyn", {x, wdyn}, {1, 3, 6, 6});
  auto relu = t.node(OpKind::kFusedConv, "relu", {x, w("w4", 3, 4, 4)}, {1, 3, 6, 6}, relu_epilogue());
  auto grp = t.node(OpKind::kConv, "grp", {x, w("w5", 4, 2, 5)}, {1, 4, 6, 6}, {{"group", Attribute::of_int(2)}});
  t.g.outputs = {s1, s2, fr, dyn, relu, grp};
  std::vector<Tensor> in = {random_tensor({1, 4, 6, 6}, 8), random_tensor({3, 4, 1, 1}, 9), random_tensor({1, 3, 6, 6}, 10)};
  ir::Graph opt = check_pass(t.g, passes::fuse_horizontal_conv, in);
  EXPECT_EQ(count_op(opt, OpKind::kSplit), 0);
  EXPECT_EQ(count_op(opt, OpKind::kConv), 4);
  EXPECT_EQ(count_op(opt, OpKind::kFusedConv), 2);
}

// Only the compatible pair of three fuses (the 3x3 sibling has another kernel shape).
TEST(HorizontalConv, FusesTheCompatibleSubset) {
  TinyGraph t;
  auto x = t.input("x", {1, 4, 5, 5});
  auto a = t.node(OpKind::kConv, "a", {x, t.constant("wa", random_tensor({2, 4, 1, 1}, 1))}, {1, 2, 5, 5});
  auto b = t.node(OpKind::kConv, "b", {x, t.constant("wb", random_tensor({3, 4, 3, 3}, 2))}, {1, 3, 5, 5}, pads1());
  auto c = t.node(OpKind::kConv, "c", {x, t.constant("wc", random_tensor({5, 4, 1, 1}, 3))}, {1, 5, 5, 5});
  t.g.outputs = {a, b, c};
  ir::Graph opt = check_pass(t.g, passes::fuse_horizontal_conv, {random_tensor({1, 4, 5, 5}, 4)});
  EXPECT_EQ(count_op(opt, OpKind::kConv), 2);
  EXPECT_EQ(count_op(opt, OpKind::kSplit), 1);
}

// --- concat_in_place + the interpreter's slices ---

// Records, per node name, where its first output's data lies.
struct OutputAddresses {
  std::map<std::string, const void*> at;
  InterpreterOptions options() {
    InterpreterOptions o;
    o.on_node = [this](const ir::Node& n, const std::vector<Tensor>& out, double) {
      if (!out.empty() && out[0].defined()) at[n.name] = out[0].raw();
    };
    return o;
  }
};

// conv a (1x1), conv b (3x3, pad 1) and a Relu of x, concatenated with x itself; a is read again.
TinyGraph inception_like(int64_t batch) {
  TinyGraph t;
  auto x = t.input("x", {batch, 3, 4, 4});
  auto a = t.node(OpKind::kConv, "a", {x, t.constant("wa", random_tensor({4, 3, 1, 1}, 31))}, {batch, 4, 4, 4});
  auto b = t.node(OpKind::kFusedConv, "b", {x, t.constant("wb", random_tensor({6, 3, 3, 3}, 32)), t.constant("bb", random_tensor({6}, 33))},
                  {batch, 6, 4, 4}, [] {
                    auto m = pads1();
                    for (auto& [k, v] : relu_epilogue()) m[k] = v;
                    return m;
                  }());
  auto r = t.node(OpKind::kRelu, "r", {x}, {batch, 3, 4, 4});
  auto cat = t.node(OpKind::kConcat, "cat", {a, b, r, x}, {batch, 16, 4, 4}, {{"axis", Attribute::of_int(1)}});
  auto s = t.node(OpKind::kSigmoid, "s", {a}, {batch, 4, 4, 4});
  t.g.outputs = {cat, s};
  return t;
}

TEST(ConcatInPlace, ConvsWriteIntoTheirSlices) {
  TinyGraph t = inception_like(1);
  std::vector<Tensor> in = {random_tensor({1, 3, 4, 4}, 34)};
  ir::Graph opt = check_pass(t.g, passes::concat_in_place, in);
  const ir::Node* cat = only(opt, OpKind::kConcat);
  ASSERT_NE(cat, nullptr);
  // The convs fill their slices; Relu (kernel makes its own tensor) and the graph input do not.
  EXPECT_EQ(cat->attr_ints("in_place"), (std::vector<int64_t>{1, 1, 0, 0}));
  OutputAddresses addr;
  auto before = interpret(t.g, in);
  auto after = interpret(opt, in, nullptr, addr.options());
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_TRUE((*before)[0].bit_equal((*after)[0]));
  EXPECT_TRUE((*before)[1].bit_equal((*after)[1]));
  const char* base = static_cast<const char*>(addr.at["cat"]);
  EXPECT_EQ(addr.at["a"], base);                      // channels 0..3
  EXPECT_EQ(addr.at["b"], base + 4 * 16 * 4);         // channels 4..9 (float32, 4x4 each)
  EXPECT_NE(addr.at["r"], base + 10 * 16 * 4);        // copied by the Concat
  EXPECT_EQ((*after)[0].raw(), addr.at["cat"]);
}

TEST(ConcatInPlace, BatchTwoSlicesAreNotContiguous) {
  TinyGraph t = inception_like(2);
  ir::Graph opt = check_pass(t.g, passes::concat_in_place, {random_tensor({2, 3, 4, 4}, 35)});
  const ir::Node* cat = only(opt, OpKind::kConcat);
  ASSERT_NE(cat, nullptr);
  EXPECT_FALSE(cat->has_attr("in_place"));
}

// Concat(Concat(a, b), c): the inner output is itself a slice of the outer one.
TEST(ConcatInPlace, NestedConcatsShareOneBuffer) {
  TinyGraph t;
  auto x = t.input("x", {1, 2, 3, 3});
  auto a = t.node(OpKind::kConv, "a", {x, t.constant("wa", random_tensor({2, 2, 1, 1}, 41))}, {1, 2, 3, 3});
  auto b = t.node(OpKind::kConv, "b", {x, t.constant("wb", random_tensor({3, 2, 1, 1}, 42))}, {1, 3, 3, 3});
  auto c = t.node(OpKind::kConv, "c", {x, t.constant("wc", random_tensor({1, 2, 3, 3}, 43))}, {1, 1, 3, 3}, pads1());
  auto inner = t.node(OpKind::kConcat, "inner", {a, b}, {1, 5, 3, 3}, {{"axis", Attribute::of_int(1)}});
  auto outer = t.node(OpKind::kConcat, "outer", {c, inner}, {1, 6, 3, 3}, {{"axis", Attribute::of_int(-3)}});
  t.g.outputs = {outer};
  std::vector<Tensor> in = {random_tensor({1, 2, 3, 3}, 44)};
  ir::Graph opt = check_pass(t.g, passes::concat_in_place, in);
  OutputAddresses addr;
  auto after = interpret(opt, in, nullptr, addr.options());
  ASSERT_TRUE(after.ok());
  const char* base = static_cast<const char*>(addr.at["outer"]);
  EXPECT_EQ(addr.at["c"], base);
  EXPECT_EQ(addr.at["inner"], base + 9 * 4);
  EXPECT_EQ(addr.at["a"], base + 9 * 4);
  EXPECT_EQ(addr.at["b"], base + 3 * 9 * 4);
}

// A Concat marked by hand with static shapes that are wrong at run time (the conv's stride makes
// its output smaller than declared) must fall back to an ordinary Concat, not misplace bytes.
TEST(ConcatInPlace, RunTimeMismatchFallsBack) {
  TinyGraph t;
  auto x = t.input("x", {1, 2, 4, 4});
  auto a = t.node(OpKind::kConv, "a", {x, t.constant("wa", random_tensor({2, 2, 1, 1}, 51))}, {1, 2, 4, 4},
                  {{"strides", Attribute::of_ints({2, 2})}});  // really [1,2,2,2]
  auto b = t.node(OpKind::kConv, "b", {x, t.constant("wb", random_tensor({6, 2, 1, 1}, 52))}, {1, 6, 4, 4},
                  {{"strides", Attribute::of_ints({2, 2})}});  // really [1,6,2,2]
  auto cat = t.node(OpKind::kConcat, "cat", {a, b}, {1, 8, 4, 4}, {{"axis", Attribute::of_int(1)}});
  t.g.outputs = {cat};
  std::vector<Tensor> in = {random_tensor({1, 2, 4, 4}, 53)};
  auto ref = interpret(t.g, in);
  ASSERT_TRUE(ref.ok());
  ASSERT_EQ((*ref)[0].shape(), (Shape{1, 8, 2, 2}));
  ir::Graph marked = t.g;
  marked.node(marked.value(cat).producer).attrs["in_place"] = Attribute::of_ints({1, 1});
  auto out = interpret(marked, in);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE((*ref)[0].bit_equal((*out)[0]));
}

// The whole pipeline on an Inception-style block: the three 1x1 convs on x fuse, and the block's
// Concat still matches the unoptimized graph.
TEST(ConcatInPlace, PipelineOnInceptionBlock) {
  TinyGraph t;
  auto x = t.input("x", {1, 8, 7, 7});
  auto conv = [&](const std::string& n, ir::ValueId in, int64_t k, int64_t c, int64_t r, uint32_t seed) {
    auto y = t.node(OpKind::kConv, n, {in, t.constant(n + "_w", random_tensor({k, c, r, r}, seed, -0.5f, 0.5f)),
                                       t.constant(n + "_b", random_tensor({k}, seed + 100))},
                    {1, k, 7, 7}, r == 3 ? pads1() : std::map<std::string, Attribute>{});
    return t.node(OpKind::kRelu, n + "_relu", {y}, {1, k, 7, 7});
  };
  auto b1 = conv("b1", x, 4, 8, 1, 61);
  auto b2 = conv("b2b", conv("b2a", x, 3, 8, 1, 62), 6, 3, 3, 63);
  auto b3 = conv("b3b", conv("b3a", x, 2, 8, 1, 64), 5, 2, 3, 65);
  auto pool = t.node(OpKind::kMaxPool, "pool", {x}, {1, 8, 7, 7},
                     {{"kernel_shape", Attribute::of_ints({3, 3})}, {"pads", Attribute::of_ints({1, 1, 1, 1})}});
  auto b4 = conv("b4", pool, 3, 8, 1, 66);
  auto cat = t.node(OpKind::kConcat, "cat", {b1, b2, b3, b4}, {1, 18, 7, 7}, {{"axis", Attribute::of_int(1)}});
  t.g.outputs = {cat};
  std::vector<Tensor> in = {random_tensor({1, 8, 7, 7}, 67)};
  ir::Graph opt = check_pass(t.g, passes::run_pipeline, in);
  EXPECT_EQ(count_op(opt, OpKind::kFusedConv), 4);  // b1+b2a+b3a fused, b2b, b3b, b4
  EXPECT_EQ(count_op(opt, OpKind::kSplit), 1);
  const ir::Node* c = only(opt, OpKind::kConcat);
  ASSERT_NE(c, nullptr);
  // b1's slice comes from the Split; b2b, b3b and b4 write straight into the Concat's output.
  EXPECT_EQ(c->attr_ints("in_place"), (std::vector<int64_t>{0, 1, 1, 1}));
}

// With the tensor-core layout preference, the block's Split and channel Concat follow their
// NHWC inputs: no Reformat layer around them (only none at all here, since x is laid out NHWC).
TEST(ConcatInPlace, ChannelConcatAndSplitFollowNhwcLayouts) {
  TinyGraph t;
  auto x = t.input("x", {1, 8, 7, 7});
  auto conv = [&](const std::string& n, int64_t k, uint32_t seed) {
    return t.node(OpKind::kConv, n, {x, t.constant(n + "_w", random_tensor({k, 8, 1, 1}, seed))}, {1, k, 7, 7});
  };
  auto a = conv("a", 4, 71), b = conv("b", 6, 72), c = conv("c", 2, 73);
  auto cat = t.node(OpKind::kConcat, "cat", {a, b}, {1, 10, 7, 7}, {{"axis", Attribute::of_int(1)}});
  auto head = t.node(OpKind::kConv, "head", {cat, t.constant("wh", random_tensor({3, 10, 1, 1}, 74))}, {1, 3, 7, 7});
  auto tail = t.node(OpKind::kConv, "tail", {c, t.constant("wt", random_tensor({3, 2, 3, 3}, 75))}, {1, 3, 7, 7}, pads1());
  t.g.outputs = {head, tail};
  ir::Graph g = t.g;
  ASSERT_TRUE(passes::fuse_horizontal_conv(g, kiln::testing::reference_pass_options()).ok());
  ASSERT_TRUE(g.topo_sort().ok());
  ASSERT_EQ(count_op(g, OpKind::kSplit), 1);  // a, b, c fused; the Split feeds cat and tail
  auto reformats = passes::assign_layouts(g, passes::tensor_core_layout_preference);
  ASSERT_TRUE(reformats.ok());
  EXPECT_EQ(*reformats, 0);
  EXPECT_EQ(only(g, OpKind::kSplit)->attr_string("layout", ""), "NHWC");
  EXPECT_EQ(only(g, OpKind::kConcat)->attr_string("layout", ""), "NHWC");
  // Along another axis a Concat stays row-major and gets its Reformats.
  ir::Graph h = t.g;
  h.node(h.value(cat).producer).attrs["axis"] = Attribute::of_int(2);
  h.value(cat).shape = sym({1, 4, 14, 7});
  h.node(h.value(b).producer).inputs[1] = h.find_value("a_w");
  h.value(b).shape = sym({1, 4, 7, 7});
  h.node(h.value(head).producer).inputs[1] = h.add_value("wh2", DataType::kFloat32);
  h.value(h.node(h.value(head).producer).inputs[1]).constant = std::make_shared<Tensor>(random_tensor({3, 4, 1, 1}, 76));
  h.value(h.node(h.value(head).producer).inputs[1]).shape = sym({3, 4, 1, 1});
  h.value(head).shape = sym({1, 3, 14, 7});
  auto r2 = passes::assign_layouts(h, passes::tensor_core_layout_preference);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(*r2, 3);  // a and b to NCHW for the Concat, its output back to NHWC for head
}

}  // namespace
}  // namespace kiln::testing
