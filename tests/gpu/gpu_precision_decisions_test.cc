// The CUDA lowering reads passes::assign_precisions' decisions (docs/decisions/0033): for FP32,
// FP16 and BF16 plans with and without per-layer constraints, deciding every layer's precision
// and laying out by the decisions lowers to the same layers, converts, reformats and arena as the
// previous flow (constraints only, the layout policy picked from the plan's flags). Runs without
// a GPU (the lowering is host code); skipped in builds without CUDA.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu/branch_graphs.h"
#include "kiln/precision.h"
#include "passes/passes.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

#ifdef KILN_HAVE_CUDA
struct Lowered {
  std::vector<std::string> layers;
  size_t arena = 0;
};

Lowered lower(const ir::Graph& g, bool fp16, bool bf16) {
  cuda::GpuBuildOptions o;
  o.precision.fp16 = fp16;
  o.precision.bf16 = bf16;
  o.max_aux_streams = 0;
  auto shapes = cuda::infer_value_shapes_by_reference(g, {{2, 16, 16, 16}});
  EXPECT_TRUE(shapes.ok()) << shapes.status().to_string();
  if (!shapes.ok()) return {};
  auto s = cuda::plan_gpu_streams(g, *shapes, o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  if (!s.ok()) return {};
  return {s->layers, s->arena_bytes};
}

// Before decision 0033: only the constrained layers carried "precision", and the builder chose
// the layout policy from the plan's flags.
Lowered previous_flow(const PrecisionConfig& c) {
  ir::Graph g = passes_output(resnet_block_graph(2, 16));
  EXPECT_TRUE(passes::apply_layer_precisions(g, c.layer_precisions).ok());
  const bool low = c.fp16 || c.bf16;
  EXPECT_TRUE(passes::assign_layouts(g, low ? passes::tensor_core_layout_preference
                                            : passes::row_major_layout_preference).ok());
  return lower(g, c.fp16, c.bf16);
}

Lowered decided_flow(const PrecisionConfig& c, ir::Graph* out = nullptr) {
  ir::Graph g = passes_output(resnet_block_graph(2, 16));
  EXPECT_TRUE(passes::assign_precisions(g, c, passes::float_storage_support).ok());
  EXPECT_TRUE(passes::assign_layouts(g, passes::tensor_core_layout_preference).ok());
  if (out) *out = g;
  return lower(g, c.fp16, c.bf16);
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "\n  " + x;
  return s;
}
#endif

TEST(GpuPrecisionDecisions, LoweringUnchangedForEveryExistingCombination) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  struct Case {
    bool fp16, bf16;
    std::vector<LayerPrecision> rules;
  };
  const std::vector<Case> cases = {
      {false, false, {}},
      {false, false, {{"conv2", DataType::kFloat32}}},
      {true, false, {}},
      {false, true, {}},
      {true, true, {}},
      {true, false, {{"conv2", DataType::kFloat32}}},
      {true, false, {{"*", DataType::kFloat32}}},
      {false, true, {{"*_relu", DataType::kFloat32}, {"head", DataType::kFloat16}}},
      {true, false, {{"stem", DataType::kBFloat16}, {"down", DataType::kFloat32}}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    PrecisionConfig c;
    c.fp16 = cases[i].fp16;
    c.bf16 = cases[i].bf16;
    c.layer_precisions = cases[i].rules;
    const Lowered before = previous_flow(c);
    const Lowered after = decided_flow(c);
    ASSERT_FALSE(before.layers.empty()) << "case " << i;
    EXPECT_EQ(after.layers, before.layers) << "case " << i << ":" << joined(after.layers) << "\nvs" << joined(before.layers);
    EXPECT_EQ(after.arena, before.arena) << "case " << i;
  }
#endif
}

// The one layout that changes: in an FP32 plan a conv constrained to fp16 is now laid out NHWC
// (its decided precision is 16-bit), as lowering the graph directly always did; it lowers with
// one convert in and one out.
TEST(GpuPrecisionDecisions, Fp16ConvInFp32PlanIsNhwc) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  PrecisionConfig c;
  c.layer_precisions = {{"conv1", DataType::kFloat16}};
  ir::Graph g;
  const Lowered l = decided_flow(c, &g);
  for (const ir::Node& n : g.nodes)
    if (n.name == "conv1") EXPECT_EQ(n.attr_string("layout", ""), "NHWC");
  int converts = 0;
  for (const auto& name : l.layers) converts += name.rfind("convert:", 0) == 0;
  EXPECT_EQ(converts, 2) << joined(l.layers);
#endif
}

}  // namespace
}  // namespace kiln::testing
