// Runtime, Engine and ExecutionContext: execution on the CPU engine, input checks with clear
// messages (dtype, rank, profile bounds), profiles, per-layer timing, shared engines.
#include <gtest/gtest.h>

#include <thread>

#include "builder/build_from_graph.h"
#include "kiln/runtime.h"
#include "plan/plan_test_util.h"

namespace kiln {
namespace {

std::shared_ptr<Engine> load_add_relu() {
  auto e = Runtime::deserialize_engine(testing::build_add_relu_plan());
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? *e : nullptr;
}

Tensor make_x(int64_t rows, float offset = 0) {
  Tensor x(DataType::kFloat32, {rows, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = offset + 0.37f * static_cast<float>(i) - 1.9f;
  return x;
}

// y = Relu(x + b), b = {0.5, -0.25, 1, -2}, computed independently.
void expect_add_relu(const Tensor& x, const Tensor& y) {
  const float b[4] = {0.5f, -0.25f, 1.0f, -2.0f};
  ASSERT_EQ(y.shape(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float s = x.data<float>()[i] + b[i % 4];
    EXPECT_EQ(y.data<float>()[i], s > 0 ? s : 0.0f) << i;
  }
}

TEST(Runtime, ExecutesThePlan) {
  auto engine = load_add_relu();
  ASSERT_TRUE(engine);
  auto ctx = engine->create_execution_context();
  const Tensor x = make_x(3);
  ASSERT_TRUE(ctx->set_input("x", x).ok());
  Status s = ctx->execute();
  ASSERT_TRUE(s.ok()) << s.to_string();
  auto y = ctx->output("y");
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_add_relu(x, *y);
}

TEST(Runtime, DescribesIoProfilesAndLayers) {
  auto engine = load_add_relu();
  ASSERT_TRUE(engine);
  ASSERT_EQ(engine->io_tensors().size(), 2u);
  EXPECT_TRUE(engine->io_tensors()[0].is_input);
  EXPECT_EQ(engine->io_tensors()[0].desc.shape_string(), "[batch,4]");
  EXPECT_FALSE(engine->io_tensors()[1].is_input);
  ASSERT_EQ(engine->profiles().size(), 1u);
  EXPECT_EQ(engine->profiles()[0].find("x")->max, (Shape{8, 4}));
  ASSERT_EQ(engine->layers().size(), 2u);
  EXPECT_EQ(engine->layers()[0].op, "Add");
  EXPECT_EQ(engine->layers()[0].tactic, "cpu.ref");
  EXPECT_EQ(engine->layers()[0].origin, (std::vector<std::string>{"add0"}));
  EXPECT_EQ(engine->layers()[0].inputs[1].name, "b");
  EXPECT_EQ(engine->weights_bytes(), 16u);
  EXPECT_TRUE(engine->tf32());
  EXPECT_FALSE(engine->fp16());
}

TEST(Runtime, RefusesWrongDtype) {
  auto engine = load_add_relu();
  ASSERT_TRUE(engine);
  auto ctx = engine->create_execution_context();
  Status s = ctx->set_input("x", Tensor(DataType::kInt64, {2, 4}));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("input 'x': dtype int64, the engine expects float32"), std::string::npos) << s.message();
}

TEST(Runtime, RefusesWrongRank) {
  auto engine = load_add_relu();
  ASSERT_TRUE(engine);
  auto ctx = engine->create_execution_context();
  Status s = ctx->set_input("x", Tensor(DataType::kFloat32, {2, 4, 1}));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("input 'x'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rank 3"), std::string::npos) << s.message();
}

TEST(Runtime, RefusesShapeOutsideProfile) {
  auto engine = load_add_relu();
  ASSERT_TRUE(engine);
  auto ctx = engine->create_execution_context();
  Status s = ctx->set_input_shape("x", {9, 4});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("input 'x': dim 0 is 9, outside the optimization profile's range 1..8"), std::string::npos)
      << s.message();
  s = ctx->set_input("x", Tensor(DataType::kFloat32, {2, 5}));
  EXPECT_NE(s.message().find("dim 1 is 5"), std::string::npos) << s.message();
  s = ctx->set_input("x", Tensor(DataType::kFloat32, {0, 4}));
  EXPECT_NE(s.message().find("dim 0 is 0"), std::string::npos) << s.message();
}

TEST(Runtime, InputMustMatchTheSetShape) {
  auto engine = load_add_relu();
  ASSERT_TRUE(engine);
  auto ctx = engine->create_execution_context();
  ASSERT_TRUE(ctx->set_input_shape("x", {4, 4}).ok());
  Status s = ctx->set_input("x", make_x(3));
  EXPECT_NE(s.message().find("differs from the shape set with set_input_shape [4,4]"), std::string::npos) << s.message();
}

TEST(Runtime, NamesUnknownAndMissingTensors) {
  auto engine = load_add_relu();
  ASSERT_TRUE(engine);
  auto ctx = engine->create_execution_context();
  Status s = ctx->set_input("nope", make_x(2));
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("(inputs: 'x')"), std::string::npos) << s.message();
  s = ctx->execute();
  EXPECT_NE(s.message().find("input 'x' is not set"), std::string::npos) << s.message();
  EXPECT_FALSE(ctx->output("y").ok());
  auto missing = ctx->output("zz");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(ctx->set_optimization_profile(1).ok());
}

TEST(Runtime, PerLayerTiming) {
  auto engine = load_add_relu();
  ASSERT_TRUE(engine);
  auto ctx = engine->create_execution_context();
  ctx->set_profiling(true);
  ASSERT_TRUE(ctx->set_input("x", make_x(2)).ok());
  ASSERT_TRUE(ctx->execute().ok());
  ASSERT_EQ(ctx->layer_timings().size(), engine->layers().size());
  EXPECT_EQ(ctx->layer_timings()[0].name, engine->layers()[0].name);
  for (const auto& t : ctx->layer_timings()) EXPECT_GE(t.ms, 0.0);
  EXPECT_EQ(ctx->layer_timings()[0].op, engine->layers()[0].op);
  EXPECT_EQ(ctx->layer_timings()[0].tactic, "cpu.ref");
}

// enqueue / set_tensor_address are for CUDA engines: a CPU engine says so, naming the way out.
TEST(Runtime, EnqueueNeedsCudaEngine) {
  auto engine = load_add_relu();
  ASSERT_TRUE(engine);
  auto ctx = engine->create_execution_context();
  float buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  Status s = ctx->set_tensor_address("x", buf);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("need a CUDA engine"), std::string::npos) << s.to_string();
  EXPECT_EQ(ctx->set_tensor_address("nope", buf).code(), StatusCode::kNotFound);
  s = ctx->enqueue(nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("use set_input/execute"), std::string::npos) << s.to_string();
  EXPECT_EQ(ctx->tensor_address("x"), nullptr);
  // Dynamic input: its shape must be set before tensor_shape answers.
  EXPECT_EQ(ctx->tensor_shape("x").status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(ctx->set_input_shape("x", {3, 4}).ok());
  auto shape = ctx->tensor_shape("x");
  ASSERT_TRUE(shape.ok()) << shape.status().to_string();
  EXPECT_EQ(*shape, (Shape{3, 4}));
}

TEST(Runtime, StaticModelNeedsNoProfile) {
  auto g = onnx_import::import_model_bytes(testing::static_model().bytes(), ".");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto plan = build_from_graph(*g, BuilderConfig{});
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto engine = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const ShapeRange* r = (*engine)->profiles()[0].find("x");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->min, (Shape{2, 3}));
  EXPECT_EQ(r->max, (Shape{2, 3}));
  auto ctx = (*engine)->create_execution_context();
  Tensor x(DataType::kFloat32, {2, 3});
  for (int i = 0; i < 6; ++i) x.data<float>()[i] = static_cast<float>(i) - 2.5f;
  ASSERT_TRUE(ctx->set_input("x", x).ok());
  ASSERT_TRUE(ctx->execute().ok());
  auto out = ctx->output("out:0");
  ASSERT_TRUE(out.ok());
  const float b[3] = {1.f, -1.f, 0.5f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out->data<float>()[i], 2.f * std::max(0.f, x.data<float>()[i] + b[i % 3]));
}

TEST(Runtime, SeveralProfiles) {
  auto g = onnx_import::import_model_bytes(testing::add_relu_model().bytes(), ".");
  ASSERT_TRUE(g.ok());
  BuilderConfig c;
  OptimizationProfile small, large;
  ASSERT_TRUE(small.set_dimensions("x", {1, 4}, {1, 4}, {2, 4}).ok());
  ASSERT_TRUE(large.set_dimensions("x", {16, 4}, {32, 4}, {64, 4}).ok());
  c.profiles = {small, large};
  auto plan = build_from_graph(*g, c);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto engine = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(engine.ok());
  auto ctx = (*engine)->create_execution_context();
  EXPECT_FALSE(ctx->set_input("x", make_x(20)).ok());
  ASSERT_TRUE(ctx->set_optimization_profile(1).ok());
  const Tensor x = make_x(20);
  ASSERT_TRUE(ctx->set_input("x", x).ok());
  ASSERT_TRUE(ctx->execute().ok());
  expect_add_relu(x, *ctx->output("y"));
}

// One engine, several contexts on several threads: same answers as one context alone.
TEST(Runtime, EngineIsSharedAcrossThreads) {
  auto engine = load_add_relu();
  ASSERT_TRUE(engine);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto ctx = engine->create_execution_context();
      for (int it = 0; it < 20; ++it) {
        const Tensor x = make_x(1 + (t + it) % 8, static_cast<float>(t));
        Status s = ctx->set_input("x", x);
        if (s.ok()) s = ctx->execute();
        if (!s.ok()) {
          ADD_FAILURE() << s.to_string();
          return;
        }
        auto y = ctx->output("y");
        const float b[4] = {0.5f, -0.25f, 1.0f, -2.0f};
        for (int64_t i = 0; i < x.numel(); ++i)
          if (y->data<float>()[i] != std::max(0.f, x.data<float>()[i] + b[i % 4])) return;
      }
      ok[t] = 1;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, std::vector<int>(4, 1));
}

TEST(Runtime, LoadEngineMissingFile) {
  auto e = Runtime::load_engine("/nonexistent/model.plan");
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
  EXPECT_NE(e.status().message().find("/nonexistent/model.plan"), std::string::npos);
}

}  // namespace
}  // namespace kiln
