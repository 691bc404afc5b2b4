// Builder errors a user can cause, each with a message that names what is wrong: dynamic
// inputs without a profile, bad profiles, unknown ops, truncated or missing ONNX files,
// layers without a kernel. Builds are deterministic.
#include <gtest/gtest.h>

#include <filesystem>

#include "backends/cpu/cpu_kernel.h"
#include "builder/build_from_graph.h"
#include "kiln/runtime.h"
#include "plan/plan_test_util.h"

namespace kiln {
namespace {

ir::Graph import(const testing::OnnxModel& m) {
  auto g = onnx_import::import_model_bytes(m.bytes(), ".");
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? std::move(g).value() : ir::Graph{};
}

void expect_message(const Status& s, StatusCode code, const std::string& part) {
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(part), std::string::npos) << "message: " << s.message() << "\nmissing: " << part;
}

TEST(Builder, DynamicInputNeedsAProfile) {
  auto plan = build_from_graph(import(testing::add_relu_model()), BuilderConfig{});
  ASSERT_FALSE(plan.ok());
  expect_message(plan.status(), StatusCode::kInvalidArgument, "input 'x' has the dynamic shape [batch,4]");
}

TEST(Builder, ProfileMustNameModelInputs) {
  BuilderConfig c;
  OptimizationProfile p;
  ASSERT_TRUE(p.set_dimensions("x", {1, 4}, {1, 4}, {1, 4}).ok());
  ASSERT_TRUE(p.set_dimensions("nope", {1}, {1}, {1}).ok());
  c.profiles.push_back(p);
  auto plan = build_from_graph(import(testing::add_relu_model()), c);
  ASSERT_FALSE(plan.ok());
  expect_message(plan.status(), StatusCode::kInvalidArgument, "'nope' is not an input of the model (inputs: 'x')");
}

TEST(Builder, ProfileMustKeepFixedDims) {
  BuilderConfig c;
  OptimizationProfile p;
  ASSERT_TRUE(p.set_dimensions("x", {1, 5}, {1, 5}, {1, 5}).ok());
  c.profiles.push_back(p);
  auto plan = build_from_graph(import(testing::add_relu_model()), c);
  expect_message(plan.status(), StatusCode::kInvalidArgument, "input 'x' dim 1 is fixed at 4 in the model");
  OptimizationProfile q;
  ASSERT_TRUE(q.set_dimensions("x", {1}, {1}, {1}).ok());
  c.profiles = {q};
  plan = build_from_graph(import(testing::add_relu_model()), c);
  expect_message(plan.status(), StatusCode::kInvalidArgument, "its range has rank 1");
}

TEST(Builder, ProfileRangesAreChecked) {
  OptimizationProfile p;
  expect_message(p.set_dimensions("x", {4, 4}, {2, 4}, {8, 4}), StatusCode::kInvalidArgument,
                 "input 'x' dim 0: min 4 > opt 2");
  expect_message(p.set_dimensions("x", {1, 4}, {2, 4}, {1, 4}), StatusCode::kInvalidArgument,
                 "input 'x' dim 0: opt 2 > max 1");
  expect_message(p.set_dimensions("x", {1}, {2, 4}, {1, 4}), StatusCode::kInvalidArgument, "different ranks");
  expect_message(p.set_dimensions("x", {-1, 4}, {2, 4}, {3, 4}), StatusCode::kInvalidArgument, "negative");
  EXPECT_TRUE(p.empty());
}

TEST(Builder, UnknownOpsAreListedAtOnce) {
  testing::OnnxModel m;
  m.add_opset("com.example", 3);
  m.input("x", testing::kF32, {int64_t{2}});
  m.node("FancyOp", {"x"}, {"a"}, "fancy1", "com.example");
  m.node("NotAnOnnxOp", {"a"}, {"y"}, "weird2");
  m.output("y", testing::kF32, {int64_t{2}});
  const std::string dir = testing::make_temp_dir("builder");
  const std::string path = m.save(dir + "/unknown.onnx");
  auto plan = Builder::build(path, BuilderConfig{});
  ASSERT_FALSE(plan.ok());
  expect_message(plan.status(), StatusCode::kUnsupported, "2 unsupported ops");
  expect_message(plan.status(), StatusCode::kUnsupported, "node 'fancy1' (FancyOp, domain 'com.example', opset 3)");
  expect_message(plan.status(), StatusCode::kUnsupported, "node 'weird2' (NotAnOnnxOp, domain 'ai.onnx', opset 17)");
  std::filesystem::remove_all(dir);
}

TEST(Builder, TruncatedOnnx) {
  const std::string bytes = testing::add_relu_model().bytes();
  const std::string dir = testing::make_temp_dir("builder");
  const std::string path = dir + "/truncated.onnx";
  {
    std::ofstream f(path, std::ios::binary);
    f << bytes.substr(0, bytes.size() / 2);
  }
  auto plan = Builder::build(path, BuilderConfig{});
  ASSERT_FALSE(plan.ok());
  expect_message(plan.status(), StatusCode::kInvalidModel, "truncated");
  std::filesystem::remove_all(dir);
}

TEST(Builder, MissingFile) {
  auto plan = Builder::build("/nonexistent/dir/model.onnx", BuilderConfig{});
  expect_message(plan.status(), StatusCode::kNotFound, "'/nonexistent/dir/model.onnx' not found");
}

TEST(Builder, RejectsBadConfig) {
  BuilderConfig c;
  c.opt_level = 4;
  auto plan = build_from_graph(import(testing::static_model()), c);
  expect_message(plan.status(), StatusCode::kInvalidArgument, "opt_level 4");
  BuilderConfig a;
  a.max_aux_streams = 17;
  plan = build_from_graph(import(testing::static_model()), a);
  expect_message(plan.status(), StatusCode::kInvalidArgument, "max_aux_streams 17");
#ifndef KILN_HAVE_CUDA
  BuilderConfig g;
  g.target = TargetDevice::kCuda;
  plan = build_from_graph(import(testing::static_model()), g);
  expect_message(plan.status(), StatusCode::kUnsupported, "target cuda");
#endif
}

TEST(Builder, IsDeterministicAndReportsProgress) {
  BuilderConfig c;
  std::vector<std::string> steps;
  c.progress = [&](const BuildProgress& p) {
    if (steps.empty() || steps.back() != p.step) steps.push_back(p.step);
  };
  auto a = build_from_graph(import(testing::static_model()), c);
  auto b = build_from_graph(import(testing::static_model()), c);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string();
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(steps.front(), "profiles");
  EXPECT_EQ(steps.back(), "serialize");
}

// Every layer without a kernel on the target is listed (node, op, opset), not just the first.
TEST(Builder, ListsEveryLayerWithoutAKernel) {
  const auto& reg = cpu::KernelRegistry::get();
  std::vector<std::string> missing;
  for (int i = 0; i < ir::kNumOps && missing.size() < 2; ++i) {
    const auto op = static_cast<ir::OpKind>(i);
    if (!ir::op_is_internal(op) && !reg.find(op)) missing.push_back(ir::op_name(op));
  }
  if (missing.size() < 2) GTEST_SKIP() << "every ONNX op has a CPU kernel in this build";
  testing::OnnxModel m;
  m.input("x", testing::kF32, {int64_t{2}});
  m.node(missing[0], {"x"}, {"a"}, "first_missing");
  m.node(missing[1], {"a"}, {"y"}, "second_missing");
  m.output("y", testing::kF32, {int64_t{2}});
  auto plan = build_from_graph(import(m), BuilderConfig{});
  ASSERT_FALSE(plan.ok());
  expect_message(plan.status(), StatusCode::kUnsupported, "2 layers have no cpu kernel");
  expect_message(plan.status(), StatusCode::kUnsupported, "node 'first_missing' (" + missing[0] + "), opset 17");
  expect_message(plan.status(), StatusCode::kUnsupported, "node 'second_missing' (" + missing[1] + "), opset 17");
}

}  // namespace
}  // namespace kiln
