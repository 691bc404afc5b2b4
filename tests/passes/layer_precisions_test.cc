// Per-layer precision constraints (src/passes/layer_precisions.cc): the '*' glob, the CLI spec
// "PATTERN:PREC[,...]", and the "precision" attribute written on the optimized graph (fused
// layers match by the names of the ONNX nodes fused into them; later rules override earlier).
#include <gtest/gtest.h>

#include "gpu/branch_graphs.h"
#include "kiln/builder.h"
#include "passes/passes.h"

namespace kiln::passes {
namespace {

TEST(LayerPrecisions, GlobMatch) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*", "/layer4/layer4.0/conv1/Conv"));
  EXPECT_TRUE(glob_match("/layer4/*", "/layer4/layer4.0/conv1/Conv"));
  EXPECT_FALSE(glob_match("/layer4/*", "/layer3/layer3.0/conv1/Conv"));
  EXPECT_TRUE(glob_match("*/conv1/*", "/layer1/layer1.0/conv1/Conv"));
  EXPECT_FALSE(glob_match("*/conv1/*", "/layer1/layer1.0/conv2/Conv"));
  EXPECT_TRUE(glob_match("a*b*c", "aXXbYYc"));
  EXPECT_TRUE(glob_match("a*b*c", "abc"));
  EXPECT_FALSE(glob_match("a*b*c", "aXXcYYb"));
  EXPECT_TRUE(glob_match("conv1", "conv1"));
  EXPECT_FALSE(glob_match("conv1", "conv10"));
  EXPECT_FALSE(glob_match("conv10", "conv1"));
  EXPECT_TRUE(glob_match("*1", "conv11"));  // backtracks past the first '1'
}

TEST(LayerPrecisions, ParsesSpecs) {
  auto r = parse_layer_precisions("/fc/*:fp32,*:fp16,ns:conv:bf16");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].pattern, "/fc/*");
  EXPECT_EQ((*r)[0].precision, DataType::kFloat32);
  EXPECT_EQ((*r)[1].pattern, "*");
  EXPECT_EQ((*r)[1].precision, DataType::kFloat16);
  EXPECT_EQ((*r)[2].pattern, "ns:conv");  // the precision follows the last ':'
  EXPECT_EQ((*r)[2].precision, DataType::kBFloat16);
  EXPECT_TRUE(parse_layer_precisions("")->empty());
  for (const char* bad : {"conv1", "conv1:", ":fp32", "conv1:int8", "a:fp32,", "a:fp32,,b:fp16"}) {
    auto e = parse_layer_precisions(bad);
    EXPECT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.status().message().find("--layer-precisions"), std::string::npos) << e.status().message();
  }
  EXPECT_NE(parse_layer_precisions("conv1:int8").status().message().find("'int8'"), std::string::npos);
}

std::string precision_of(const ir::Graph& g, const std::string& name) {
  for (const ir::Node& n : g.nodes)
    if (!n.removed && n.name == name) return n.attr_string("precision", "(none)");
  return "(no such layer)";
}

TEST(LayerPrecisions, MarksFusedLayersByOriginAndLaterRulesWin) {
  ir::Graph g = testing::passes_output(testing::resnet_block_graph(1, 8));  // convs with ReLU (and the residual Add) fused
  // "*_relu" names only ReLU nodes of the ONNX graph, which live on as origins of the fused convs.
  std::vector<LayerPrecision> rules = {{"*_relu", DataType::kFloat32}, {"conv2", DataType::kBFloat16}};
  ASSERT_TRUE(apply_layer_precisions(g, rules).ok());
  EXPECT_EQ(precision_of(g, "stem"), "fp32");
  EXPECT_EQ(precision_of(g, "conv1"), "fp32");
  EXPECT_EQ(precision_of(g, "conv2"), "bf16");  // the later rule overrides
  EXPECT_EQ(precision_of(g, "head"), "fp32");
  EXPECT_EQ(precision_of(g, "down"), "(none)");  // no ReLU of its own: not matched
}

TEST(LayerPrecisions, ListsEveryBadRuleAtOnce) {
  ir::Graph g = testing::passes_output(testing::resnet_block_graph(1, 8));
  std::vector<LayerPrecision> rules = {{"nope*", DataType::kFloat32}, {"stem", DataType::kFloat32},
                                       {"missing", DataType::kFloat16}};
  Status s = apply_layer_precisions(g, rules);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'nope*' matches no layer"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("'missing' matches no layer"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("'stem'"), std::string::npos) << s.message();
  Status t = apply_layer_precisions(g, {{"stem", DataType::kInt8}});
  EXPECT_NE(t.message().find("int8"), std::string::npos) << t.message();
}

}  // namespace
}  // namespace kiln::passes
