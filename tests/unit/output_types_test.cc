// BuilderConfig::output_types (trtexec --outputIOFormats, docs/decisions/0083) on the CPU target: a
// float output given another dtype ends in a Cast, so the engine's binding, the output tensor and
// its values (the float32 result rounded once to nearest even) follow; other outputs keep theirs;
// specs that do not fit the graph are refused naming the entry or the output.
#include <gtest/gtest.h>

#include "builder/build_from_graph.h"
#include "core/numerics.h"
#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "passes/pass_test_util.h"

namespace kiln::testing {
namespace {

// y = x · W ([3, 16] x [16, 7]), z = Relu(x): two float32 outputs.
TinyGraph two_output_graph() {
  TinyGraph t;
  auto x = t.input("x", {3, 16});
  auto y = t.node(ir::OpKind::kMatMul, "y", {x, t.constant("w", random_tensor({16, 7}, 61, -0.4f, 0.4f))}, {3, 7});
  auto z = t.node(ir::OpKind::kRelu, "z", {x}, {3, 16});
  t.g.outputs = {y, z};
  return t;
}

StatusOr<std::shared_ptr<Engine>> cpu_engine(const ir::Graph& g, const std::string& output_types) {
  BuilderConfig c;
  c.target = TargetDevice::kCpu;
  c.output_types = output_types;
  KILN_ASSIGN_OR_RETURN(auto plan, build_from_graph(g, c));
  return Runtime::deserialize_engine(plan);
}

DataType output_dtype(const Engine& e, const std::string& name) {
  const IOTensor* io = e.find_io(name);
  return io ? io->desc.dtype : DataType::kUndefined;
}

// `got` (float16) is `want` (float32) rounded to float16, element by element.
void expect_rounded(const Tensor& want, const Tensor& got, const std::string& what) {
  ASSERT_EQ(got.dtype(), DataType::kFloat16) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  Tensor r(DataType::kFloat16, want.shape());
  for (int64_t i = 0; i < want.numel(); ++i) store_from_double(DataType::kFloat16, r.raw(), i, want.data<float>()[i]);
  EXPECT_TRUE(r.bit_equal(got)) << what;
}

TEST(OutputTypes, OneTypeForEveryFloatOutput) {
  const TinyGraph t = two_output_graph();
  const std::vector<Tensor> in = {random_tensor({3, 16}, 62)};
  auto ref = interpret(t.g, in);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  auto e = cpu_engine(t.g, "fp16");
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(output_dtype(**e, "y_out"), DataType::kFloat16);
  EXPECT_EQ(output_dtype(**e, "z_out"), DataType::kFloat16);
  auto ctx = (*e)->create_execution_context();
  ASSERT_TRUE(ctx->set_input("x", in[0]).ok());
  ASSERT_TRUE(ctx->execute().ok());
  auto y = ctx->output("y_out");
  auto z = ctx->output("z_out");
  ASSERT_TRUE(y.ok() && z.ok());
  expect_rounded((*ref)[0], *y, "y");
  expect_rounded((*ref)[1], *z, "z");
}

TEST(OutputTypes, OnePerOutputEmptyKeepsTheDeclaredType) {
  const TinyGraph t = two_output_graph();
  const std::vector<Tensor> in = {random_tensor({3, 16}, 63)};
  auto ref = interpret(t.g, in);
  ASSERT_TRUE(ref.ok());
  for (const std::string spec : {"fp16,", "fp16,fp32"}) {
    auto e = cpu_engine(t.g, spec);
    ASSERT_TRUE(e.ok()) << spec << ": " << e.status().to_string();
    EXPECT_EQ(output_dtype(**e, "y_out"), DataType::kFloat16) << spec;
    EXPECT_EQ(output_dtype(**e, "z_out"), DataType::kFloat32) << spec;
    auto ctx = (*e)->create_execution_context();
    ASSERT_TRUE(ctx->set_input("x", in[0]).ok());
    ASSERT_TRUE(ctx->execute().ok());
    auto y = ctx->output("y_out");
    auto z = ctx->output("z_out");
    ASSERT_TRUE(y.ok() && z.ok());
    expect_rounded((*ref)[0], *y, spec + " y");
    EXPECT_TRUE(z->bit_equal((*ref)[1])) << spec;
  }
  // bfloat16 too, and float32 for an output declared float16 would widen it (not tested: the
  // graph here declares float32).
  auto e = cpu_engine(t.g, "bf16");
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(output_dtype(**e, "y_out"), DataType::kBFloat16);
}

TEST(OutputTypes, SpecsThatDoNotFitAreRefused) {
  const TinyGraph t = two_output_graph();
  auto bad_type = cpu_engine(t.g, "fp8");
  ASSERT_FALSE(bad_type.ok());
  EXPECT_EQ(bad_type.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_type.status().message().find("entry 'fp8' for output 'y_out'"), std::string::npos)
      << bad_type.status().message();
  auto count = cpu_engine(t.g, "fp16,fp16,fp16");
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.status().message().find("3 entries for 2 graph outputs"), std::string::npos)
      << count.status().message();
  // An output that is the graph input itself cannot be renamed behind a Cast.
  TinyGraph pass;
  auto x = pass.input("x", {4});
  pass.g.outputs = {pass.node(ir::OpKind::kRelu, "r", {x}, {4}), x};
  auto same = cpu_engine(pass.g, "fp16");
  ASSERT_FALSE(same.ok());
  EXPECT_NE(same.status().message().find("output 'x' is also a graph input"), std::string::npos)
      << same.status().message();
}

TEST(OutputTypes, IntegerOutputs) {
  // y = ArgMax(x) (int64) beside z = Relu(x): one type for all leaves the int64 output alone; a
  // per-output list that gives it a float type is refused, naming it.
  TinyGraph t;
  auto x = t.input("x", {3, 5});
  auto y = t.node(ir::OpKind::kArgMax, "y", {x}, {3, 1});
  t.g.value(y).dtype = DataType::kInt64;
  auto z = t.node(ir::OpKind::kRelu, "z", {x}, {3, 5});
  t.g.outputs = {y, z};
  auto all = cpu_engine(t.g, "fp16");
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  EXPECT_EQ(output_dtype(**all, "y_out"), DataType::kInt64);
  EXPECT_EQ(output_dtype(**all, "z_out"), DataType::kFloat16);
  auto listed = cpu_engine(t.g, "fp16,fp16");
  ASSERT_FALSE(listed.ok());
  EXPECT_NE(listed.status().message().find("output 'y_out' (int64)"), std::string::npos) << listed.status().message();
}

}  // namespace
}  // namespace kiln::testing
