// Plans hold what runs (issue 10 items 3 and 4): a CUDA plan stores each weight packed as its
// tactic reads it (fp16, KRSC for NHWC convs) and drops the fp32 originals those layers alone
// read; a load uploads the packed bytes without converting and computes exactly what a plan
// with the originals computes. A dynamic-batch plan carries tactics tuned at several batch sizes
// and runs every batch of its profile from one engine. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>

#include <cstring>
#include <random>

#include "builder/build_from_graph.h"
#include "gpu/gpu_test_util.h"
#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "onnx/importer.h"
#include "passes/pass_test_util.h"
#include "plan/onnx_test_models.h"
#include "plan/plan_format.h"

namespace kiln::testing {
namespace {

// x [batch, 8, 16, 16] -> Conv 3x3 (16 filters, 1152 weights) -> Relu -> Conv 1x1 (32 filters,
// 512 weights: too small to drop) -> y [batch, 32, 14, 14].
[[maybe_unused]] OnnxModel conv_model() {
  OnnxModel m;
  m.input("x", kF32, {std::string("batch"), int64_t{8}, int64_t{16}, int64_t{16}});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-0.2f, 0.2f);
  auto values = [&](size_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = u(rng);
    return v;
  };
  m.initializer("w1", {16, 8, 3, 3}, values(16 * 8 * 9));
  m.initializer("b1", {16}, values(16));
  m.initializer("w2", {32, 16, 1, 1}, values(32 * 16));
  m.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  m.node("Conv", {"r1", "w2"}, {"y"}, "conv2");
  m.output("y", kF32, {std::string("batch"), int64_t{32}, int64_t{14}, int64_t{14}});
  return m;
}

[[maybe_unused]] StatusOr<std::vector<uint8_t>> build(bool gpu, int64_t min_b, int64_t opt_b, int64_t max_b, bool fp16) {
  auto g = onnx_import::import_model_bytes(conv_model().bytes(), ".");
  if (!g.ok()) return g.status();
  BuilderConfig c;
  c.target = gpu ? TargetDevice::kCuda : TargetDevice::kCpu;
  c.fp16 = fp16;
  OptimizationProfile p;
  KILN_RETURN_IF_ERROR(p.set_dimensions("x", {min_b, 8, 16, 16}, {opt_b, 8, 16, 16}, {max_b, 8, 16, 16}));
  c.profiles.push_back(p);
  return build_from_graph(*g, c);
}

[[maybe_unused]] Tensor run(const std::vector<uint8_t>& plan, const Tensor& x, std::vector<std::string>* log = nullptr) {
  Logger logger;
  if (log) logger = [log](LogSeverity, const std::string& m) { log->push_back(m); };
  auto engine = Runtime::deserialize_engine(plan, logger);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return {};
  auto ctx = (*engine)->create_execution_context();
  EXPECT_TRUE(ctx->set_input("x", x).ok());
  Status s = ctx->execute();
  EXPECT_TRUE(s.ok()) << s.to_string();
  auto y = ctx->output("y");
  EXPECT_TRUE(y.ok()) << y.status().to_string();
  return y.ok() ? *y : Tensor{};
}

[[maybe_unused]] double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape()) return 1e30;
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.data<float>()[i], y = b.data<float>()[i];
    m = std::max(m, std::isnan(x) || std::isnan(y) ? (std::isnan(x) && std::isnan(y) ? 0.0 : INFINITY) : std::fabs(x - y));
  }
  return m;
}

TEST(GpuPackedWeights, PlanStoresPackedWeightsAndLoadsThemBitExactly) {
  REQUIRE_GPU();
  auto plan = build(true, 2, 2, 2, true);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto parsed = plan::read_plan(plan->data(), plan->size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  // conv1's filter (1152 >= 1024 elements) is stored only packed; conv2's (512) and the bias stay.
  std::vector<std::string> elided;
  for (ir::ValueId v : parsed->elided_constants) elided.push_back(parsed->graph.value(v).name);
  EXPECT_EQ(elided, std::vector<std::string>{"w1"});
  size_t packed_bytes = 0;
  for (const auto& [key, b] : parsed->packed_weights) packed_bytes += b.bytes;
  ASSERT_GE(parsed->packed_weights.size(), 3u);  // w1, b1, w2 (+ conv2's zero bias)
  EXPECT_LT(packed_bytes, (1152 + 16 + 512 + 32) * 4u) << "fp16 packed weights are half the fp32 ones";
  bool krsc = false;
  for (const auto& [key, b] : parsed->packed_weights) krsc |= key.rfind("conv1|w1|fp16|nhwc|", 0) == 0 && b.bytes == 1152 * 2;
  EXPECT_TRUE(krsc) << "conv1's filter packed as fp16 NHWC (KRSC)";

  // The same plan with the fp32 originals and no packed weights: the load converts them.
  plan::Plan full = *parsed;
  auto g = onnx_import::import_model_bytes(conv_model().bytes(), ".");
  ASSERT_TRUE(g.ok());
  for (ir::ValueId v : full.elided_constants) {
    const std::string& name = full.graph.value(v).name;
    for (const ir::Value& o : g->values)
      if (o.name == name && o.constant) full.graph.value(v).constant = o.constant;
  }
  full.elided_constants.clear();
  full.packed_weights.clear();
  const auto full_bytes = plan::write_plan(full);
  EXPECT_LT(plan->size(), full_bytes.size());
  std::printf("plan %zu bytes with packed weights, %zu with fp32 originals\n", plan->size(), full_bytes.size());

  Tensor x = random_tensor({2, 8, 16, 16}, 9);
  std::vector<std::string> log;
  Tensor packed = run(*plan, x, &log);
  Tensor converted = run(full_bytes, x);
  ASSERT_GT(packed.numel(), 0);
  ASSERT_EQ(packed.numel(), converted.numel());
  EXPECT_EQ(std::memcmp(packed.data<float>(), converted.data<float>(), sizeof(float) * packed.numel()), 0);
  bool said = false;
  for (const auto& m : log) said |= m.find("uploaded as the plan stores them") != std::string::npos &&
                                   m.find("1 constants stored only packed") != std::string::npos;
  EXPECT_TRUE(said) << "the verbose load log counts the packed uploads";

  // A plan whose packed table lost conv1's filter cannot silently run zeros.
  plan::Plan broken = *parsed;
  for (auto it = broken.packed_weights.begin(); it != broken.packed_weights.end();)
    it = it->first.rfind("conv1|w1|", 0) == 0 ? broken.packed_weights.erase(it) : std::next(it);
  const auto broken_bytes = plan::write_plan(broken);
  auto e = Runtime::deserialize_engine(broken_bytes);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("only packed"), std::string::npos) << e.status().message();
}

TEST(GpuPackedWeights, DynamicBatchPlanTunesSeveralShapesAndRunsEveryBatch) {
  REQUIRE_GPU();
  auto plan = build(true, 1, 2, 8, true);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto parsed = plan::read_plan(plan->data(), plan->size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  // opt (2), then min 1, 4 and max 8.
  std::vector<int64_t> batches;
  for (const auto& set : parsed->shape_tactics) batches.push_back(set.shapes[0][0]);
  EXPECT_EQ(batches, (std::vector<int64_t>{2, 1, 4, 8}));
  for (const auto& set : parsed->shape_tactics) EXPECT_FALSE(set.layers.empty());
  auto cpu = build(false, 1, 2, 8, false);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto engine = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto ctx = (*engine)->create_execution_context();
  for (int64_t b : {1, 3, 8, 2, 1}) {  // 3 is between tuned sets; 2 and 1 come back to known shapes
    Tensor x = random_tensor({b, 8, 16, 16}, 20 + static_cast<uint32_t>(b));
    ASSERT_TRUE(ctx->set_input("x", x).ok());
    Status s = ctx->execute();
    ASSERT_TRUE(s.ok()) << "batch " << b << ": " << s.to_string();
    auto y = ctx->output("y");
    ASSERT_TRUE(y.ok());
    Tensor ref = run(*cpu, x);
    EXPECT_LT(max_abs_diff(*y, ref), 2e-2) << "batch " << b;
  }
}

}  // namespace
}  // namespace kiln::testing
