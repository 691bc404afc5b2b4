// annotate_qdq on ONNX Q/DQ graphs built in code: per-tensor, per-axis (negative axis) and
// blocked (opset 21) parameters land on the quantized values; disagreeing or non-constant
// parameters leave none; invalid ones are errors naming the node; the parameters reach the plan.
#include <gtest/gtest.h>

#include <limits>

#include "builder/build_from_graph.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "kiln/builder.h"
#include "onnx/importer.h"
#include "passes/passes.h"
#include "plan/onnx_test_models.h"
#include "plan/plan_format.h"

namespace kiln {
namespace {

using testing::OnnxModel;

// An initializer of any ONNX element type, its elements given as int32_data (onnx.proto: one
// per element for 8-bit and wider types, packed bytes for 4-bit types).
void int_initializer(OnnxModel& m, const std::string& name, int type, const std::vector<int64_t>& dims,
                     const std::vector<int32_t>& data) {
  auto* t = m.proto().mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  for (int32_t v : data) t->add_int32_data(v);
}

void int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

constexpr int kInt8 = onnx::TensorProto::INT8;
constexpr int kUInt8 = onnx::TensorProto::UINT8;
constexpr int kInt4 = 22;

// x [2, 6] -> Q (per tensor, int8, zp -3) -> DQ -> Gemm with W = DQ(w int8 [4, 6], per axis
// along axis -2 = 0) + DQ(wb int4 [4, 6], blocked along axis 1, blocks of 4 -> scale [4, 2]).
OnnxModel qdq_model() {
  OnnxModel m(21);
  m.input("x", testing::kF32, {int64_t{2}, int64_t{6}});
  m.initializer("s_x", {}, {0.05f});
  int_initializer(m, "z_x", kInt8, {}, {-3});
  m.node("QuantizeLinear", {"x", "s_x", "z_x"}, {"xq"}, "quant_x");
  m.node("DequantizeLinear", {"xq", "s_x", "z_x"}, {"xd"}, "dequant_x");
  std::vector<int32_t> w(24);
  for (int i = 0; i < 24; ++i) w[i] = (i * 7) % 19 - 9;
  int_initializer(m, "w", kInt8, {4, 6}, w);
  m.initializer("s_w", {4}, {0.1f, 0.2f, 0.3f, 0.4f});
  int_initializer(m, "z_w", kInt8, {4}, {0, 1, -1, 2});
  int_attr(m.node("DequantizeLinear", {"w", "s_w", "z_w"}, {"wd"}, "dequant_w"), "axis", -2);
  std::vector<int32_t> wb(12);
  for (int i = 0; i < 12; ++i) wb[i] = (i * 0x35) & 0xff;  // packed int4 pairs
  int_initializer(m, "wb", kInt4, {4, 6}, wb);
  m.initializer("s_wb", {4, 2}, {0.5f, 0.25f, 1.0f, 2.0f, 0.125f, 4.0f, 8.0f, 0.5f});
  auto* dqb = m.node("DequantizeLinear", {"wb", "s_wb"}, {"wbd"}, "dequant_wb");
  int_attr(dqb, "axis", 1);
  int_attr(dqb, "block_size", 4);
  m.node("Add", {"wd", "wbd"}, {"wsum"}, "add_w");
  int_attr(m.node("Gemm", {"xd", "wsum"}, {"y"}, "gemm"), "transB", 1);
  m.output("y", testing::kF32, {int64_t{2}, int64_t{4}});
  return m;
}

// Imported and shape-inferred, as the builder hands graphs to the pipeline.
StatusOr<ir::Graph> import(const OnnxModel& m) {
  auto g = onnx_import::import_model_bytes(m.bytes(), "");
  if (!g.ok()) return g;
  KILN_RETURN_IF_ERROR(ir::infer_shapes(*g));
  return g;
}

const ir::Value& value(const ir::Graph& g, const std::string& name) {
  const ir::ValueId v = g.find_value(name);
  EXPECT_NE(v, ir::kNoValue) << name;
  return g.value(v);
}

TEST(AnnotateQdq, PerTensorPerAxisAndBlocked) {
  auto g = import(qdq_model());
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_TRUE(passes::annotate_qdq(*g, passes::PassOptions{}).ok());
  QuantParams x;
  x.type = DataType::kInt8;
  x.scale = {0.05f};
  x.zero_point = {-3};
  ASSERT_TRUE(value(*g, "xq").quant.has_value());
  EXPECT_EQ(*value(*g, "xq").quant, x);
  QuantParams w;
  w.type = DataType::kInt8;
  w.granularity = QuantGranularity::kPerAxis;
  w.axis = 0;  // -2 normalized
  w.scale_shape = {4};
  w.scale = {0.1f, 0.2f, 0.3f, 0.4f};
  w.zero_point = {0, 1, -1, 2};
  ASSERT_TRUE(value(*g, "w").quant.has_value());
  EXPECT_EQ(*value(*g, "w").quant, w);
  QuantParams b;
  b.type = DataType::kInt4;
  b.granularity = QuantGranularity::kPerBlock;
  b.axis = 1;
  b.block_size = 4;
  b.scale_shape = {4, 2};
  b.scale = {0.5f, 0.25f, 1.0f, 2.0f, 0.125f, 4.0f, 8.0f, 0.5f};
  ASSERT_TRUE(value(*g, "wb").quant.has_value());
  EXPECT_EQ(*value(*g, "wb").quant, b);
  // Float values are untouched.
  EXPECT_FALSE(value(*g, "x").quant.has_value());
  EXPECT_FALSE(value(*g, "xd").quant.has_value());
  EXPECT_TRUE(ir::verify(*g).ok());
}

TEST(AnnotateQdq, DisagreeingOrUnknownParametersLeaveNone) {
  OnnxModel m(13);
  m.input("x", testing::kF32, {int64_t{4}});
  m.input("s_dyn", testing::kF32, {});
  m.initializer("s1", {}, {0.5f});
  m.initializer("s2", {}, {0.25f});
  m.node("QuantizeLinear", {"x", "s1"}, {"q1"}, "q1");
  m.node("DequantizeLinear", {"q1", "s1"}, {"d1"}, "d1");
  m.node("DequantizeLinear", {"q1", "s2"}, {"d2"}, "d2");  // a reader that disagrees
  m.node("QuantizeLinear", {"x", "s_dyn"}, {"q2"}, "q2");  // scale known only at run time
  m.node("DequantizeLinear", {"q2", "s1"}, {"d3"}, "d3");
  m.node("QuantizeLinear", {"x", "s2"}, {"q3"}, "q3");     // agreeing pair
  m.node("DequantizeLinear", {"q3", "s2"}, {"d4"}, "d4");
  m.node("Sum", {"d1", "d2", "d3", "d4"}, {"y"}, "sum");
  m.output("y", testing::kF32, {int64_t{4}});
  auto g = import(m);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_TRUE(passes::annotate_qdq(*g, passes::PassOptions{}).ok());
  EXPECT_FALSE(value(*g, "q1").quant.has_value());
  EXPECT_FALSE(value(*g, "q2").quant.has_value());
  ASSERT_TRUE(value(*g, "q3").quant.has_value());
  EXPECT_EQ(value(*g, "q3").quant->type, DataType::kUInt8);
  EXPECT_EQ(value(*g, "q3").quant->scale, std::vector<float>{0.25f});
  EXPECT_TRUE(value(*g, "q3").quant->zero_point.empty());  // no zero point: 0
}

TEST(AnnotateQdq, InvalidParametersAreErrorsNamingTheNode) {
  for (float bad : {0.0f, -0.5f, std::numeric_limits<float>::quiet_NaN()}) {
    OnnxModel m(13);
    m.input("x", testing::kF32, {int64_t{4}});
    m.initializer("s", {}, {bad});
    m.node("QuantizeLinear", {"x", "s"}, {"q"}, "quant_bad");
    m.node("DequantizeLinear", {"q", "s"}, {"y"}, "dequant_bad");
    m.output("y", testing::kF32, {int64_t{4}});
    auto g = import(m);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    Status st = passes::annotate_qdq(*g, passes::PassOptions{});
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("node 'quant_bad' (QuantizeLinear)"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("scale[0]"), std::string::npos) << st.message();
  }
  // Inconsistent shapes are caught at import (shape inference), naming the node.
  OnnxModel m(21);
  m.input("x", testing::kF32, {int64_t{2}, int64_t{6}});
  m.initializer("s", {2, 2}, {1, 1, 1, 1});
  auto* n = m.node("QuantizeLinear", {"x", "s"}, {"q"}, "quant_blocks");
  int_attr(n, "axis", 1);
  int_attr(n, "block_size", 2);
  m.output("q", kUInt8, {int64_t{2}, int64_t{6}});
  auto g = import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("node 'quant_blocks' (QuantizeLinear)"), std::string::npos) << g.status().message();
  EXPECT_NE(g.status().message().find("expected 3"), std::string::npos) << g.status().message();
}

TEST(AnnotateQdq, ParametersReachThePlan) {
  const OnnxModel m = qdq_model();
  auto g = import(m);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  BuilderConfig c;
  c.target = TargetDevice::kCpu;
  auto bytes = build_from_graph(*g, c);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto p = plan::read_plan(bytes->data(), bytes->size());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  // The activation's parameters survive the pipeline (the weights' DQs fold into float weights).
  const ir::ValueId xq = p->graph.find_value("xq");
  ASSERT_NE(xq, ir::kNoValue);
  ASSERT_TRUE(p->graph.value(xq).quant.has_value());
  EXPECT_EQ(p->graph.value(xq).quant->scale, std::vector<float>{0.05f});
  EXPECT_EQ(p->graph.value(xq).quant->zero_point, std::vector<int32_t>{-3});
}

}  // namespace
}  // namespace kiln
