// `kiln inspect --graph`: the DOT text names every layer, links producers to consumers with the
// tensor's shape, and marks the graph's inputs and outputs.
#include <gtest/gtest.h>

#include "plan/plan_test_util.h"
#include "tools/kiln/graph_dot.h"

namespace kiln::cli {
namespace {

TEST(GraphDot, LayersAndEdgesOfAnEngine) {
  auto engine = Runtime::deserialize_engine(testing::build_add_relu_plan());
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const std::string dot = engine_dot(**engine);
  EXPECT_EQ(dot.rfind("digraph engine {", 0), 0u);
  EXPECT_NE(dot.find("\"in:x\" [shape=ellipse"), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"out:y\" [shape=ellipse"), std::string::npos) << dot;
  // x feeds the first layer (add0), add0 feeds relu0, relu0 produces y.
  EXPECT_NE(dot.find("\"in:x\" -> \"L0\" [label=\"[batch,4]\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"L0\" -> \"L1\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"L1\" -> \"out:y\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("add0\\nAdd"), std::string::npos) << dot;
  // The weight b is not drawn as a node.
  EXPECT_EQ(dot.find("\"b\""), std::string::npos) << dot;
}

TEST(GraphDot, RejectsUnknownFileTypes) {
  auto engine = Runtime::deserialize_engine(testing::build_add_relu_plan());
  ASSERT_TRUE(engine.ok());
  Status s = write_graph(**engine, "/tmp/kiln_graph_test.txt");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(".svg"), std::string::npos);
}

}  // namespace
}  // namespace kiln::cli
