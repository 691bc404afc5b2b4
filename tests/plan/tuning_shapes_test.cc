// The shapes a dynamic profile's CUDA tactics are tuned at besides opt (docs/decisions/0041):
// min, max and powers of two along the dynamic dims, opt and duplicates left out, thinned evenly.
#include <gtest/gtest.h>

#include "builder/build_from_graph.h"

namespace kiln {
namespace {

ir::Graph inputs(const std::vector<std::string>& names) {
  ir::Graph g;
  for (const auto& n : names) g.inputs.push_back(g.add_value(n, DataType::kFloat32));
  return g;
}

std::vector<int64_t> dim(const std::vector<std::vector<Shape>>& sets, size_t input, size_t d) {
  std::vector<int64_t> r;
  for (const auto& s : sets) r.push_back(s[input][d]);
  return r;
}

TEST(TuningShapes, BatchProfilePowersOfTwoWithoutOpt) {
  ir::Graph g = inputs({"input"});
  OptimizationProfile p;
  ASSERT_TRUE(p.set_dimensions("input", {1, 3, 224, 224}, {64, 3, 224, 224}, {256, 3, 224, 224}).ok());
  const std::vector<Shape> opt = {{64, 3, 224, 224}};
  auto all = tuning_shapes(g, p, opt, 8);
  EXPECT_EQ(dim(all, 0, 0), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 128, 256}));
  for (const auto& s : all) EXPECT_EQ(s[0][1], 3);
  // Thinned evenly, min and max kept.
  EXPECT_EQ(dim(tuning_shapes(g, p, opt, 3), 0, 0), (std::vector<int64_t>{1, 16, 256}));
  EXPECT_TRUE(tuning_shapes(g, p, opt, 0).empty());
}

TEST(TuningShapes, SequenceDimsOfSeveralInputsMoveTogether) {
  ir::Graph g = inputs({"input_ids", "attention_mask"});
  OptimizationProfile p;
  ASSERT_TRUE(p.set_dimensions("input_ids", {2, 16}, {2, 128}, {2, 512}).ok());
  ASSERT_TRUE(p.set_dimensions("attention_mask", {2, 16}, {2, 128}, {2, 512}).ok());
  auto sets = tuning_shapes(g, p, {{2, 128}, {2, 128}}, 8);
  EXPECT_EQ(dim(sets, 0, 1), (std::vector<int64_t>{16, 32, 64, 256, 512}));
  EXPECT_EQ(dim(sets, 1, 1), dim(sets, 0, 1));
  EXPECT_EQ(dim(sets, 0, 0), (std::vector<int64_t>(5, 2)));
}

TEST(TuningShapes, StaticProfileHasNone) {
  ir::Graph g = inputs({"x"});
  OptimizationProfile p;
  ASSERT_TRUE(p.set_dimensions("x", {4, 8}, {4, 8}, {4, 8}).ok());
  EXPECT_TRUE(tuning_shapes(g, p, {{4, 8}}, 8).empty());
}

}  // namespace
}  // namespace kiln
