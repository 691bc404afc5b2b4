// Quantization parameters (kiln/quant_params.h) on values: validation of every field, the plan
// round trip of per-tensor, per-axis and per-block parameters, the reader refusing malformed
// ones (naming the field), and `kiln inspect` showing them in text and JSON.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "builder/build_from_graph.h"
#include "passes/pass_test_util.h"
#include "plan/plan_test_util.h"

namespace kiln {
namespace {

QuantParams per_tensor(DataType t = DataType::kInt8) {
  QuantParams q;
  q.type = t;
  q.scale = {0.05f};
  q.zero_point = {-3};
  return q;
}

QuantParams per_axis(int64_t axis, int64_t n) {
  QuantParams q;
  q.type = DataType::kInt8;
  q.granularity = QuantGranularity::kPerAxis;
  q.axis = axis;
  q.scale_shape = {n};
  for (int64_t i = 0; i < n; ++i) q.scale.push_back(0.01f * static_cast<float>(i + 1));
  return q;
}

// [rows, cols] in blocks of `block` along axis 1 (int4 weights as LLM loaders store them).
QuantParams per_block(int64_t rows, int64_t cols, int64_t block) {
  QuantParams q;
  q.type = DataType::kInt4;
  q.granularity = QuantGranularity::kPerBlock;
  q.axis = 1;
  q.block_size = block;
  q.scale_shape = {rows, (cols + block - 1) / block};
  for (int64_t i = 0; i < q.scale_shape[0] * q.scale_shape[1]; ++i) {
    q.scale.push_back(0.5f + 0.25f * static_cast<float>(i));
    q.zero_point.push_back(static_cast<int32_t>(i % 16) - 8);
  }
  return q;
}

TEST(QuantParams, ValidatesEveryField) {
  const std::vector<int64_t> s = {4, 6};
  EXPECT_TRUE(validate_quant_params(per_tensor(), &s, "t").ok());
  EXPECT_TRUE(validate_quant_params(per_axis(0, 4), &s, "t").ok());
  EXPECT_TRUE(validate_quant_params(per_block(4, 6, 4), &s, "t").ok());
  EXPECT_TRUE(validate_quant_params(per_block(4, 6, 4), nullptr, "t").ok());
  const std::vector<int64_t> dyn = {-1, 6};
  EXPECT_TRUE(validate_quant_params(per_block(4, 6, 4), &dyn, "t").ok());  // unknown dims are not checked

  auto expect_bad = [&](QuantParams q, const std::string& needle, const std::vector<int64_t>* shape) {
    Status st = validate_quant_params(q, shape, "value 'w'");
    ASSERT_FALSE(st.ok()) << needle;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("value 'w': quantization " + needle), std::string::npos) << st.message();
  };
  QuantParams q = per_tensor(DataType::kFloat32);
  expect_bad(q, "type", &s);
  q = per_tensor();
  q.scale = {0.f};
  expect_bad(q, "scale: scale[0] = 0", &s);
  q.scale = {std::numeric_limits<float>::quiet_NaN()};
  expect_bad(q, "scale: scale[0]", &s);
  q = per_tensor();
  q.zero_point = {128};
  expect_bad(q, "zero_point: zero_point[0] = 128 is outside int8's [-128, 127]", &s);
  q = per_tensor(DataType::kFloat8E4M3FN);
  expect_bad(q, "zero_point", &s);  // float8 zero points are 0
  q.zero_point = {0};
  EXPECT_TRUE(validate_quant_params(q, &s, "t").ok());
  q = per_tensor();
  q.saturate = false;
  expect_bad(q, "saturate", &s);
  q = per_tensor();
  q.axis = 1;
  expect_bad(q, "per_tensor", &s);
  q = per_axis(0, 5);
  expect_bad(q, "scale_shape: [5], but the tensor [4,6] has 4 along axis 0", &s);
  q = per_axis(2, 4);
  expect_bad(q, "axis: 2 is outside the tensor's rank 2", &s);
  q = per_axis(0, 4);
  q.scale.pop_back();
  expect_bad(q, "scale: 3 values for scale_shape [4]", &s);
  q = per_axis(0, 4);
  q.zero_point = {1, 2};
  expect_bad(q, "zero_point: 2 values, expected 0 or 4", &s);
  q = per_block(4, 6, 4);
  q.block_size = 0;
  expect_bad(q, "per_block", &s);
  q = per_block(4, 6, 3);  // scale [4, 2] fits blocks of 3 too; blocks of 2 need [4, 3]
  EXPECT_TRUE(validate_quant_params(q, &s, "t").ok());
  q.block_size = 2;
  expect_bad(q, "scale_shape: [4,2] does not fit the tensor [4,6] in blocks of 2 along axis 1", &s);
  q = per_block(4, 6, 4);
  q.zero_point[0] = 9;
  expect_bad(q, "zero_point: zero_point[0] = 9 is outside int4's [-8, 7]", &s);
  q = per_block(4, 6, 4);
  q.granularity = static_cast<QuantGranularity>(7);
  expect_bad(q, "granularity", &s);
}

// x [4, 6] float -> QuantizeLinear -> q int8 -> DequantizeLinear -> y; w an int4 constant and
// wa an int8 constant, not read by any layer, carry per-block / per-axis parameters.
std::vector<uint8_t> qdq_plan(const QuantParams& q_on_q, const QuantParams& q_on_w, const QuantParams& q_on_wa) {
  testing::TinyGraph t;
  const ir::ValueId x = t.input("x", {4, 6});
  Tensor s(DataType::kFloat32, Shape{});
  s.data<float>()[0] = 0.05f;
  Tensor zp(DataType::kInt8, Shape{});
  zp.data<int8_t>()[0] = -3;
  const ir::ValueId sv = t.constant("s", s);
  const ir::ValueId zv = t.constant("zp", zp);
  const ir::ValueId q = t.node(ir::OpKind::kQuantizeLinear, "quant", {x, sv, zv}, {4, 6});
  t.g.value(q).dtype = DataType::kInt8;
  const ir::ValueId y = t.node(ir::OpKind::kDequantizeLinear, "dequant", {q, sv, zv}, {4, 6});
  t.g.outputs = {y};
  t.constant("w", Tensor(DataType::kInt4, Shape{4, 6}));
  t.constant("wa", Tensor(DataType::kInt8, Shape{4, 6}));
  BuilderConfig c;
  c.target = TargetDevice::kCpu;
  c.opt_level = 0;
  auto bytes = build_from_graph(t.g, c);
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  if (!bytes.ok()) return {};
  // Set on the plan's graph (the writer trusts its input, so malformed parameters reach the file).
  auto p = plan::read_plan(bytes->data(), bytes->size());
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  if (!p.ok()) return {};
  auto set = [&](const std::string& name, const QuantParams& qp, DataType dt, Shape shape) {
    ir::ValueId v = p->graph.find_value(name);
    if (v == ir::kNoValue) {
      v = p->graph.add_value(name, dt);
      p->graph.value(v).shape = testing::sym(shape);
      p->graph.value(v).constant = std::make_shared<Tensor>(Tensor(dt, shape));
    }
    p->graph.value(v).dtype = dt;
    p->graph.value(v).quant = qp;
  };
  set("quant_out", q_on_q, DataType::kInt8, {4, 6});
  set("w", q_on_w, q_on_w.type, {4, 6});
  set("wa", q_on_wa, DataType::kInt8, {4, 6});  // the dtype stays int8 (a mismatch is a reader error)
  return plan::write_plan(*p);
}

const ir::Value& value_named(const plan::Plan& p, const std::string& name) {
  return p.graph.value(p.graph.find_value(name));
}

TEST(QuantParams, PlanRoundTripPerTensorPerAxisPerBlock) {
  const auto bytes = qdq_plan(per_tensor(), per_block(4, 6, 4), per_axis(0, 4));
  ASSERT_FALSE(bytes.empty());
  auto p = plan::read_plan(bytes.data(), bytes.size());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_TRUE(value_named(*p, "quant_out").quant.has_value());
  EXPECT_EQ(*value_named(*p, "quant_out").quant, per_tensor());
  EXPECT_EQ(*value_named(*p, "w").quant, per_block(4, 6, 4));
  EXPECT_EQ(*value_named(*p, "wa").quant, per_axis(0, 4));
  EXPECT_FALSE(value_named(*p, "x").quant.has_value());
  EXPECT_EQ(plan::write_plan(*p), bytes);  // bit-exact
  // float8 with saturate off survives too.
  QuantParams f8 = per_tensor(DataType::kFloat8E5M2);
  f8.zero_point = {0};
  f8.saturate = false;
  auto p2 = plan::read_plan(bytes.data(), bytes.size());
  ASSERT_TRUE(p2.ok());
  p2->graph.value(p2->graph.find_value("wa")).dtype = DataType::kFloat8E5M2;
  p2->graph.value(p2->graph.find_value("wa")).constant =
      std::make_shared<Tensor>(Tensor(DataType::kFloat8E5M2, Shape{4, 6}));
  p2->graph.value(p2->graph.find_value("wa")).quant = f8;
  const auto b2 = plan::write_plan(*p2);
  auto back = plan::read_plan(b2.data(), b2.size());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*value_named(*back, "wa").quant, f8);
}

// The writer trusts its input, so a malformed QuantParams written on purpose reaches the reader,
// which refuses it naming the field and the value.
TEST(QuantParams, ReaderRefusesMalformedFields) {
  struct Case {
    const char* what;
    QuantParams q;
    std::string field;
  };
  std::vector<Case> cases;
  QuantParams q = per_axis(0, 4);
  q.scale[2] = -1.f;
  cases.push_back({"negative scale", q, "scale[2]"});
  q = per_axis(0, 5);
  cases.push_back({"axis dim mismatch", q, "has 4 along axis 0"});
  q = per_axis(0, 4);
  q.zero_point = {0, 0, 300, 0};
  cases.push_back({"zero point range", q, "zero_point[2] = 300"});
  q = per_axis(0, 4);
  q.granularity = static_cast<QuantGranularity>(5);
  cases.push_back({"granularity code", q, "value.quant.granularity"});
  q = per_axis(0, 4);
  q.type = DataType::kUInt8;  // the value's dtype stays int8
  cases.push_back({"type vs dtype", q, "quantized type uint8, but the value's dtype is int8"});
  q = per_axis(0, 4);
  q.type = DataType::kFloat32;
  cases.push_back({"not a quantized type", q, "is not a quantized type"});
  q = per_block(4, 6, 4);
  q.type = DataType::kInt8;
  q.zero_point.clear();
  q.scale_shape = {4, 3};
  q.scale.resize(12, 1.f);
  cases.push_back({"block shape", q, "in blocks of 4 along axis 1"});
  for (const Case& c : cases) {
    const auto bytes = qdq_plan(per_tensor(), per_block(4, 6, 4), c.q);
    ASSERT_FALSE(bytes.empty()) << c.what;
    auto p = plan::read_plan(bytes.data(), bytes.size());
    ASSERT_FALSE(p.ok()) << c.what;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidPlan) << c.what;
    EXPECT_NE(p.status().message().find(c.field), std::string::npos) << c.what << ": " << p.status().message();
    EXPECT_NE(p.status().message().find("'wa'"), std::string::npos) << c.what << ": " << p.status().message();
  }
  // A saturate byte other than 0/1: patch it in the bytes of a valid plan (it is the last byte of
  // the value's parameters; find the per-tensor record of quant_out by its scale and zero point).
  auto bytes = qdq_plan(per_tensor(), per_block(4, 6, 4), per_axis(0, 4));
  std::vector<uint8_t> tail;  // f32 0.05, u32 1, i32 -3, u8 1
  auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) tail.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  float f = 0.05f;
  uint32_t fb;
  std::memcpy(&fb, &f, 4);
  put(fb, 4);
  put(1, 4);
  put(static_cast<uint32_t>(-3), 4);
  put(1, 1);
  auto at = std::search(bytes.begin(), bytes.end(), tail.begin(), tail.end());
  ASSERT_NE(at, bytes.end());
  *(at + static_cast<std::ptrdiff_t>(tail.size()) - 1) = 7;
  testing::reseal(bytes);
  auto p = plan::read_plan(bytes.data(), bytes.size());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("value.quant.saturate"), std::string::npos) << p.status().message();
}

// kiln inspect prints each layer's tensors with their quantization parameters (text) and as a
// "quant" object (JSON), and each layer's decided precision.
TEST(QuantParams, InspectShowsThem) {
  const std::string dir = testing::make_temp_dir("quant");
  ASSERT_FALSE(dir.empty());
  const auto bytes = qdq_plan(per_axis(1, 6), per_block(4, 6, 4), per_axis(0, 4));
  ASSERT_FALSE(bytes.empty());
  const std::string path = dir + "/q.plan";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  std::string out;
  ASSERT_EQ(testing::run_kiln("inspect " + path, dir, &out), 0) << out;
  EXPECT_NE(out.find("quant_out int8 [4,6] quant int8 per_axis axis=1 scale[6] 0.01..0.06"), std::string::npos) << out;
  EXPECT_NE(out.find("precision fp32"), std::string::npos) << out;
  ASSERT_EQ(testing::run_kiln("inspect " + path + " --json", dir, &out), 0) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  const auto& qj = j["layers"][0]["outputs"][0]["quant"];
  EXPECT_EQ(qj["type"], "int8");
  EXPECT_EQ(qj["granularity"], "per_axis");
  EXPECT_EQ(qj["axis"], 1);
  EXPECT_EQ(qj["scale_shape"], nlohmann::json::array({6}));
  ASSERT_EQ(qj["scale"].size(), 6u);
  EXPECT_FLOAT_EQ(qj["scale"][5].get<float>(), 0.06f);
  EXPECT_TRUE(j["layers"][1]["inputs"][0].contains("quant"));
  EXPECT_FALSE(j["layers"][0]["inputs"][0].contains("quant"));  // x is plain float32
  EXPECT_EQ(j["layers"][0]["precision"], "fp32");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln
