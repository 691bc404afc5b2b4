// Tests for the sequence/optional CPU kernels and TfIdfVectorizer on hand-built graphs:
// split/concat round trips on random data against a naive slice, insert/erase/at with
// negative positions, SequenceMap running a real body, TF/IDF/TFIDF weighting with skips,
// and clean errors for bad positions, mismatched shapes and sequences fed to tensor ops.
#include <gtest/gtest.h>

#include <random>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/interpreter.h"

namespace kiln {
namespace {


// Runs one node; an undefined Tensor in `inputs` is an omitted optional input. Graph inputs
// get the value kind of what is fed to them.
StatusOr<std::vector<Tensor>> run_node(ir::OpKind op, int opset, const std::vector<Tensor>& inputs, int n_out,
                                       std::map<std::string, ir::Attribute> attrs = {}) {
  ir::Graph g;
  g.name = "test";
  ir::Node n;
  n.name = "n0";
  n.op = op;
  n.opset = opset;
  std::vector<Tensor> fed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) { n.inputs.push_back(ir::kNoValue); continue; }
    ir::ValueId v = g.add_value("in" + std::to_string(i), inputs[i].dtype());
    if (inputs[i].is_sequence()) g.value(v).kind = ir::ValueKind::kSequence;
    if (inputs[i].is_none()) g.value(v).kind = ir::ValueKind::kOptionalTensor;
    g.inputs.push_back(v);
    fed.push_back(inputs[i]);
    n.inputs.push_back(v);
  }
  for (int k = 0; k < n_out; ++k) n.outputs.push_back(g.add_value("out" + std::to_string(k)));
  n.attrs = std::move(attrs);
  g.outputs = n.outputs;
  g.add_node(std::move(n));
  return interpret(g, fed);
}

Tensor random_floats(Shape s, uint32_t seed) {
  Tensor t(DataType::kFloat32, std::move(s));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}
Tensor int64s(Shape s, std::vector<int64_t> v) {
  Tensor t(DataType::kInt64, std::move(s));
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}
Tensor scalar64(int64_t v) { return Tensor::scalar<int64_t>(DataType::kInt64, v); }
float first_value(const Tensor& t) { return t.data<float>()[0]; }

TEST(Sequence, SplitThenConcatRoundTripsAndMatchesNaiveSlices) {
  const Tensor x = random_floats({2, 6, 3}, 7);
  auto seq = run_node(ir::OpKind::kSplitToSequence, 11, {x, int64s({3}, {1, 3, 2})}, 1, {{"axis", ir::Attribute::of_int(1)}});
  ASSERT_TRUE(seq.ok()) << seq.status().to_string();
  const Tensor& s = (*seq)[0];
  ASSERT_TRUE(s.is_sequence());
  ASSERT_EQ(s.items().size(), 3u);
  const int64_t begins[] = {0, 1, 4}, lens[] = {1, 3, 2};
  for (int k = 0; k < 3; ++k) {
    const Tensor& piece = s.items()[k];
    ASSERT_EQ(piece.shape(), (Shape{2, lens[k], 3}));
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t b = 0; b < lens[k]; ++b)
        for (int64_t c = 0; c < 3; ++c)
          EXPECT_EQ(piece.data<float>()[(a * lens[k] + b) * 3 + c], x.data<float>()[(a * 6 + begins[k] + b) * 3 + c]);
  }
  auto back = run_node(ir::OpKind::kConcatFromSequence, 11, {s}, 1, {{"axis", ir::Attribute::of_int(-2)}});
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_TRUE((*back)[0].bit_equal(x));
}

TEST(Sequence, SplitWithoutSplitDropsAxisAndConcatNewAxisStacks) {
  const Tensor x = random_floats({3, 4}, 11);
  auto seq = run_node(ir::OpKind::kSplitToSequence, 11, {x}, 1, {{"axis", ir::Attribute::of_int(1)}, {"keepdims", ir::Attribute::of_int(0)}});
  ASSERT_TRUE(seq.ok()) << seq.status().to_string();
  ASSERT_EQ((*seq)[0].items().size(), 4u);
  EXPECT_EQ((*seq)[0].items()[2].shape(), (Shape{3}));
  // Stacking the columns along a new axis 1 rebuilds x; along axis 0 it gives x transposed.
  auto same = run_node(ir::OpKind::kConcatFromSequence, 11, {(*seq)[0]}, 1, {{"axis", ir::Attribute::of_int(1)}, {"new_axis", ir::Attribute::of_int(1)}});
  ASSERT_TRUE(same.ok()) << same.status().to_string();
  EXPECT_TRUE((*same)[0].bit_equal(x));
  auto tr = run_node(ir::OpKind::kConcatFromSequence, 11, {(*seq)[0]}, 1, {{"axis", ir::Attribute::of_int(0)}, {"new_axis", ir::Attribute::of_int(1)}});
  ASSERT_TRUE(tr.ok()) << tr.status().to_string();
  ASSERT_EQ((*tr)[0].shape(), (Shape{4, 3}));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ((*tr)[0].data<float>()[j * 3 + i], x.data<float>()[i * 4 + j]);
}

TEST(Sequence, InsertEraseAtWithNegativePositions) {
  std::vector<Tensor> xs;
  for (int i = 0; i < 3; ++i) xs.push_back(Tensor::scalar<float>(DataType::kFloat32, 10.f + i));
  auto seq = run_node(ir::OpKind::kSequenceConstruct, 11, xs, 1);
  ASSERT_TRUE(seq.ok());
  // [10, 11, 12] -> insert 99 before position -1 -> [10, 11, 99, 12]
  auto ins = run_node(ir::OpKind::kSequenceInsert, 11, {(*seq)[0], Tensor::scalar<float>(DataType::kFloat32, 99.f), scalar64(-1)}, 1);
  ASSERT_TRUE(ins.ok()) << ins.status().to_string();
  ASSERT_EQ((*ins)[0].items().size(), 4u);
  EXPECT_EQ(first_value((*ins)[0].items()[2]), 99.f);
  // erase position -4 (the first) -> [11, 99, 12]; erase with no position drops the last -> [11, 99]
  auto er = run_node(ir::OpKind::kSequenceErase, 11, {(*ins)[0], scalar64(-4)}, 1);
  ASSERT_TRUE(er.ok()) << er.status().to_string();
  auto er2 = run_node(ir::OpKind::kSequenceErase, 11, {(*er)[0]}, 1);
  ASSERT_TRUE(er2.ok()) << er2.status().to_string();
  auto len = run_node(ir::OpKind::kSequenceLength, 11, {(*er2)[0]}, 1);
  ASSERT_TRUE(len.ok());
  EXPECT_EQ((*len)[0].data<int64_t>()[0], 2);
  auto at = run_node(ir::OpKind::kSequenceAt, 11, {(*er2)[0], scalar64(-1)}, 1);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(first_value((*at)[0]), 99.f);
  // The input sequence is unchanged (sequences are immutable values).
  EXPECT_EQ((*seq)[0].items().size(), 3u);
}

TEST(Sequence, SequenceMapRunsBodyPerElementWithBroadcastTensor) {
  auto body = std::make_shared<ir::Graph>();
  body->name = "body";
  ir::ValueId a = body->add_value("a", DataType::kFloat32), b = body->add_value("b", DataType::kFloat32);
  body->inputs = {a, b};
  ir::Node add;
  add.name = "add";
  add.op = ir::OpKind::kAdd;
  add.opset = 17;
  add.inputs = {a, b};
  add.outputs = {body->add_value("sum", DataType::kFloat32)};
  body->outputs = add.outputs;
  body->add_node(std::move(add));
  ir::Attribute battr;
  battr.kind = ir::Attribute::Kind::kGraph;
  battr.g = body;
  const Tensor e0 = random_floats({4}, 1), e1 = random_floats({4}, 2), c = random_floats({4}, 3);
  auto out = run_node(ir::OpKind::kSequenceMap, 17, {Tensor::sequence(DataType::kFloat32, {e0, e1}), c}, 1, {{"body", battr}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& s = (*out)[0];
  ASSERT_EQ(s.items().size(), 2u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(s.items()[0].data<float>()[i], e0.data<float>()[i] + c.data<float>()[i]);
    EXPECT_FLOAT_EQ(s.items()[1].data<float>()[i], e1.data<float>()[i] + c.data<float>()[i]);
  }
}

TEST(Sequence, OptionalWrapsAndReportsEmptiness) {
  const Tensor x = random_floats({2}, 5);
  auto has = run_node(ir::OpKind::kOptionalHasElement, 15, {Tensor::none(DataType::kFloat32)}, 1);
  ASSERT_TRUE(has.ok()) << has.status().to_string();
  EXPECT_EQ((*has)[0].data<uint8_t>()[0], 0);
  auto wrapped = run_node(ir::OpKind::kOptional, 15, {x}, 1);
  ASSERT_TRUE(wrapped.ok());
  auto got = run_node(ir::OpKind::kOptionalGetElement, 15, {(*wrapped)[0]}, 1);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE((*got)[0].bit_equal(x));
  auto bad = run_node(ir::OpKind::kOptionalGetElement, 15, {Tensor::none(DataType::kFloat32)}, 1);
  EXPECT_FALSE(bad.ok());
}

TEST(TfIdfVectorizer, WeightsAndSkipGrams) {
  // Pool: unigrams {2, 3} -> bins 0, 1; bigrams {(2,3), (3,5)} -> bins 2, 3.
  std::map<std::string, ir::Attribute> attrs = {
      {"min_gram_length", ir::Attribute::of_int(1)}, {"max_gram_length", ir::Attribute::of_int(2)}, {"max_skip_count", ir::Attribute::of_int(1)},
      {"ngram_counts", ir::Attribute::of_ints({0, 2})}, {"ngram_indexes", ir::Attribute::of_ints({0, 1, 2, 3})},
      {"pool_int64s", ir::Attribute::of_ints({2, 3, 2, 3, 3, 5})}};
  ir::Attribute mode;
  mode.kind = ir::Attribute::Kind::kString;
  mode.s = "TF";
  attrs["mode"] = mode;
  // Row [2, 3, 5, 3]: unigrams 2 x1, 3 x2 (counted once despite skips); bigrams with skip 0:
  // (2,3) (3,5) (5,3); with skip 1: (2,5) (3,3) -> (2,3) x1, (3,5) x1.
  Tensor x(DataType::kInt32, {2, 4});
  const int32_t data[] = {2, 3, 5, 3, 7, 2, 7, 3};  // row 2: bigram (2,3) only with skip 1
  std::copy(data, data + 8, x.data<int32_t>());
  auto tf = run_node(ir::OpKind::kTfIdfVectorizer, 9, {x}, 1, attrs);
  ASSERT_TRUE(tf.ok()) << tf.status().to_string();
  const float want_tf[] = {1, 2, 1, 1, 1, 1, 1, 0};
  ASSERT_EQ((*tf)[0].shape(), (Shape{2, 4}));
  for (int i = 0; i < 8; ++i) EXPECT_EQ((*tf)[0].data<float>()[i], want_tf[i]) << i;
  ir::Attribute w;
  w.kind = ir::Attribute::Kind::kFloats;
  w.floats = {0.5f, 2.f, 3.f, 4.f};
  attrs["weights"] = w;
  attrs["mode"].s = "TFIDF";
  auto tfidf = run_node(ir::OpKind::kTfIdfVectorizer, 9, {x}, 1, attrs);
  ASSERT_TRUE(tfidf.ok());
  attrs["mode"].s = "IDF";
  auto idf = run_node(ir::OpKind::kTfIdfVectorizer, 9, {x}, 1, attrs);
  ASSERT_TRUE(idf.ok());
  for (int i = 0; i < 8; ++i) {
    EXPECT_FLOAT_EQ((*tfidf)[0].data<float>()[i], want_tf[i] * w.floats[i % 4]) << i;
    EXPECT_FLOAT_EQ((*idf)[0].data<float>()[i], want_tf[i] > 0 ? w.floats[i % 4] : 0.f) << i;
  }
}

TEST(Sequence, BadInputsFailCleanly) {
  const Tensor seq = Tensor::sequence(DataType::kFloat32, {random_floats({2, 3}, 1), random_floats({2, 4}, 2)});
  auto at = run_node(ir::OpKind::kSequenceAt, 11, {seq, scalar64(2)}, 1);
  ASSERT_FALSE(at.ok());
  EXPECT_NE(at.status().message().find("out of range"), std::string::npos) << at.status().to_string();
  // Concatenation along axis 0 needs equal extents elsewhere (3 vs 4).
  auto cat = run_node(ir::OpKind::kConcatFromSequence, 11, {seq}, 1, {{"axis", ir::Attribute::of_int(0)}});
  EXPECT_FALSE(cat.ok());
  auto cat_ok = run_node(ir::OpKind::kConcatFromSequence, 11, {seq}, 1, {{"axis", ir::Attribute::of_int(1)}});
  ASSERT_TRUE(cat_ok.ok()) << cat_ok.status().to_string();
  EXPECT_EQ((*cat_ok)[0].shape(), (Shape{2, 7}));
  // A sequence fed to a tensor op is rejected by the interpreter, not misread.
  auto relu = run_node(ir::OpKind::kRelu, 14, {seq}, 1);
  ASSERT_FALSE(relu.ok());
  EXPECT_NE(relu.status().message().find("sequence"), std::string::npos) << relu.status().to_string();
  auto split = run_node(ir::OpKind::kSplitToSequence, 11, {random_floats({5}, 3), int64s({2}, {2, 2})}, 1);
  EXPECT_FALSE(split.ok());
  auto erase_empty = run_node(ir::OpKind::kSequenceErase, 11, {Tensor::sequence(DataType::kFloat32, {})}, 1);
  EXPECT_FALSE(erase_empty.ok());
}

}  // namespace
}  // namespace kiln
