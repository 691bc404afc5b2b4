// ai.onnx opsets 23 and 24 as known opsets (onnx/op_attributes.h kNewestKnownOpset, docs/decisions/
// 0066 addendum): their models import without --allow-unknown-attributes and run on the CPU
// reference; the attributes ONNX added at 23/24 (Changelog.md: QuantizeLinear-23 precision,
// DequantizeLinear-23 output_dtype, Cast-24 / CastLike-24 round_mode) are accepted from that opset
// and refused below it; opset 25 is still an unknown item.
#include <gtest/gtest.h>

#include "builder/build_from_graph.h"
#include "kiln/runtime.h"
#include "onnx/importer.h"
#include "onnx/op_attributes.h"
#include "plan/onnx_test_models.h"

namespace kiln::testing {
namespace {

constexpr int kI8 = onnx::TensorProto::INT8;

StatusOr<ir::Graph> import(const OnnxModel& m) {
  onnx_import::ImportOptions o;  // allow_unknown off: opsets 23/24 must need no override
  return onnx_import::import_model_bytes(m.bytes(), ".", o);
}

OnnxModel model(int opset) {
  OnnxModel m(opset);
  m.proto().set_ir_version(opset >= 23 ? 11 : 10);  // ONNX 1.18+ writes IR 11 with opset 23
  return m;
}

void set_int(onnx::NodeProto* n, const std::string& k, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void set_string(onnx::NodeProto* n, const std::string& k, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// Builds a CPU plan of `m` (allow_unknown off), runs it with x, returns output "y" (float32).
std::vector<float> run(const OnnxModel& m, const Tensor& x) {
  auto g = import(m);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  if (!g.ok()) return {};
  auto plan = build_from_graph(*g, BuilderConfig{});
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (!plan.ok()) return {};
  auto engine = Runtime::deserialize_engine(*plan);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return {};
  auto ctx = (*engine)->create_execution_context();
  EXPECT_TRUE(ctx->set_input("x", x).ok());
  Status s = ctx->execute();
  EXPECT_TRUE(s.ok()) << s.to_string();
  auto y = ctx->output("y");
  EXPECT_TRUE(y.ok());
  if (!y.ok() || y->dtype() != DataType::kFloat32) return {};
  return std::vector<float>(y->data<float>(), y->data<float>() + y->numel());
}

Tensor f32(const Shape& shape, const std::vector<float>& v) {
  Tensor t(DataType::kFloat32, shape);
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
  return t;
}

// y = Reshape(Transpose(Cast(x, to=float))), [2, 3] -> [3, 2] -> [6]: ops whose schema has a
// version 23 and 24 (type-only changes).
OnnxModel reshape_model(int opset) {
  OnnxModel m = model(opset);
  m.input("x", kF32, {int64_t{2}, int64_t{3}});
  auto* shape = m.proto().mutable_graph()->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(1);
  shape->add_int64_data(6);
  set_int(m.node("Cast", {"x"}, {"c"}, "cast0"), "to", onnx::TensorProto::FLOAT);
  auto* t = m.node("Transpose", {"c"}, {"t"}, "transpose0");
  auto* perm = t->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  perm->add_ints(1);
  perm->add_ints(0);
  m.node("Reshape", {"t", "shape"}, {"y"}, "reshape0");
  m.output("y", kF32, {int64_t{6}});
  return m;
}

TEST(OnnxOpset24, KnownOpsetIs24) { EXPECT_EQ(onnx_import::kNewestKnownOpset, 24); }

TEST(OnnxOpset24, Opset23And24ModelsImportAndRun) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  for (int opset : {23, 24}) {
    SCOPED_TRACE("opset " + std::to_string(opset));
    // x^T row-major: [[1, 4], [2, 5], [3, 6]].
    EXPECT_EQ(run(reshape_model(opset), x), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  }
}

TEST(OnnxOpset24, Opset25IsStillNewerThanKilnKnows) {
  auto g = import(reshape_model(25));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(g.status().message().find("ai.onnx opset 25 is newer than Kiln knows (24)"), std::string::npos)
      << g.status().message();
}

TEST(OnnxOpset24, NewOpsOfOpset24StayUnsupportedOps) {
  OnnxModel m = model(24);
  m.input("x", kF32, {int64_t{4}});
  m.node("Swish", {"x"}, {"y"}, "swish0");
  m.output("y", kF32, {int64_t{4}});
  auto g = import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("unsupported op:\n  node 'swish0' (Swish, domain 'ai.onnx', opset 24)"),
            std::string::npos)
      << g.status().message();
}

// Cast-24's round_mode (only for float8e8m0 targets): accepted at 24, not an attribute of Cast-23.
TEST(OnnxOpset24, CastRoundModeIsAnAttributeFromOpset24) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  OnnxModel m24 = reshape_model(24);
  set_string(m24.proto().mutable_graph()->mutable_node(0), "round_mode", "down");
  EXPECT_EQ(run(m24, x), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  OnnxModel m23 = reshape_model(23);
  set_string(m23.proto().mutable_graph()->mutable_node(0), "round_mode", "down");
  auto g = import(m23);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("node 'cast0' (Cast): attribute 'round_mode' is not an attribute of Cast-23"),
            std::string::npos)
      << g.status().message();
}

// y = DequantizeLinear(QuantizeLinear(x, 1, 0:int8), 1, 0:int8), the Q with `precision`.
OnnxModel qdq_model(int opset, int64_t precision) {
  OnnxModel m = model(opset);
  m.input("x", kF32, {int64_t{3}});
  m.initializer("scale", {}, {1.f});
  m.int_initializer("zp", kI8, {}, {0});
  auto* q = m.node("QuantizeLinear", {"x", "scale", "zp"}, {"q"}, "quant0");
  if (precision >= 0) set_int(q, "precision", precision);
  m.node("DequantizeLinear", {"q", "scale", "zp"}, {"y"}, "dequant0");
  m.output("y", kF32, {int64_t{3}});
  return m;
}

// QuantizeLinear-23's precision survives the build (it is held as "quantize_precision": the node
// attribute "precision" is the layer precision assign_precisions rewrites) and keeps the Q/DQ
// pair out of the float32 fusions. In float16, 100.52 and 102.52 round to 100.5 and 102.5, which
// round half to even to 100 and 102; in float32 x / 1 rounds to 101 and 103.
TEST(OnnxOpset24, QuantizePrecisionIsHonouredFromOpset23) {
  const Tensor x = f32({3}, {100.52f, 102.52f, -100.52f});
  EXPECT_EQ(run(qdq_model(23, onnx::TensorProto::FLOAT16), x), (std::vector<float>{100, 102, -100}));
  EXPECT_EQ(run(qdq_model(23, onnx::TensorProto::FLOAT), x), (std::vector<float>{101, 103, -101}));
  EXPECT_EQ(run(qdq_model(23, -1), x), (std::vector<float>{101, 103, -101}));
  auto g = import(qdq_model(22, onnx::TensorProto::FLOAT16));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find(
                "node 'quant0' (QuantizeLinear): attribute 'precision' is not an attribute of QuantizeLinear-21"),
            std::string::npos)
      << g.status().message();
}

TEST(OnnxOpset24, DequantizeOutputDtypeIsAnAttributeFromOpset23) {
  for (int opset : {22, 23}) {
    OnnxModel m = qdq_model(opset, -1);
    set_int(m.proto().mutable_graph()->mutable_node(1), "output_dtype", onnx::TensorProto::FLOAT);
    auto g = import(m);
    if (opset == 23) {
      EXPECT_TRUE(g.ok()) << g.status().to_string();
    } else {
      ASSERT_FALSE(g.ok());
      EXPECT_NE(g.status().message().find("node 'dequant0' (DequantizeLinear): attribute 'output_dtype' is not an "
                                          "attribute of DequantizeLinear-21"),
                std::string::npos)
          << g.status().message();
    }
  }
}

// The lowered opset-23 ops have schemas too: an attribute ONNX does not define is an unknown item.
TEST(OnnxOpset24, UnknownAttributeOfALoweredOpIsAnItem) {
  OnnxModel m = model(23);
  m.input("x", kF32, {int64_t{2}, int64_t{4}});
  m.initializer("scale", {4}, {1.f, 1.f, 1.f, 1.f});
  set_int(m.node("RMSNormalization", {"x", "scale"}, {"y"}, "rms0"), "groups", 2);
  m.output("y", kF32, {int64_t{2}, int64_t{4}});
  auto g = import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("node 'rms0' (RMSNormalization): attribute 'groups' is not an attribute of "
                                      "RMSNormalization-23"),
            std::string::npos)
      << g.status().message();
}

}  // namespace
}  // namespace kiln::testing
