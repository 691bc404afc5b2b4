// Loading a CUDA plan: the cuDNN graph-API convolutions restore their execution plans from the
// plan's tactic data (no runtime-fusion recompile) and compute exactly what plans rebuilt from
// their heuristic rank compute; the load reports its phases. Skips without a GPU.
#include <gtest/gtest.h>

#include "builder/build_from_graph.h"
#include "gpu/gpu_test_util.h"

#include <cstring>

#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "passes/pass_test_util.h"
#include "plan/plan_format.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_layers.h"
#endif

namespace kiln::testing {
namespace {

using ir::OpKind;

// Two residual blocks of 3x3 convs on 64 channels (conv + bias + residual + ReLU: the pattern
// the graph-API tactic fuses), NCHW [4, 64, 28, 28].
[[maybe_unused]] ir::Graph residual_net() {
  TinyGraph t;
  const Shape s = {4, 64, 28, 28};
  auto x = t.input("x", s);
  ir::ValueId cur = x;
  for (int blk = 0; blk < 2; ++blk) {
    const std::string p = "b" + std::to_string(blk);
    auto w1 = t.constant(p + "w1", random_tensor({64, 64, 3, 3}, 70 + blk, -0.05f, 0.05f));
    auto b1 = t.constant(p + "b1", random_tensor({64}, 80 + blk));
    auto c1 = t.node(OpKind::kConv, p + "conv1", {cur, w1, b1}, s, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
    auto r1 = t.node(OpKind::kRelu, p + "relu1", {c1}, s);
    auto w2 = t.constant(p + "w2", random_tensor({64, 64, 3, 3}, 90 + blk, -0.05f, 0.05f));
    auto b2 = t.constant(p + "b2", random_tensor({64}, 100 + blk));
    auto c2 = t.node(OpKind::kConv, p + "conv2", {r1, w2, b2}, s, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
    auto a = t.node(OpKind::kAdd, p + "add", {c2, cur}, s);
    cur = t.node(OpKind::kRelu, p + "relu2", {a}, s);
  }
  t.g.outputs = {cur};
  return t.g;
}

[[maybe_unused]] Tensor run_engine(const std::vector<uint8_t>& plan, const Tensor& x, int* restored, int* rebuilt,
                                   std::vector<std::string>* phases) {
  auto engine = Runtime::deserialize_engine(plan);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return {};
  *restored = (*engine)->tactics_restored();
  *rebuilt = (*engine)->tactics_rebuilt();
  for (const auto& ph : (*engine)->load_phases()) {
    EXPECT_GE(ph.ms, 0.0) << ph.name;
    phases->push_back(ph.name);
  }
  auto ctx = (*engine)->create_execution_context();
  EXPECT_TRUE(ctx->set_input("x", x).ok());
  Status s = ctx->execute();
  EXPECT_TRUE(s.ok()) << s.to_string();
  const std::string out = (*engine)->io_tensors().back().desc.name;
  auto y = ctx->output(out);
  EXPECT_TRUE(y.ok()) << y.status().to_string();
  return y.ok() ? *y : Tensor{};
}

TEST(GpuPlanLoad, GraphConvPlansRestoreFromTacticDataBitExactly) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  ir::Graph g = residual_net();
  BuilderConfig c;
  c.target = TargetDevice::kCuda;
  c.fp16 = true;
  auto plan = build_from_graph(g, c);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto parsed = plan::read_plan(plan->data(), plan->size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  int graph_layers = 0;
  for (const auto& t : parsed->tactics) graph_layers += t.name.rfind("cudnn.graph", 0) == 0 ? 1 : 0;
  std::printf("graph-API conv layers: %d, tactic data entries: %zu\n", graph_layers, parsed->tactic_data.size());
  for (const auto& [key, bytes] : parsed->tactic_data) {
    EXPECT_TRUE(key.rfind("cudnn.graph ", 0) == 0 || key.rfind("cublaslt.matmul ", 0) == 0) << key;
    EXPECT_FALSE(bytes.empty()) << key;
  }

  // The same plan without its tactic data: every graph-API conv rebuilds from its rank.
  plan::Plan stripped = *parsed;
  stripped.tactic_data.clear();
  const std::vector<uint8_t> stripped_bytes = plan::write_plan(stripped);

  Tensor x = random_tensor({4, 64, 28, 28}, 7);
  cuda::reset_conv_graph_decisions();  // this process's shared decisions would hide the load path
  int restored = 0, rebuilt = 0;
  std::vector<std::string> phases;
  Tensor with_data = run_engine(*plan, x, &restored, &rebuilt, &phases);
  EXPECT_EQ(phases, (std::vector<std::string>{"parse", "device", "shapes", "lower", "weights", "tactics"}));
  EXPECT_EQ(restored + rebuilt, graph_layers);
  if (!parsed->tactic_data.empty()) EXPECT_GT(restored, 0);
  cuda::reset_conv_graph_decisions();
  int restored2 = 0, rebuilt2 = 0;
  phases.clear();
  Tensor without = run_engine(stripped_bytes, x, &restored2, &rebuilt2, &phases);
  EXPECT_EQ(restored2, 0);
  EXPECT_EQ(rebuilt2, graph_layers);
  ASSERT_EQ(with_data.numel(), without.numel());
  ASSERT_GT(with_data.numel(), 0);
  EXPECT_EQ(std::memcmp(with_data.data<float>(), without.data<float>(), sizeof(float) * with_data.numel()), 0)
      << "a restored cuDNN plan must run the same engine configuration as the rebuilt one";
  std::printf("restored %d, rebuilt %d (with tactic data); rebuilt %d (without)\n", restored, rebuilt, rebuilt2);
#endif
}

// cuBLASLt GEMMs keep the algorithm the build chose in the plan's tactic data (decision 0079):
// a load restores it without asking cuBLASLt's heuristic, and computes exactly what the same
// plan without tactic data computes (each algorithm rebuilt from its heuristic rank).
TEST(GpuPlanLoad, CublasLtAlgorithmsRestoreFromTacticDataBitExactly) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  TinyGraph t;
  auto x = t.input("x", {64, 256});
  auto w1 = t.constant("w1", random_tensor({256, 512}, 41, -0.1f, 0.1f));
  auto b1 = t.constant("b1", random_tensor({512}, 42));
  auto h = t.node(OpKind::kMatMul, "mm1", {x, w1}, {64, 512});
  auto hb = t.node(OpKind::kAdd, "bias1", {h, b1}, {64, 512});
  auto r = t.node(OpKind::kRelu, "relu1", {hb}, {64, 512});
  auto w2 = t.constant("w2", random_tensor({512, 256}, 43, -0.1f, 0.1f));
  auto y = t.node(OpKind::kMatMul, "mm2", {r, w2}, {64, 256});
  t.g.outputs = {y};
  BuilderConfig c;
  c.target = TargetDevice::kCuda;
  c.fp16 = true;
  auto plan = build_from_graph(t.g, c);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto parsed = plan::read_plan(plan->data(), plan->size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  int gemm_layers = 0;
  for (const auto& tc : parsed->tactics) gemm_layers += tc.name.rfind("cublaslt.matmul", 0) == 0 ? 1 : 0;
  ASSERT_GT(gemm_layers, 0) << "no cuBLASLt layer in the plan";
  int entries = 0;
  for (const auto& [key, bytes] : parsed->tactic_data)
    if (key.rfind("cublaslt.matmul ", 0) == 0) {
      ++entries;
      EXPECT_EQ(bytes.size(), sizeof(cublasLtMatmulAlgo_t)) << key;
    }
  EXPECT_EQ(entries, gemm_layers);
  plan::Plan stripped = *parsed;
  stripped.tactic_data.clear();
  const Tensor in = random_tensor({64, 256}, 44);
  int restored = 0, rebuilt = 0, restored2 = 0, rebuilt2 = 0;
  std::vector<std::string> phases;
  Tensor with_data = run_engine(*plan, in, &restored, &rebuilt, &phases);
  EXPECT_EQ(restored, gemm_layers);
  EXPECT_EQ(rebuilt, 0);
  Tensor without = run_engine(plan::write_plan(stripped), in, &restored2, &rebuilt2, &phases);
  EXPECT_EQ(restored2, 0);
  EXPECT_EQ(rebuilt2, gemm_layers);
  ASSERT_EQ(with_data.numel(), without.numel());
  ASSERT_GT(with_data.numel(), 0);
  EXPECT_EQ(std::memcmp(with_data.data<float>(), without.data<float>(), sizeof(float) * with_data.numel()), 0)
      << "a restored cuBLASLt algorithm must compute what the heuristic's entry computes";
#endif
}

}  // namespace
}  // namespace kiln::testing
