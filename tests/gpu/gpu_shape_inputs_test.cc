// Shape-tensor inputs of CUDA engines (docs/decisions/0073): small integer graph inputs read only
// as shape operands (Reshape's shape, ReduceSum's axes) are found, mark the graph value-dependent
// even where the made-up runs agree, and are bound as constants of the graph lowered at one set of
// values. Without a GPU: the dry-run lowering (check_gpu_support / plan_gpu_streams) at two sets
// of values. With a GPU (GpuShapeInputs suite): an engine executed at several values against the
// CPU reference, enqueue refused.
#include <gtest/gtest.h>

#include "backends/cpu/interpreter.h"
#include "builder/build_from_graph.h"
#include "gpu/gpu_test_util.h"
#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "op_table/op_table.h"
#include "passes/pass_test_util.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

using op_table::int_input;

// sum = ReduceSum(Reshape(x, s), a, keepdims=1) for x float [2, 3, 4], s int64 [2], a int64 [1]:
// the output's shape and the reduced axis are the values of s and a.
TinyGraph reshape_reduce_graph() {
  TinyGraph t;
  auto x = t.input("x", {2, 3, 4});
  auto s = int_input(t, "s", {2}, DataType::kInt64);
  auto a = int_input(t, "a", {1}, DataType::kInt64);
  auto r = t.node(ir::OpKind::kReshape, "reshape", {x, s}, {});
  t.g.value(r).shape.reset();  // its shape is s's value: static inference cannot fix it
  auto y = t.node(ir::OpKind::kReduceSum, "sum", {r, a}, {}, {{"keepdims", ir::Attribute::of_int(int64_t{1})}});
  t.g.value(y).shape.reset();
  t.g.outputs = {y};
  return t;
}

// sum = ReduceSum(x, a, keepdims=0) for x float [4, 4], a int64 [1]: the output shape is [4]
// whichever axis a names, but the values are not.
TinyGraph square_reduce_graph() {
  TinyGraph t;
  auto x = t.input("x", {4, 4});
  auto a = int_input(t, "a", {1}, DataType::kInt64);
  auto y = t.node(ir::OpKind::kReduceSum, "sum", {x, a}, {4}, {{"keepdims", ir::Attribute::of_int(int64_t{0})}});
  t.g.outputs = {y};
  return t;
}

TEST(GpuShapeInputsLowering, FindsInputsReadOnlyAsShapeOperands) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  const TinyGraph t = reshape_reduce_graph();
  const auto si = cuda::shape_operand_inputs(t.g);
  ASSERT_EQ(si.size(), 2u);
  EXPECT_EQ(si[0].input, 1u);  // s
  EXPECT_EQ(si[1].input, 2u);  // a
  const std::string dep = cuda::shape_input_dependence(t.g, si);
  EXPECT_NE(dep.find("'s'"), std::string::npos) << dep;
  EXPECT_NE(dep.find("(Reshape) input 1"), std::string::npos) << dep;
  EXPECT_NE(dep.find("(ReduceSum) input 1"), std::string::npos) << dep;
  // An input also read as data (here by a Cast) is not a shape tensor: it stays an activation.
  TinyGraph u = reshape_reduce_graph();
  auto c = u.node(ir::OpKind::kCast, "cast", {u.g.inputs[2]}, {1}, {{"to", ir::Attribute::of_int(int64_t{1})}});
  u.g.outputs.push_back(c);
  const auto su = cuda::shape_operand_inputs(u.g);
  ASSERT_EQ(su.size(), 1u);
  EXPECT_EQ(su[0].input, 1u);
  // Above kMaxShapeInputElements: not a shape tensor.
  TinyGraph big;
  auto bx = big.input("x", {2, 100});
  auto bs = int_input(big, "s", {cuda::kMaxShapeInputElements + 1}, DataType::kInt64);
  auto by = big.node(ir::OpKind::kReshape, "reshape", {bx, bs}, {});
  big.g.outputs = {by};
  EXPECT_TRUE(cuda::shape_operand_inputs(big.g).empty());
#endif
}

// ReduceSum's axes with keepdims=0 over a square input: every value gives the output shape [4],
// so comparing shapes of made-up runs cannot see the dependence; the shape operand marks it.
TEST(GpuShapeInputsLowering, AxesInputMarksValueDependentWithoutShapeChange) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  const TinyGraph t = square_reduce_graph();
  auto vs = cuda::infer_value_shapes_by_reference(t.g, {{4, 4}, {1}});
  ASSERT_TRUE(vs.ok()) << vs.status().to_string();
  EXPECT_TRUE(vs->value_dependent);
  EXPECT_NE(vs->dependence.find("graph input 'a'"), std::string::npos) << vs->dependence;
  // Unbound, the lowering refuses the integer activation, naming the node.
  Status unbound = cuda::check_gpu_support(t.g, *vs);
  EXPECT_FALSE(unbound.ok());
  EXPECT_NE(unbound.message().find("'sum'"), std::string::npos) << unbound.message();
#endif
}

#ifdef KILN_HAVE_CUDA
// The graph bound at `values`, its shapes at those values, and the dry-run lowering of it.
struct Bound {
  ir::Graph g;
  cuda::ValueShapes vs;
  cuda::GpuStreamSummary summary;
};
StatusOr<Bound> lower_at(const ir::Graph& g, const std::vector<Tensor>& values) {
  Bound b;
  std::vector<Shape> shapes;
  for (const Tensor& v : values) shapes.push_back(v.shape());
  KILN_ASSIGN_OR_RETURN(b.g, cuda::bind_shape_inputs(g, values));
  KILN_ASSIGN_OR_RETURN(b.vs, cuda::infer_value_shapes_by_reference(b.g, shapes, &values));
  KILN_RETURN_IF_ERROR(cuda::check_gpu_support(b.g, b.vs));
  KILN_ASSIGN_OR_RETURN(b.summary, cuda::plan_gpu_streams(b.g, b.vs, cuda::GpuBuildOptions{}));
  return b;
}
#endif

// Two sets of values lower to two models: the output shapes follow s and a; the shape inputs
// stay graph inputs (staged as int64, read by no layer); values that do not fit are refused by
// the Reshape, and a values list of the wrong length by bind_shape_inputs.
TEST(GpuShapeInputsLowering, LowersAtEachSetOfValues) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  const TinyGraph t = reshape_reduce_graph();
  const Tensor x = random_tensor({2, 3, 4}, 3);
  auto first = lower_at(t.g, {x, int64_tensor({6, 4}), int64_tensor({0})});
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  auto second = lower_at(t.g, {x, int64_tensor({4, 6}), int64_tensor({1})});
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_EQ(first->vs.shapes[t.g.outputs[0]], (Shape{1, 4}));
  EXPECT_EQ(second->vs.shapes[t.g.outputs[0]], (Shape{4, 1}));
  for (const Bound* b : {&*first, &*second}) {
    ASSERT_EQ(b->summary.input_dtypes.size(), 3u);
    EXPECT_EQ(b->summary.input_dtypes[1], DataType::kInt64);
    EXPECT_EQ(b->g.inputs, t.g.inputs);
    EXPECT_TRUE(cuda::shape_operand_inputs(b->g).empty());  // bound: no shape input left
    // Static inference fixes every shape of the bound graph: an engine keys its models by the
    // shape inputs' bytes only (gpu_engine.cc).
    EXPECT_FALSE(b->vs.value_dependent) << b->vs.dependence;
  }
  // The same axis on the square graph lowers at either value, with equal shapes.
  const TinyGraph sq = square_reduce_graph();
  const Tensor xs = random_tensor({4, 4}, 4);
  auto a0 = lower_at(sq.g, {xs, int64_tensor({0})});
  auto a1 = lower_at(sq.g, {xs, int64_tensor({1})});
  ASSERT_TRUE(a0.ok()) << a0.status().to_string();
  ASSERT_TRUE(a1.ok()) << a1.status().to_string();
  EXPECT_EQ(a0->vs.shapes[sq.g.outputs[0]], a1->vs.shapes[sq.g.outputs[0]]);
  // 25 elements cannot hold x's 24.
  auto bad = lower_at(t.g, {x, int64_tensor({5, 5}), int64_tensor({0})});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("reshape"), std::string::npos) << bad.status().to_string();
  auto count = cuda::bind_shape_inputs(t.g, {x});
  EXPECT_EQ(count.status().code(), StatusCode::kInvalidArgument);
#endif
}

// A node computed only from bound values (BlackmanWindow of its size input) is folded to a
// constant in the bound copy, with the size the call gives; the graph input stays.
TEST(GpuShapeInputsLowering, NodesOfBoundValuesOnlyAreFolded) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  TinyGraph t;
  auto n = int_input(t, "size", {}, DataType::kInt64);
  auto w = t.node(ir::OpKind::kBlackmanWindow, "window", {n}, {});
  t.g.value(w).shape.reset();
  t.g.outputs = {w};
  ASSERT_EQ(cuda::shape_operand_inputs(t.g).size(), 1u);
  for (int64_t size : {5, 9}) {
    Tensor v(DataType::kInt64, {});
    v.data<int64_t>()[0] = size;
    auto b = lower_at(t.g, {v});
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    const ir::Value& out = b->g.value(t.g.outputs[0]);
    ASSERT_TRUE(out.constant) << "size " << size;
    EXPECT_EQ(out.constant->shape(), Shape{size});
    EXPECT_EQ(b->g.inputs, t.g.inputs);
  }
#endif
}

// A branch graph of If: out = Identity(v), v a constant [2] of `value`, or the enclosing graph's
// value `outer` when it is not empty (an outer-scope read).
std::shared_ptr<ir::Graph> if_branch(float value, const std::string& outer) {
  auto g = std::make_shared<ir::Graph>();
  g->opset_imports[""] = 17;
  const ir::ValueId v = g->add_value(outer.empty() ? "c" : outer, DataType::kFloat32);
  g->value(v).shape = sym({2});
  if (outer.empty()) {
    Tensor c(DataType::kFloat32, {2});
    c.data<float>()[0] = c.data<float>()[1] = value;
    g->value(v).constant = std::make_shared<Tensor>(std::move(c));
  } else {
    g->outer_refs.push_back(v);
  }
  const ir::ValueId o = g->add_value("out_" + std::to_string(static_cast<int>(value)), DataType::kFloat32);
  g->value(o).shape = sym({2});
  ir::Node n;
  n.op = ir::OpKind::kIdentity;
  n.name = "id";
  n.opset = 17;
  n.inputs = {v};
  n.outputs = {o};
  g->add_node(std::move(n));
  g->outputs = {o};
  return g;
}

// y = If(cond) with a run-time bool cond (docs/decisions/0076): bound at each call's value, an If
// whose branches read nothing outside them folds to the chosen branch's constant; one whose
// branch reads an outer value stays an If (refused by node on the GPU, never guessed).
TEST(GpuShapeInputsLowering, IfOfClosedBranchesFoldsAtTheBoundCondition) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  for (bool closed : {true, false}) {
    TinyGraph t;
    auto x = t.input("x", {2});
    auto cond = int_input(t, "cond", {}, DataType::kBool);
    ir::Attribute then_a, else_a;
    then_a.kind = else_a.kind = ir::Attribute::Kind::kGraph;
    then_a.g = if_branch(1.f, "");
    else_a.g = if_branch(2.f, closed ? "" : "x");
    auto y = t.node(ir::OpKind::kIf, "if", {cond}, {2}, {{"then_branch", then_a}, {"else_branch", else_a}});
    auto z = t.node(ir::OpKind::kAdd, "add", {y, x}, {2});
    t.g.outputs = {z};
    ASSERT_EQ(cuda::shape_operand_inputs(t.g).size(), 1u);
    for (bool c : {true, false}) {
      Tensor v(DataType::kBool, {});
      static_cast<uint8_t*>(v.raw())[0] = c ? 1 : 0;
      auto b = cuda::bind_shape_inputs(t.g, {Tensor(DataType::kFloat32, {2}), v});
      ASSERT_TRUE(b.ok()) << b.status().to_string();
      const ir::Value& out = b->value(y);
      if (closed) {
        ASSERT_TRUE(out.constant) << "cond " << c;
        EXPECT_EQ(out.constant->data<float>()[0], c ? 1.f : 2.f);
      } else {
        EXPECT_FALSE(out.constant) << "cond " << c;
      }
    }
  }
#endif
}

// ---- with a GPU

StatusOr<std::shared_ptr<Engine>> cuda_engine(const ir::Graph& g) {
  BuilderConfig c;
  c.target = TargetDevice::kCuda;
  c.tf32 = false;
  KILN_ASSIGN_OR_RETURN(auto plan, build_from_graph(g, c));
  return Runtime::deserialize_engine(plan);
}

// Runs `ctx` at `in` (names in graph order) and compares the output with the CPU reference.
void expect_matches_reference(const ir::Graph& g, ExecutionContext& ctx, const std::vector<Tensor>& in,
                              const std::string& label) {
  for (size_t i = 0; i < in.size(); ++i) ASSERT_TRUE(ctx.set_input(g.value(g.inputs[i]).name, in[i]).ok()) << label;
  Status run = ctx.execute();
  ASSERT_TRUE(run.ok()) << label << ": " << run.to_string();
  auto y = ctx.output("sum_out");
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  auto ref = interpret(g, in);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  ASSERT_EQ(y->shape(), (*ref)[0].shape()) << label;
  for (int64_t i = 0; i < y->numel(); ++i)
    EXPECT_NEAR(y->data<float>()[i], (*ref)[0].data<float>()[i], 1e-5) << label << " element " << i;
}

// Reshape's shape and ReduceSum's axes as inputs: each execute follows its own values (two sets,
// then the first again, a third, then new data at the second), equal to the CPU reference; on the square graph the output shape is the
// same at both axes but the sums are not (a model keyed only by shapes would reuse the first).
TEST(GpuShapeInputs, EngineFollowsEachCallsValues) {
  REQUIRE_GPU();
  const TinyGraph t = reshape_reduce_graph();
  auto e = cuda_engine(t.g);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  auto ctx = (*e)->create_execution_context();
  const Tensor x = random_tensor({2, 3, 4}, 5);
  expect_matches_reference(t.g, *ctx, {x, int64_tensor({6, 4}), int64_tensor({0})}, "s=[6,4] a=[0]");
  expect_matches_reference(t.g, *ctx, {x, int64_tensor({4, 6}), int64_tensor({1})}, "s=[4,6] a=[1]");
  expect_matches_reference(t.g, *ctx, {x, int64_tensor({6, 4}), int64_tensor({0})}, "s=[6,4] a=[0] again");
  expect_matches_reference(t.g, *ctx, {x, int64_tensor({2, 12}), int64_tensor({-1})}, "s=[2,12] a=[-1]");
  // Three sets of shape-input values, three models; new data at known shape-input values reuses
  // its model (the bound graph's shapes follow from them: only their bytes key the model).
  EXPECT_EQ((*e)->shape_setup_ms().size(), 3u);
  expect_matches_reference(t.g, *ctx, {random_tensor({2, 3, 4}, 9), int64_tensor({4, 6}), int64_tensor({1})}, "new x, s=[4,6] a=[1]");
  EXPECT_EQ((*e)->shape_setup_ms().size(), 3u);

  const TinyGraph sq = square_reduce_graph();
  auto es = cuda_engine(sq.g);
  ASSERT_TRUE(es.ok()) << es.status().to_string();
  auto cs = (*es)->create_execution_context();
  const Tensor xs = random_tensor({4, 4}, 6);
  expect_matches_reference(sq.g, *cs, {xs, int64_tensor({0})}, "square a=[0]");
  expect_matches_reference(sq.g, *cs, {xs, int64_tensor({1})}, "square a=[1]");
#ifdef KILN_HAVE_CUDA
  void* dx = nullptr;
  void* da = nullptr;
  void* dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, 16 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&da, sizeof(int64_t)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, 4 * sizeof(float)), cudaSuccess);
  ASSERT_TRUE(cs->set_tensor_address("x", dx).ok());
  ASSERT_TRUE(cs->set_tensor_address("a", da).ok());
  ASSERT_TRUE(cs->set_tensor_address("sum_out", dy).ok());
  Status enq = cs->enqueue(nullptr);
  EXPECT_EQ(enq.code(), StatusCode::kUnsupported) << enq.to_string();
  EXPECT_NE(enq.message().find("shape operand"), std::string::npos) << enq.message();
  cudaFree(dx);
  cudaFree(da);
  cudaFree(dy);
#endif
}

}  // namespace
}  // namespace kiln::testing
