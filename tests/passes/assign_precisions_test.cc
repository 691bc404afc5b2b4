// Precision assignment (src/passes/assign_precisions.cc): every layer's decided precision for
// fp32 / fp16 / bf16 configs with per-layer overrides, the fallback when a target does not
// support the plan's precision for a layer, int8/fp8 refused, and assign_layouts reading the
// decisions (an FP32 plan gets no NHWC layer and no Reformat).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "gpu/branch_graphs.h"
#include "kiln/precision.h"
#include "passes/passes.h"

namespace kiln::passes {
namespace {

// name -> decided precision ("(none)" without one), with a '*' suffix for constrained layers.
std::map<std::string, std::string> decisions(const ir::Graph& g) {
  std::map<std::string, std::string> m;
  for (const ir::Node& n : g.nodes)
    if (!n.removed)
      m[n.name] = n.attr_string("precision", "(none)") + (n.attr_int("precision_constrained", 0) ? "*" : "");
  return m;
}

TEST(AssignPrecisions, Fp32PlanDecidesFp32Everywhere) {
  ir::Graph g = testing::passes_output(testing::resnet_block_graph(1, 8));
  PrecisionConfig c;
  ASSERT_TRUE(assign_precisions(g, c, float_storage_support).ok());
  const auto d = decisions(g);
  ASSERT_FALSE(d.empty());
  for (const auto& [name, p] : d) EXPECT_EQ(p, "fp32") << name;
}

TEST(AssignPrecisions, Fp16PlanWithOverrides) {
  ir::Graph g = testing::passes_output(testing::resnet_block_graph(1, 8));
  PrecisionConfig c;
  c.fp16 = true;
  c.layer_precisions = {{"conv2", DataType::kFloat32}, {"head", DataType::kBFloat16}};
  ASSERT_TRUE(assign_precisions(g, c, float_storage_support).ok());
  const auto d = decisions(g);
  EXPECT_EQ(d.at("conv2"), "fp32*");
  EXPECT_EQ(d.at("head"), "bf16*");
  EXPECT_EQ(d.at("stem"), "fp16");
  EXPECT_EQ(d.at("conv1"), "fp16");
  EXPECT_EQ(d.at("down"), "fp16");
  int unconstrained = 0;
  for (const auto& [name, p] : d) {
    if (name == "conv2" || name == "head") continue;
    EXPECT_EQ(p, "fp16") << name;
    ++unconstrained;
  }
  EXPECT_GT(unconstrained, 2);
}

// bf16 plan; a later rule overrides an earlier one, fused layers match by origin ("*_relu" names
// ONNX ReLU nodes that live on inside the fused convs), fp16 wins when both flags are set.
TEST(AssignPrecisions, Bf16PlanLaterRulesWinAndFp16BeatsBf16) {
  ir::Graph g = testing::passes_output(testing::resnet_block_graph(1, 8));
  PrecisionConfig c;
  c.bf16 = true;
  c.layer_precisions = {{"*_relu", DataType::kFloat32}, {"conv2", DataType::kFloat16}};
  ASSERT_TRUE(assign_precisions(g, c, float_storage_support).ok());
  auto d = decisions(g);
  EXPECT_EQ(d.at("stem"), "fp32*");
  EXPECT_EQ(d.at("conv2"), "fp16*");
  EXPECT_EQ(d.at("down"), "bf16");     // no ReLU of its own
  EXPECT_EQ(d.at("conv3"), "fp32*");   // absorbed the residual Add and "add_relu"

  // Re-running with another config replaces every decision (nothing stale stays behind).
  PrecisionConfig both;
  both.fp16 = true;
  both.bf16 = true;
  EXPECT_EQ(both.float_precision(), DataType::kFloat16);
  ASSERT_TRUE(assign_precisions(g, both, float_storage_support).ok());
  d = decisions(g);
  for (const auto& [name, p] : d) EXPECT_EQ(p, "fp16") << name;
}

// A target without 16-bit Add: unconstrained Adds fall back to fp32; an Add constrained to fp16
// is an error naming it.
bool no_half_add(const ir::Graph&, const ir::Node& n, DataType p) {
  if (n.op == ir::OpKind::kAdd) return p == DataType::kFloat32;
  return float_storage_support(ir::Graph{}, n, p);
}

TEST(AssignPrecisions, UnsupportedPrecisionFallsBackOrFailsWhenConstrained) {
  ir::Graph g = testing::passes_output(testing::resnet_block_graph(1, 8));
  // Keep a plain Add node: the block's Add is fused into conv3 by the pipeline, so add one.
  PrecisionConfig c;
  c.fp16 = true;
  bool has_add = false;
  for (const ir::Node& n : g.nodes) has_add |= !n.removed && n.op == ir::OpKind::kAdd;
  if (!has_add) {
    ir::ValueId out = g.outputs[0];
    ir::ValueId sum = g.add_value("extra_sum", DataType::kFloat32);
    g.value(sum).shape = g.value(out).shape;
    ir::Node add;
    add.name = "extra_add";
    add.op = ir::OpKind::kAdd;
    add.opset = 17;
    add.inputs = {out, out};
    add.outputs = {sum};
    g.add_node(std::move(add));
    g.outputs = {sum};
  }
  ASSERT_TRUE(assign_precisions(g, c, no_half_add).ok());
  for (const ir::Node& n : g.nodes) {
    if (n.removed) continue;
    EXPECT_EQ(n.attr_string("precision", ""), n.op == ir::OpKind::kAdd ? "fp32" : "fp16") << n.name;
  }
  std::string add_name;
  for (const ir::Node& n : g.nodes)
    if (!n.removed && n.op == ir::OpKind::kAdd) add_name = n.name;
  c.layer_precisions = {{add_name, DataType::kFloat16}};
  Status s = assign_precisions(g, c, no_half_add);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'" + add_name + "' (Add): constrained to fp16"), std::string::npos) << s.message();
}

TEST(AssignPrecisions, Int8AndFp8NeedQdqNodes) {
  ir::Graph g = testing::passes_output(testing::resnet_block_graph(1, 8));
  PrecisionConfig c;
  c.int8 = true;
  Status s = assign_precisions(g, c, float_storage_support);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("INT8 layers need calibration data"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--calib"), std::string::npos) << s.message();
  c.int8 = false;
  c.fp8 = true;
  s = assign_precisions(g, c, float_storage_support);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("FP8 layers need calibration data"), std::string::npos) << s.message();
  // Nothing was decided by a refused config.
  for (const auto& [name, p] : decisions(g)) EXPECT_EQ(p, "(none)") << name;
}

// A rule's errors come through unchanged (apply_layer_precisions): no match, bad precision.
TEST(AssignPrecisions, RuleErrorsNameTheRule) {
  ir::Graph g = testing::passes_output(testing::resnet_block_graph(1, 8));
  PrecisionConfig c;
  c.layer_precisions = {{"nope*", DataType::kFloat32}, {"stem", DataType::kFloat16}};
  Status s = assign_precisions(g, c, float_storage_support);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'nope*' matches no layer"), std::string::npos) << s.message();
  c.layer_precisions = {{"stem", DataType::kInt8}};
  s = assign_precisions(g, c, float_storage_support);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'stem': precision int8"), std::string::npos) << s.message();
}

// assign_layouts reads the decisions: FP32 decisions give the row-major layout (no Reformat, the
// same "layout" attributes as row_major_layout_preference); FP16 decisions put convs NHWC;
// a conv constrained to fp32 in an FP16 plan stays NCHW.
TEST(AssignPrecisions, LayoutsFollowTheDecisions) {
  ir::Graph g32 = testing::passes_output(testing::resnet_block_graph(1, 8));
  ASSERT_TRUE(assign_precisions(g32, PrecisionConfig{}, float_storage_support).ok());
  ir::Graph row = g32;
  auto tc = assign_layouts(g32, tensor_core_layout_preference);
  auto rm = assign_layouts(row, row_major_layout_preference);
  ASSERT_TRUE(tc.ok() && rm.ok());
  EXPECT_EQ(*tc, 0);
  EXPECT_EQ(*rm, 0);
  std::map<std::string, std::string> a, b;
  for (const ir::Node& n : g32.nodes) a[n.name] = n.attr_string("layout", "");
  for (const ir::Node& n : row.nodes) b[n.name] = n.attr_string("layout", "");
  EXPECT_EQ(a, b);

  ir::Graph g16 = testing::passes_output(testing::resnet_block_graph(1, 8));
  PrecisionConfig c;
  c.fp16 = true;
  c.layer_precisions = {{"conv2", DataType::kFloat32}};
  ASSERT_TRUE(assign_precisions(g16, c, float_storage_support).ok());
  auto r = assign_layouts(g16, tensor_core_layout_preference);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(*r, 0);
  std::map<std::string, std::string> l;
  for (const ir::Node& n : g16.nodes) l[n.name] = n.attr_string("layout", "");
  EXPECT_EQ(l.at("stem"), "NHWC");
  EXPECT_EQ(l.at("conv1"), "NHWC");
  EXPECT_EQ(l.at("conv2"), "NCHW");
}

}  // namespace
}  // namespace kiln::passes
