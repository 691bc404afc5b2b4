// The constant evaluator seam (docs/decisions/0030-module-targets.md): shape inference and
// fold_constants evaluate all-constant layers only through the ir::ConstantEvaluator they are
// given (the builder gives the CPU reference one), never by calling a backend themselves.
#include "ir/shape_inference.h"
#include "passes/pass_test_util.h"

namespace kiln::testing {
namespace {

using ir::OpKind;

// The reference evaluator, counting evaluate() calls; `support` false: supports nothing.
class CountingEvaluator final : public ir::ConstantEvaluator {
 public:
  explicit CountingEvaluator(bool support) : support_(support) {}
  bool supports(OpKind op) const override { return support_ && reference_evaluator().supports(op); }
  StatusOr<std::vector<Tensor>> evaluate(const ir::Graph& g) const override {
    ++calls;
    return reference_evaluator().evaluate(g);
  }
  mutable int calls = 0;

 private:
  bool support_;
};

// x * (c1 + c2): the Add reads only constants.
TinyGraph constant_add_graph(const Tensor& c1, const Tensor& c2) {
  TinyGraph t;
  auto x = t.input("x", {4});
  auto s = t.node(OpKind::kAdd, "const_add", {t.constant("c1", c1), t.constant("c2", c2)}, {4});
  t.g.outputs = {t.node(OpKind::kMul, "mul", {x, s}, {4})};
  return t;
}

TEST(ConstantEvaluator, FoldConstantsEvaluatesOnlyThroughTheGivenEvaluator) {
  const Tensor c1 = random_tensor({4}, 21), c2 = random_tensor({4}, 22);

  ir::Graph none = constant_add_graph(c1, c2).g;
  ASSERT_TRUE(passes::fold_constants(none, passes::PassOptions{}).ok());
  EXPECT_EQ(count_op(none, OpKind::kAdd), 1);  // no evaluator: nothing to compute it with

  CountingEvaluator refuses(false);
  passes::PassOptions o;
  o.evaluator = &refuses;
  ir::Graph unsupported = constant_add_graph(c1, c2).g;
  ASSERT_TRUE(passes::fold_constants(unsupported, o).ok());
  EXPECT_EQ(count_op(unsupported, OpKind::kAdd), 1);
  EXPECT_EQ(refuses.calls, 0);

  CountingEvaluator counting(true);
  o.evaluator = &counting;
  ir::Graph folded = constant_add_graph(c1, c2).g;
  ASSERT_TRUE(passes::fold_constants(folded, o).ok());
  EXPECT_EQ(count_op(folded, OpKind::kAdd), 0);
  EXPECT_EQ(counting.calls, 1);
  // The Mul now reads the evaluated sum as a constant.
  const Tensor* sum = nullptr;
  for (const ir::Node& n : folded.nodes)
    if (!n.removed && n.op == OpKind::kMul) sum = folded.value(n.inputs[1]).constant.get();
  ASSERT_NE(sum, nullptr);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(sum->data<float>()[i], c1.data<float>()[i] + c2.data<float>()[i]);
}

TEST(ConstantEvaluator, ShapeInferenceEvaluatesConstantLayersWithTheGivenEvaluator) {
  // y = Reshape(x, Add([3, 2], [0, 2])): the target shape [3, 4] is an all-constant layer.
  auto make = [] {
    TinyGraph t;
    auto x = t.input("x", {12});
    Tensor a(DataType::kInt64, {2}), b(DataType::kInt64, {2});
    a.data<int64_t>()[0] = 3, a.data<int64_t>()[1] = 2;
    b.data<int64_t>()[0] = 0, b.data<int64_t>()[1] = 2;
    auto shape = t.node(OpKind::kAdd, "shape_add", {t.constant("a", a), t.constant("b", b)}, {2});
    t.g.value(shape).dtype = DataType::kInt64;
    auto y = t.node(OpKind::kReshape, "reshape", {x, shape}, {3, 4});
    for (ir::Value& v : t.g.values)
      if (!v.constant && &v != &t.g.value(x)) v.shape.reset();  // nothing declared: inference decides
    t.g.outputs = {y};
    return t.g;
  };
  CountingEvaluator refuses(false);
  ir::Graph g0 = make();
  ASSERT_TRUE(ir::infer_shapes(g0, nullptr, &refuses).ok());
  EXPECT_EQ(refuses.calls, 0);

  CountingEvaluator counting(true);
  ir::Graph g1 = make();
  ASSERT_TRUE(ir::infer_shapes(g1, nullptr, &counting).ok());
  EXPECT_GE(counting.calls, 1);
  const auto& y = g1.value(g1.outputs[0]).shape;
  ASSERT_TRUE(y.has_value());
  ASSERT_EQ(y->size(), 2u);
  EXPECT_EQ((*y)[0], ir::Dim::known(3));
  EXPECT_EQ((*y)[1], ir::Dim::known(4));
}

}  // namespace
}  // namespace kiln::testing
