// propagate_qdq and eliminate_redundant_qdq, differentially: each tiny Q/DQ graph runs on the
// CPU reference before and after the pass (equal outputs), then the rewritten structure is
// asserted — each rule applied where it is exact and left alone where it is not.
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace kiln {
namespace {

using testing::check_pass;
using testing::count_op;
using testing::int64_tensor;
using testing::random_tensor;
using testing::TinyGraph;

Tensor scalar_f32(float v) {
  Tensor t(DataType::kFloat32, Shape{});
  t.data<float>()[0] = v;
  return t;
}

Tensor scalar_i8(int v) {
  Tensor t(DataType::kInt8, Shape{});
  t.data<int8_t>()[0] = static_cast<int8_t>(v);
  return t;
}

// An int8 weight [rows, cols] from a fixed formula, every code in [-100, 100].
Tensor int8_weight(const Shape& shape) {
  Tensor t(DataType::kInt8, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int8_t>()[i] = static_cast<int8_t>((i * 37) % 201 - 100);
  return t;
}

struct QdqGraph : TinyGraph {
  // x -> Q(s, z) -> DQ(s, z): returns DQ's output; the int8 value in *q when asked.
  ir::ValueId fq(ir::ValueId x, const Shape& shape, float s, int z, const std::string& name, ir::ValueId* q = nullptr) {
    const ir::ValueId sv = constant(name + "_s", scalar_f32(s));
    const ir::ValueId zv = constant(name + "_z", scalar_i8(z));
    const ir::ValueId qv = node(ir::OpKind::kQuantizeLinear, name + "_q", {x, sv, zv}, shape);
    g.value(qv).dtype = DataType::kInt8;
    if (q) *q = qv;
    return node(ir::OpKind::kDequantizeLinear, name + "_dq", {qv, sv, zv}, shape);
  }
  // DQ(w int8 constant, scales [channels] along axis, zero points 0).
  ir::ValueId dq_weight(Tensor w, const std::vector<float>& scales, int64_t axis, const std::string& name) {
    const Shape shape = w.shape();
    const ir::ValueId wv = constant(name + "_w", std::move(w));
    Tensor s(DataType::kFloat32, {static_cast<int64_t>(scales.size())});
    std::copy(scales.begin(), scales.end(), s.data<float>());
    Tensor z(DataType::kInt8, {static_cast<int64_t>(scales.size())});
    std::fill(z.data<int8_t>(), z.data<int8_t>() + z.numel(), 0);
    return node(ir::OpKind::kDequantizeLinear, name + "_dq", {wv, constant(name + "_s", s), constant(name + "_z", z)},
                shape, {{"axis", ir::Attribute::of_int(axis)}});
  }
  const ir::Node& producer_of(ir::ValueId v) const { return g.node(g.value(v).producer); }
};

std::vector<float> channel_scales(int n) {
  std::vector<float> s(n);
  for (int i = 0; i < n; ++i) s[i] = 0.01f * static_cast<float>(i + 1);
  return s;
}

// The live node whose name is `name`.
const ir::Node* find_node(const ir::Graph& g, const std::string& name) {
  for (const ir::Node& n : g.nodes)
    if (!n.removed && n.name == name) return &n;
  return nullptr;
}

const ir::Node* producer(const ir::Graph& g, ir::ValueId v) {
  const ir::NodeId p = g.value(v).producer;
  return p < 0 ? nullptr : &g.node(p);
}

// FQ -> Reshape -> MatMul(DQ(W)): the pair moves below the Reshape; fuse_qdq_linear then
// finds DQ(Q(x)) at the MatMul and makes one QuantLinear.
TEST(PropagateQdq, PairMovesBelowReshapeSoTheMatMulFuses) {
  QdqGraph t;
  const ir::ValueId x = t.input("x", {2, 4, 4});
  const ir::ValueId d = t.fq(x, {2, 4, 4}, 0.02f, -3, "act");
  const ir::ValueId r = t.node(ir::OpKind::kReshape, "reshape", {d, t.constant("shape", int64_tensor({2, 16}))}, {2, 16});
  const ir::ValueId w = t.dq_weight(int8_weight({16, 16}), channel_scales(16), 1, "fc");
  const ir::ValueId y = t.node(ir::OpKind::kMatMul, "fc", {r, w}, {2, 16});
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, passes::propagate_qdq, {random_tensor({2, 4, 4}, 1, -2.f, 2.f)});
  const ir::Node* reshape = find_node(opt, "reshape");
  ASSERT_NE(reshape, nullptr);
  EXPECT_EQ(reshape->inputs[0], x);  // the Reshape now reads the float input
  const ir::Node* fc = find_node(opt, "fc");
  ASSERT_NE(fc, nullptr);
  const ir::Node* dq = producer(opt, fc->inputs[0]);
  ASSERT_NE(dq, nullptr);
  EXPECT_EQ(dq->op, ir::OpKind::kDequantizeLinear);
  EXPECT_EQ(producer(opt, dq->inputs[0])->op, ir::OpKind::kQuantizeLinear);
  ir::Graph fused = check_pass(opt, passes::fuse_qdq_linear, {random_tensor({2, 4, 4}, 2, -2.f, 2.f)});
  EXPECT_EQ(count_op(fused, ir::OpKind::kQuantLinear), 1);
  // Without the move the same graph keeps its MatMul.
  ir::Graph plain = t.g;
  ASSERT_TRUE(passes::fuse_qdq_linear(plain, testing::reference_pass_options()).ok());
  EXPECT_EQ(count_op(plain, ir::OpKind::kQuantLinear), 0);
}

// A chain Flatten -> Transpose: the pair ends below both, in one pass.
TEST(PropagateQdq, PairMovesThroughAChain) {
  QdqGraph t;
  const ir::ValueId x = t.input("x", {3, 2, 4});
  const ir::ValueId d = t.fq(x, {3, 2, 4}, 0.05f, 7, "act");
  const ir::ValueId f = t.node(ir::OpKind::kFlatten, "flatten", {d}, {3, 8}, {{"axis", ir::Attribute::of_int(1)}});
  const ir::ValueId tr = t.node(ir::OpKind::kTranspose, "transpose", {f}, {8, 3}, {{"perm", ir::Attribute::of_ints({1, 0})}});
  const ir::ValueId y = t.node(ir::OpKind::kSigmoid, "sig", {tr}, {8, 3});
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, passes::propagate_qdq, {random_tensor({3, 2, 4}, 3, -3.f, 3.f)});
  EXPECT_EQ(find_node(opt, "flatten")->inputs[0], x);
  const ir::Node* dq = producer(opt, find_node(opt, "sig")->inputs[0]);
  EXPECT_EQ(dq->op, ir::OpKind::kDequantizeLinear);
  EXPECT_EQ(producer(opt, producer(opt, dq->inputs[0])->inputs[0])->name, "transpose");
}

// MaxPool (with pads, zero point != 0) and Relu (zero point != 0): the pair moves; MaxPool
// whose Indices output is read keeps it.
TEST(PropagateQdq, PairMovesBelowMaxPoolAndRelu) {
  for (bool indices_read : {false, true}) {
    SCOPED_TRACE(indices_read);
    QdqGraph t;
    const ir::ValueId x = t.input("x", {1, 2, 6, 6});
    const ir::ValueId d = t.fq(x, {1, 2, 6, 6}, 0.03f, -20, "act");
    const ir::ValueId rl = t.node(ir::OpKind::kRelu, "relu", {d}, {1, 2, 6, 6});
    const ir::ValueId d2 = t.fq(rl, {1, 2, 6, 6}, 0.03f, 9, "act2");
    std::map<std::string, ir::Attribute> pool = {{"kernel_shape", ir::Attribute::of_ints({3, 3})},
                                                 {"strides", ir::Attribute::of_ints({2, 2})},
                                                 {"pads", ir::Attribute::of_ints({1, 1, 1, 1})}};
    const ir::ValueId mp = t.node(ir::OpKind::kMaxPool, "pool", {d2}, {1, 2, 3, 3}, pool);
    t.g.outputs = {mp};
    if (indices_read) {
      const ir::ValueId idx = t.g.add_value("pool_indices", DataType::kInt64);
      t.g.value(idx).shape = testing::sym({1, 2, 3, 3});
      ir::Node& p = t.g.node(t.g.value(mp).producer);
      p.outputs.push_back(idx);
      t.g.value(idx).producer = p.id;
      t.g.outputs.push_back(idx);
    }
    // Many inputs land on ties after quantization, so MaxPool's maximum is tested on them.
    ir::Graph opt = check_pass(t.g, passes::propagate_qdq, {random_tensor({1, 2, 6, 6}, 4, -1.f, 1.f)});
    EXPECT_EQ(find_node(opt, "relu")->inputs[0], x);
    const ir::Node* pool_node = find_node(opt, "pool");
    if (indices_read) {
      EXPECT_EQ(producer(opt, pool_node->inputs[0])->op, ir::OpKind::kDequantizeLinear);
    } else {
      EXPECT_EQ(producer(opt, pool_node->inputs[0])->name, "relu");
      EXPECT_EQ(producer(opt, opt.outputs[0])->op, ir::OpKind::kDequantizeLinear);
    }
  }
}

// DQ -> MaxPool -> Conv (the brief's case): the pair lands at the Conv's input.
TEST(PropagateQdq, PairBelowMaxPoolReachesTheConv) {
  QdqGraph t;
  const ir::ValueId x = t.input("x", {1, 4, 8, 8});
  const ir::ValueId d = t.fq(x, {1, 4, 8, 8}, 0.05f, 12, "act");
  const ir::ValueId mp = t.node(ir::OpKind::kMaxPool, "pool", {d}, {1, 4, 4, 4},
                                {{"kernel_shape", ir::Attribute::of_ints({2, 2})},
                                 {"strides", ir::Attribute::of_ints({2, 2})}});
  const ir::ValueId w = t.dq_weight(int8_weight({8, 4, 3, 3}), channel_scales(8), 0, "conv");
  const ir::ValueId y = t.node(ir::OpKind::kConv, "conv", {mp, w}, {1, 8, 2, 2},
                               {{"kernel_shape", ir::Attribute::of_ints({3, 3})}});
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, passes::propagate_qdq, {random_tensor({1, 4, 8, 8}, 13, -2.f, 2.f)});
  const ir::Node* dq = producer(opt, find_node(opt, "conv")->inputs[0]);
  ASSERT_EQ(dq->op, ir::OpKind::kDequantizeLinear);
  const ir::Node* q = producer(opt, dq->inputs[0]);
  ASSERT_EQ(q->op, ir::OpKind::kQuantizeLinear);
  EXPECT_EQ(producer(opt, q->inputs[0])->name, "pool");
  EXPECT_EQ(find_node(opt, "pool")->inputs[0], x);
}

// Pad: reflect and constant +0 move the pair; a constant 0.5 (FQ(0.5) != 0.5 at scale 0.3)
// keeps it.
TEST(PropagateQdq, PadMovesUnlessItsConstantChangesUnderQuantization) {
  struct Case {
    const char* mode;
    float value;
    bool moves;
  };
  for (const Case& c : {Case{"reflect", 0.f, true}, Case{"constant", 0.f, true}, Case{"constant", 0.5f, false}}) {
    SCOPED_TRACE(std::string(c.mode) + " " + std::to_string(c.value));
    QdqGraph t;
    const ir::ValueId x = t.input("x", {2, 5});
    const ir::ValueId d = t.fq(x, {2, 5}, 0.3f, -1, "act");
    const ir::ValueId p = t.node(ir::OpKind::kPad, "pad",
                                 {d, t.constant("pads", int64_tensor({0, 2, 0, 1})), t.constant("v", scalar_f32(c.value))},
                                 {2, 8}, {{"mode", ir::Attribute::of_string(c.mode)}});
    t.g.outputs = {t.node(ir::OpKind::kTanh, "tanh", {p}, {2, 8})};
    ir::Graph opt = check_pass(t.g, passes::propagate_qdq, {random_tensor({2, 5}, 14, -2.f, 2.f)});
    EXPECT_EQ(find_node(opt, "pad")->inputs[0] == x, c.moves);
  }
}

// Concat of pairs with equal parameters moves; with another scale it stays.
TEST(PropagateQdq, ConcatMovesOnlyWithEqualParameters) {
  for (float s2 : {0.04f, 0.05f}) {
    SCOPED_TRACE(s2);
    QdqGraph t;
    const ir::ValueId a = t.input("a", {2, 3});
    const ir::ValueId b = t.input("b", {2, 5});
    const ir::ValueId da = t.fq(a, {2, 3}, 0.04f, 2, "qa");
    const ir::ValueId db = t.fq(b, {2, 5}, s2, 2, "qb");
    const ir::ValueId c = t.node(ir::OpKind::kConcat, "cat", {da, db}, {2, 8}, {{"axis", ir::Attribute::of_int(1)}});
    t.g.outputs = {c};
    ir::Graph opt = check_pass(t.g, passes::propagate_qdq, {random_tensor({2, 3}, 5), random_tensor({2, 5}, 6)});
    const ir::Node* cat = find_node(opt, "cat");
    EXPECT_EQ(cat->inputs[0] == a && cat->inputs[1] == b, s2 == 0.04f);
  }
}

// Slice and Gather (a runtime index too) move a per-tensor pair.
TEST(PropagateQdq, SliceAndGatherMovePerTensorPairs) {
  QdqGraph t;
  const ir::ValueId x = t.input("x", {4, 6});
  const ir::ValueId d = t.fq(x, {4, 6}, 0.01f, 0, "act");
  const ir::ValueId sl = t.node(ir::OpKind::kSlice, "slice",
                                {d, t.constant("st", int64_tensor({1})), t.constant("en", int64_tensor({5})), t.constant("ax", int64_tensor({1}))},
                                {4, 4});
  const ir::ValueId d2 = t.fq(sl, {4, 4}, 0.02f, 1, "act2");
  const ir::ValueId gi = t.constant("idx", int64_tensor({3, 0, 3}));
  const ir::ValueId ga = t.node(ir::OpKind::kGather, "gather", {d2, gi}, {3, 4}, {{"axis", ir::Attribute::of_int(0)}});
  t.g.outputs = {ga};
  ir::Graph opt = check_pass(t.g, passes::propagate_qdq, {random_tensor({4, 6}, 7)});
  EXPECT_EQ(find_node(opt, "slice")->inputs[0], x);
  EXPECT_EQ(producer(opt, find_node(opt, "gather")->inputs[0])->name, "slice");
}

// DQ(W per channel) -> Transpose -> MatMul (as QAT exports write nn.Linear): the transpose is
// folded into the 8-bit weight, the axis follows it (0 -> 1), and the MatMul fuses.
TEST(PropagateQdq, WeightTransposeFoldsAndTheAxisFollows) {
  QdqGraph t;
  const ir::ValueId x = t.input("x", {3, 32});
  const ir::ValueId d = t.fq(x, {3, 32}, 0.02f, 0, "act");
  const ir::ValueId w = t.dq_weight(int8_weight({16, 32}), channel_scales(16), 0, "fc");
  const ir::ValueId wt = t.node(ir::OpKind::kTranspose, "wt", {w}, {32, 16}, {{"perm", ir::Attribute::of_ints({1, 0})}});
  const ir::ValueId y = t.node(ir::OpKind::kMatMul, "fc", {d, wt}, {3, 16});
  t.g.outputs = {y};
  ir::Graph opt = check_pass(t.g, passes::propagate_qdq, {random_tensor({3, 32}, 8, -2.f, 2.f)});
  const ir::Node* dq = producer(opt, find_node(opt, "fc")->inputs[1]);
  ASSERT_EQ(dq->op, ir::OpKind::kDequantizeLinear);
  ASSERT_TRUE(opt.value(dq->inputs[0]).constant);
  EXPECT_EQ(opt.value(dq->inputs[0]).constant->shape(), (Shape{32, 16}));
  EXPECT_EQ(dq->attr_int("axis", 1), 1);
  ir::Graph fused = check_pass(opt, passes::fuse_qdq_linear, {random_tensor({3, 32}, 9, -2.f, 2.f)});
  EXPECT_EQ(count_op(fused, ir::OpKind::kQuantLinear), 1);
}

// A per-axis Reshape moves only when the axis dim is kept with the same elements before it.
TEST(PropagateQdq, PerAxisReshapeOnlyWhenTheAxisIsKept) {
  for (bool kept : {true, false}) {
    SCOPED_TRACE(kept);
    QdqGraph t;
    const Shape wshape = kept ? Shape{16, 2, 8} : Shape{4, 4, 16};
    const ir::ValueId w = t.dq_weight(int8_weight(wshape), channel_scales(static_cast<int>(wshape[0])), 0, "w");
    const ir::ValueId x = t.input("x", {16, 16});
    const ir::ValueId r = t.node(ir::OpKind::kReshape, "reshape", {w, t.constant("shape", int64_tensor({16, 16}))}, {16, 16});
    const ir::ValueId y = t.node(ir::OpKind::kAdd, "add", {r, x}, {16, 16});
    t.g.outputs = {y};
    ir::Graph opt = check_pass(t.g, passes::propagate_qdq, {random_tensor({16, 16}, 10)});
    const ir::Node* p = producer(opt, find_node(opt, "add")->inputs[0]);
    EXPECT_EQ(p->op, kept ? ir::OpKind::kDequantizeLinear : ir::OpKind::kReshape);
  }
}

// FQ(FQ(x)) with equal parameters -> FQ(x); with another scale the second pair stays.
TEST(EliminateRedundantQdq, IdenticalPairsCollapseOthersStay) {
  for (float s2 : {0.05f, 0.1f}) {
    SCOPED_TRACE(s2);
    QdqGraph t;
    const ir::ValueId x = t.input("x", {64});
    const ir::ValueId d1 = t.fq(x, {64}, 0.05f, -4, "p1");
    const ir::ValueId d2 = t.fq(d1, {64}, s2, -4, "p2");
    const ir::ValueId y = t.node(ir::OpKind::kSigmoid, "sig", {d2}, {64});
    t.g.outputs = {y};
    ir::Graph opt = check_pass(t.g, passes::eliminate_redundant_qdq, {random_tensor({64}, 11, -8.f, 8.f)});
    passes::remove_dead_nodes(opt);
    EXPECT_EQ(count_op(opt, ir::OpKind::kQuantizeLinear), s2 == 0.05f ? 1 : 2);
    EXPECT_EQ(count_op(opt, ir::OpKind::kDequantizeLinear), s2 == 0.05f ? 1 : 2);
  }
}

// Per-axis pairs (axis 0 of [4, 8], zero points per channel): FQ(FQ(x)) -> FQ(x) too, the
// check running every code per channel.
TEST(EliminateRedundantQdq, PerAxisIdenticalPairsCollapse) {
  QdqGraph t;
  const ir::ValueId x = t.input("x", {4, 8});
  Tensor s(DataType::kFloat32, {4});
  Tensor z(DataType::kInt8, {4});
  for (int c = 0; c < 4; ++c) {
    s.data<float>()[c] = 0.01f * static_cast<float>(3 * c + 1);
    z.data<int8_t>()[c] = static_cast<int8_t>(10 * c - 15);
  }
  const ir::ValueId sv = t.constant("s", s), zv = t.constant("z", z);
  const std::map<std::string, ir::Attribute> axis0 = {{"axis", ir::Attribute::of_int(0)}};
  ir::ValueId v = x;
  for (int k = 0; k < 2; ++k) {
    const ir::ValueId q = t.node(ir::OpKind::kQuantizeLinear, "q" + std::to_string(k), {v, sv, zv}, {4, 8}, axis0);
    t.g.value(q).dtype = DataType::kInt8;
    v = t.node(ir::OpKind::kDequantizeLinear, "dq" + std::to_string(k), {q, sv, zv}, {4, 8}, axis0);
  }
  t.g.outputs = {t.node(ir::OpKind::kSigmoid, "sig", {v}, {4, 8})};
  ir::Graph opt = check_pass(t.g, passes::eliminate_redundant_qdq, {random_tensor({4, 8}, 12, -3.f, 3.f)});
  passes::remove_dead_nodes(opt);
  EXPECT_EQ(count_op(opt, ir::OpKind::kQuantizeLinear), 1);
  EXPECT_EQ(count_op(opt, ir::OpKind::kDequantizeLinear), 1);
}

// Q(DQ(q)) -> q on an int8 graph input, checked on every code; a Q to another type stays.
TEST(EliminateRedundantQdq, QuantizeOfDequantizeGivesTheCodesBack) {
  QdqGraph t;
  const ir::ValueId q = t.g.add_value("q", DataType::kInt8);
  t.g.value(q).shape = testing::sym({256});
  t.g.inputs.push_back(q);
  const ir::ValueId s = t.constant("s", scalar_f32(0.0173f));
  const ir::ValueId z = t.constant("z", scalar_i8(-9));
  const ir::ValueId d = t.node(ir::OpKind::kDequantizeLinear, "dq1", {q, s, z}, {256});
  const ir::ValueId q2 = t.node(ir::OpKind::kQuantizeLinear, "q2", {d, s, z}, {256});
  t.g.value(q2).dtype = DataType::kInt8;
  const ir::ValueId s3 = t.constant("s3", scalar_f32(0.5f));
  const ir::ValueId y = t.node(ir::OpKind::kDequantizeLinear, "dq3", {q2, s3, z}, {256});
  t.g.outputs = {y};
  Tensor codes(DataType::kInt8, {256});
  for (int i = 0; i < 256; ++i) codes.data<int8_t>()[i] = static_cast<int8_t>(i - 128);
  ir::Graph opt = check_pass(t.g, passes::eliminate_redundant_qdq, {codes});
  EXPECT_EQ(find_node(opt, "q2"), nullptr);
  EXPECT_EQ(find_node(opt, "dq3")->inputs[0], q);
}

// Without the evaluator nothing is checked, so nothing is dropped.
TEST(EliminateRedundantQdq, NothingWithoutAnEvaluator) {
  QdqGraph t;
  const ir::ValueId x = t.input("x", {8});
  const ir::ValueId y = t.fq(t.fq(x, {8}, 0.1f, 0, "p1"), {8}, 0.1f, 0, "p2");
  t.g.outputs = {y};
  ir::Graph g = t.g;
  ASSERT_TRUE(passes::eliminate_redundant_qdq(g, passes::PassOptions{}).ok());
  EXPECT_EQ(count_op(g, ir::OpKind::kDequantizeLinear), 2);
}

}  // namespace
}  // namespace kiln
