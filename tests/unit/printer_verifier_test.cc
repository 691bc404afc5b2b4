// The text dump on a small hand-built graph (exact text), and the verifier: it accepts every
// importable ONNX node test model and rejects each kind of broken graph with a message that
// names the node and the problem.
#include <gtest/gtest.h>

#include <filesystem>

#include "ir/printer.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "onnx/importer.h"

namespace kiln::ir {
namespace {


// conv1 -> relu1 -> max pool (with an omitted Indices output), a symbolic batch.
Graph small_graph() {
  Graph g;
  g.name = "main";
  ValueId x = g.add_value("x", DataType::kFloat32);
  g.value(x).shape = SymShape{Dim::sym("batch"), Dim::known(3), Dim::known(224), Dim::known(224)};
  g.inputs.push_back(x);
  ValueId w = g.add_value("w", DataType::kFloat32);
  g.value(w).constant = std::make_shared<Tensor>(DataType::kFloat32, Shape{64, 3, 7, 7});
  ValueId y = g.add_value("y"), r = g.add_value("r"), p = g.add_value("p");
  Node conv;
  conv.name = "conv1";
  conv.op = OpKind::kConv;
  conv.opset = 17;
  conv.inputs = {x, w, kNoValue};
  conv.outputs = {y};
  conv.attrs["strides"] = Attribute::of_ints({2, 2});
  conv.attrs["pads"] = Attribute::of_ints({3, 3, 3, 3});
  g.add_node(conv);
  Node relu;
  relu.name = "relu1";
  relu.op = OpKind::kLeakyRelu;
  relu.opset = 17;
  relu.inputs = {y};
  relu.outputs = {r};
  relu.attrs["alpha"] = Attribute::of_float(0.1f);
  g.add_node(relu);
  Node pool;
  pool.name = "pool1";
  pool.op = OpKind::kMaxPool;
  pool.opset = 17;
  pool.inputs = {r};
  pool.outputs = {p, kNoValue};
  pool.attrs["kernel_shape"] = Attribute::of_ints({3, 3});
  pool.attrs["strides"] = Attribute::of_ints({2, 2});
  pool.attrs["pads"] = Attribute::of_ints({1, 1, 1, 1});
  g.add_node(pool);
  g.outputs.push_back(p);
  return g;
}

TEST(Printer, ExactTextOfASmallGraph) {
  Graph g = small_graph();
  const std::string before =
      "graph main(%x:float32[batch,3,224,224]) {\n"
      "  %y:?[...] = Conv(%x, %w:const[64,3,7,7], _) {pads=[3,3,3,3], strides=[2,2]}  # conv1\n"
      "  %r:?[...] = LeakyRelu(%y) {alpha=0.1}  # relu1\n"
      "  %p:?[...], _ = MaxPool(%r) {kernel_shape=[3,3], pads=[1,1,1,1], strides=[2,2]}  # pool1\n"
      "  return %p\n"
      "}\n";
  EXPECT_EQ(print_graph(g), before);
  ASSERT_TRUE(infer_shapes(g).ok());
  const std::string after =
      "graph main(%x:float32[batch,3,224,224]) {\n"
      "  %y:float32[batch,64,112,112] = Conv(%x, %w:const[64,3,7,7], _) {pads=[3,3,3,3], strides=[2,2]}  # conv1\n"
      "  %r:float32[batch,64,112,112] = LeakyRelu(%y) {alpha=0.1}  # relu1\n"
      "  %p:float32[batch,64,56,56], _ = MaxPool(%r) {kernel_shape=[3,3], pads=[1,1,1,1], strides=[2,2]}  # pool1\n"
      "  return %p\n"
      "}\n";
  EXPECT_EQ(print_graph(g), after);
  EXPECT_EQ(print_graph(g), print_graph(Graph(g)));  // stable
}

// A quantized value prints its parameters after its type (QuantParams, --dump-after dumps).
TEST(Printer, ShowsQuantizationParameters) {
  Graph g = small_graph();
  QuantParams q;
  q.type = DataType::kInt8;
  q.granularity = QuantGranularity::kPerAxis;
  q.axis = 1;
  q.scale_shape = {3};
  q.scale = {0.5f, 0.25f, 2.f};
  q.zero_point = {-1, 0, 4};
  g.value(g.inputs[0]).dtype = DataType::kInt8;
  g.value(g.inputs[0]).quant = q;
  EXPECT_NE(print_graph(g).find("graph main(%x:int8[batch,3,224,224]{int8 per_axis axis=1 scale[3] 0.25..2 zp -1..4})"),
            std::string::npos)
      << print_graph(g);
}

TEST(Verifier, AcceptsAWellFormedGraph) { EXPECT_TRUE(verify(small_graph()).ok()); }

TEST(Verifier, RejectsUseBeforeDefinition) {
  Graph g = small_graph();
  std::swap(g.nodes[0], g.nodes[1]);
  g.nodes[0].id = 0;
  g.nodes[1].id = 1;
  g.value(g.find_value("y")).producer = 1;
  g.value(g.find_value("r")).producer = 0;
  Status s = verify(g);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "graph 'main': node 'relu1' (LeakyRelu): input 0 ('y') is used before it is defined");
}

TEST(Verifier, RejectsTwoProducers) {
  Graph g = small_graph();
  g.nodes[1].outputs = {g.find_value("y")};
  Status s = verify(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("node 'relu1' (LeakyRelu): output 'y' is already defined by node 'conv1' (Conv)"), std::string::npos) << s.message();
}

// Quantization parameters must be consistent with the value's shape and dtype.
TEST(Verifier, ChecksQuantizationParameters) {
  Graph g = small_graph();
  QuantParams q;
  q.type = DataType::kInt8;
  q.granularity = QuantGranularity::kPerAxis;
  q.axis = 1;
  q.scale_shape = {3};
  q.scale = {0.5f, 0.25f, 2.f};
  Value& x = g.value(g.inputs[0]);
  x.dtype = DataType::kInt8;
  x.quant = q;
  EXPECT_TRUE(verify(g).ok());
  x.quant->scale_shape = {4};
  x.quant->scale.push_back(1.f);
  Status s = verify(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("value 'x': quantization scale_shape: [4], but the tensor [-1,3,224,224] has 3 along axis 1"),
            std::string::npos) << s.message();
  x.quant = q;
  x.dtype = DataType::kUInt8;
  s = verify(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("value 'x' has dtype uint8 but quantization type int8"), std::string::npos) << s.message();
}

TEST(Verifier, RejectsDanglingIdsAndMissingOutputs) {
  Graph g = small_graph();
  g.nodes[1].inputs = {999};
  Status s = verify(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("input 0 has id 999, which does not exist"), std::string::npos) << s.message();

  Graph h = small_graph();
  h.outputs.push_back(h.add_value("ghost"));
  s = verify(h);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "graph 'main': graph output 'ghost' is never produced");

  Graph k = small_graph();
  k.nodes[2].id = 7;
  EXPECT_FALSE(verify(k).ok());
}

TEST(Verifier, RejectsBadArityAndMissingAttributes) {
  Graph g = small_graph();
  g.nodes[0].inputs.resize(1);
  Status s = verify(g);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "graph 'main': node 'conv1' (Conv): has 1 inputs, expected 2 to 3");

  Graph h = small_graph();
  h.nodes[0].inputs[1] = kNoValue;
  s = verify(h);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "graph 'main': node 'conv1' (Conv): required input 1 is missing");

  Graph k = small_graph();
  k.nodes[2].attrs.erase("kernel_shape");
  s = verify(k);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "graph 'main': node 'pool1' (MaxPool): required attribute 'kernel_shape' is missing");
}

TEST(Verifier, ChecksSubgraphsAndOuterReferences) {
  Graph g = small_graph();
  auto body = std::make_shared<Graph>();
  body->name = "then";
  ValueId o = body->add_value("nowhere");
  body->outer_refs.push_back(o);
  body->outputs.push_back(o);
  auto else_g = std::make_shared<Graph>(*body);
  else_g->name = "else";
  ValueId c = g.add_value("c", DataType::kBool);
  g.inputs.push_back(c);
  Node n;
  n.name = "if1";
  n.op = OpKind::kIf;
  n.opset = 17;
  n.inputs = {c};
  n.outputs = {g.add_value("z")};
  n.attrs["then_branch"].kind = Attribute::Kind::kGraph;
  n.attrs["then_branch"].g = body;
  n.attrs["else_branch"].kind = Attribute::Kind::kGraph;
  n.attrs["else_branch"].g = else_g;
  g.add_node(n);
  Status s = verify(g);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "graph 'main': node 'if1' (If) attribute 'else_branch': graph 'else': outer reference 'nowhere' names no value of an enclosing graph");
  body->values[o].name = "r";
  else_g->values[o].name = "r";
  EXPECT_TRUE(verify(g).ok()) << verify(g).message();
}

TEST(Verifier, AcceptsEveryImportableOnnxNodeTest) {
  const char* dir = "/usr/share/libonnx-testdata/data/node";
  if (!std::filesystem::exists(dir)) GTEST_SKIP();
  int checked = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    auto g = onnx_import::import_model_file((e.path() / "model.onnx").string());
    if (!g.ok()) continue;
    Status s = verify(*g);
    EXPECT_TRUE(s.ok()) << e.path().filename() << ": " << s.message();
    ++checked;
  }
  EXPECT_GT(checked, 800);
}

}  // namespace
}  // namespace kiln::ir
