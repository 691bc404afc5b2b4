// Seeing why a quantized plan is what it is, and how accurate (issue 12 items 7 and 8,
// docs/decisions/0062): the build's precision summary and inspect's unfused Q/DQ pairs (each
// blocking rule read back from the plan), `kiln compare --per-layer` naming the first layer a
// spoiled calibration scale breaks, and the accuracy budget (`--max-error`) keeping the layer an
// outlier activation ruins float.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/npy.h"
#include "io/npz.h"
#include "kiln/quantize.h"
#include "plan/onnx_test_models.h"
#include "plan/plan_test_util.h"

namespace kiln {
namespace {

using testing::OnnxModel;

void set_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

// x [B, 32] -> fc0 (Gemm [32, 32], transB) -> Relu -> fc1 (Gemm [32, 32], transB) -> h1
//   -> fc2 (MatMul [32, 16]) -> y [B, 16];  B = `batch` (0: dynamic "batch").
// With `outlier`, fc1's bias puts 1000 in channel 0 of h1 and fc2 ignores that channel (row 0 of
// its weight is 0): min-max INT8 of h1 then has a scale of ~1000/127 and rounds every other
// channel (|h1| of a few units) to 0 or one step, so fc2's INT8 output is ruined while FP32 is not.
OnnxModel three_layer_mlp(bool outlier, int64_t batch = 0) {
  OnnxModel m;
  const testing::OnnxDim b = batch ? testing::OnnxDim(batch) : testing::OnnxDim(std::string("batch"));
  m.input("x", testing::kF32, {b, int64_t{32}});
  auto weights = [](size_t n, int salt, float amp) {
    std::vector<float> w(n);
    for (size_t i = 0; i < n; ++i)
      w[i] = amp * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(salt));
    return w;
  };
  m.initializer("W0", {32, 32}, weights(32 * 32, 1, 0.3f));
  m.initializer("W1", {32, 32}, weights(32 * 32, 2, 0.3f));
  std::vector<float> b1(32, 0.f);
  if (outlier) b1[0] = 1000.f;
  m.initializer("b1", {32}, b1);
  std::vector<float> w2 = weights(32 * 16, 3, 0.3f);
  if (outlier)
    for (int j = 0; j < 16; ++j) w2[j] = 0.f;  // row 0 of W2 [32, 16]
  m.initializer("W2", {32, 16}, w2);
  set_int(m.node("Gemm", {"x", "W0"}, {"h0"}, "fc0"), "transB", 1);
  m.node("Relu", {"h0"}, {"r0"}, "relu0");
  set_int(m.node("Gemm", {"r0", "W1", "b1"}, {"h1"}, "fc1"), "transB", 1);
  m.node("MatMul", {"h1", "W2"}, {"y"}, "fc2");
  m.output("y", testing::kF32, {b, int64_t{16}});
  return m;
}

Tensor mlp_samples(int64_t n) {
  Tensor t(DataType::kFloat32, {n, 32});
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = 2.f * std::sin(0.71f * static_cast<float>(i) + 0.13f * static_cast<float>(i % 5));
  return t;
}

class QuantDebug : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("quant_debug");
    ASSERT_FALSE(dir_.empty());
    std::filesystem::create_directories(dir_ + "/calib");
    ASSERT_TRUE(io::write_npy(dir_ + "/calib/x.npy", mlp_samples(40)).ok());
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  int kiln(const std::string& args, std::string* out) { return testing::run_kiln(args, dir_, out); }
  void expect_error(const std::string& args, const std::string& part) {
    std::string out;
    EXPECT_EQ(kiln(args, &out), 2) << out;
    EXPECT_NE(out.find(part), std::string::npos) << "output: " << out << "\nmissing: " << part;
    EXPECT_EQ(out.find("terminate called"), std::string::npos) << out;
  }
  std::string dir_;
};

void expect_has(const std::string& out, const std::string& part) {
  EXPECT_NE(out.find(part), std::string::npos) << "output: " << out << "\nmissing: " << part;
}

// Item 7: every Conv/Gemm/MatMul with Q/DQ that did not become an 8-bit layer carries the rule that
// blocked it; build's one-line summary counts them by rule, inspect lists each pair.
TEST_F(QuantDebug, BuildSummaryAndInspectNameTheRuleThatBlockedEachPair) {
  std::string out;
  // ONNX Runtime-style Q/DQ CNN + MLP: the Gemm and the MatMul fuse, the Conv (C = 3) keeps its Q/DQ.
  const std::string ort = testing::ort_qdq_cnn_mlp_model().save(dir_ + "/ort.onnx");
  ASSERT_EQ(kiln("build " + ort + " -o " + dir_ + "/ort.plan --device cpu --shapes x:2x3x8x8 --int8", &out), 0) << out;
  expect_has(out, "quantization: 2 layers INT8, 0 FP8, 1 FP32 (reasons: 1 C or K not a multiple of 4 (cuDNN INT8 NHWC))");
  ASSERT_EQ(kiln("inspect " + dir_ + "/ort.plan", &out), 0) << out;
  expect_has(out, "Unfused Q/DQ pairs (1):");
  expect_has(out, "x_dq_QuantizeLinear -> x_dq_DequantizeLinear, W1_DequantizeLinear -> conv1 (FusedConv): C or K not "
                  "a multiple of 4 (cuDNN INT8 NHWC)");
  expect_has(out, "C or K not a multiple of 4 (cuDNN INT8 NHWC) (C = 3, K = 16)");
  ASSERT_EQ(kiln("inspect " + dir_ + "/ort.plan --json", &out), 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  int unfused = 0;
  for (const auto& l : j["layers"])
    if (l.contains("unfused_qdq")) {
      ++unfused;
      EXPECT_EQ(l["name"], "conv1");
      EXPECT_EQ(l["unfused_qdq"]["type"], "int8");
    }
  EXPECT_EQ(unfused, 1);
  EXPECT_EQ(j["quantization_summary"].get<std::string>().rfind("2 layers INT8, 0 FP8, 1 FP32", 0), 0u);

  // The same model with a non-zero zero point on W3: the MatMul now stays float, and says why.
  OnnxModel zp = testing::ort_qdq_cnn_mlp_model();
  for (auto& t : *zp.proto().mutable_graph()->mutable_initializer())
    if (t.name() == "W3_zero_point") t.set_int32_data(5, 3);
  ASSERT_EQ(kiln("build " + zp.save(dir_ + "/zp.onnx") + " -o " + dir_ + "/zp.plan --device cpu --shapes x:2x3x8x8 --int8",
                 &out), 0) << out;
  expect_has(out, "quantization: 1 layer INT8, 0 FP8, 2 FP32 (reasons: ");
  expect_has(out, "1 non-zero weight zero point");
  ASSERT_EQ(kiln("inspect " + dir_ + "/zp.plan", &out), 0) << out;
  expect_has(out, "W3_DequantizeLinear -> fc2 (");
  expect_has(out, "non-zero weight zero point (zero point 3 in DQ 'W3_DequantizeLinear')");

  // Implicit quantization of a small MLP (K = 4, N = 8 and 3): neither linear layer has 8-bit
  // GEMM alignment.
  const std::string mlp = testing::mlp_model().save(dir_ + "/mlp.onnx");
  Tensor x(DataType::kFloat32, {16, 4});
  for (int i = 0; i < 64; ++i) x.data<float>()[i] = static_cast<float>((i * 29) % 41 - 20) / 10.f;
  std::filesystem::create_directories(dir_ + "/calib4");
  ASSERT_TRUE(io::write_npy(dir_ + "/calib4/x.npy", x).ok());
  ASSERT_EQ(kiln("build " + mlp + " -o " + dir_ + "/mlp.plan --device cpu --shapes x:2x4 --int8 --calib " + dir_ +
                     "/calib4", &out), 0) << out;
  expect_has(out, "quantization: 0 layers INT8, 0 FP8, 2 FP32 (reasons: 2 K or N not a multiple of 16)");
  ASSERT_EQ(kiln("inspect " + dir_ + "/mlp.plan", &out), 0) << out;
  expect_has(out, "-> fc1 (");
  expect_has(out, "K or N not a multiple of 16 (K = 4, N = 8)");
  expect_has(out, "K or N not a multiple of 16 (K = 8, N = 3)");

  // A float build prints no quantization line.
  ASSERT_EQ(kiln("build " + mlp + " -o " + dir_ + "/f.plan --device cpu --shapes x:2x4", &out), 0) << out;
  EXPECT_EQ(out.find("quantization:"), std::string::npos) << out;
}

// Item 8, per layer: a calibration cache whose scale for h1 (fc2's input) is 1000x too small
// saturates that activation; compare --per-layer passes fc0 and fc1 and names fc2 with its ONNX nodes.
TEST_F(QuantDebug, PerLayerCompareNamesTheLayerASpoiledScaleBreaks) {
  std::string out;
  const std::string model = three_layer_mlp(false).save(dir_ + "/mlp3.onnx");
  const std::string cache = dir_ + "/mlp3.calib";
  ASSERT_EQ(kiln("build " + model + " -o " + dir_ + "/good.plan --device cpu --shapes x:8x32 --int8 --calib " + dir_ +
                     "/calib --calib-cache " + cache, &out), 0) << out;
  expect_has(out, "quantization: 3 layers INT8, 0 FP8, 0 FP32");
  const std::string input = dir_ + "/x.npy";
  ASSERT_TRUE(io::write_npy(input, mlp_samples(8)).ok());
  ASSERT_EQ(kiln("compare " + dir_ + "/good.plan " + model + " --input x=" + input + " --atol 1 --rtol 1 --per-layer",
                 &out), 0) << out;
  expect_has(out, "every compared layer within cosine >= 0.99");
  expect_has(out, "] fc2 (QuantLinear) -> y");

  // Spoil h1's scale in the cache and rebuild from it (no data: the cache is used as is).
  std::ifstream in(cache);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const std::regex line(R"(\nh1: ([0-9.eE+-]+))");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, line)) << text;
  const double scale = std::stod(m[1]);
  char spoiled[64];
  std::snprintf(spoiled, sizeof spoiled, "\nh1: %.9g", scale / 1000);
  text.replace(static_cast<size_t>(m.position(0)), static_cast<size_t>(m.length(0)), spoiled);
  const std::string bad_cache = dir_ + "/bad.calib";
  std::ofstream(bad_cache) << text;
  ASSERT_EQ(kiln("build " + model + " -o " + dir_ + "/bad.plan --device cpu --shapes x:8x32 --int8 --calib-cache " +
                     bad_cache, &out), 0) << out;
  EXPECT_EQ(kiln("compare " + dir_ + "/bad.plan " + model + " --input x=" + input + " --atol 1e9 --rtol 1 --per-layer --json " +
                     dir_ + "/cmp.json", &out), 1) << out;
  expect_has(out, "first layer outside cosine >= 0.99");
  expect_has(out, "fc2 (QuantLinear), output y, ONNX nodes [fc2, h1/DequantizeLinear, W2/DequantizeLinear]");
  std::ifstream jf(dir_ + "/cmp.json");
  const nlohmann::json j = nlohmann::json::parse(jf);
  const auto& layers = j["per_layer"]["layers"];
  ASSERT_EQ(layers.size(), 3u) << j.dump(1);
  EXPECT_EQ(layers[0]["layer"], "fc0");
  EXPECT_EQ(layers[1]["layer"], "fc1");
  EXPECT_TRUE(layers[0]["ok"].get<bool>());
  EXPECT_TRUE(layers[1]["ok"].get<bool>());
  EXPECT_GT(layers[1]["cosine"].get<double>(), 0.999);
  EXPECT_LT(layers[2]["cosine"].get<double>(), 0.99);
  EXPECT_EQ(j["per_layer"]["first_failing"]["layer"], "fc2");
  // The same verdict under a normalized-error tolerance; bad tolerances are usage errors.
  EXPECT_EQ(kiln("compare " + dir_ + "/bad.plan " + model + " --input x=" + input +
                     " --atol 1e9 --rtol 1 --per-layer --tolerance rel=0.05", &out), 1) << out;
  expect_has(out, "first layer outside max|d|/max|ref| <= 0.05");
  expect_has(out, "fc2 (QuantLinear)");
  expect_error("compare " + dir_ + "/bad.plan " + model + " --per-layer --tolerance cos=1.5", "C must be in (0, 1]");
  expect_error("compare " + dir_ + "/bad.plan " + model + " --per-layer --tolerance abs=1", "expected cos=C");
}

// Item 8, budget: plain INT8 of the outlier MLP misses 1 - cos <= 0.01; --max-error keeps fc2 (the
// layer that reads the outlier activation) float and meets it, the other two stay INT8.
TEST_F(QuantDebug, MaxErrorKeepsTheOutlierLayerFloatAndMeetsTheBudget) {
  const std::string model = three_layer_mlp(true).save(dir_ + "/outlier.onnx");
  QuantizeConfig c;
  c.data = dir_ + "/calib";
  c.max_error = 0.01;
  QuantizeReport rep;
  auto q = quantize_onnx(model, c, &rep);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_GT(rep.error_all_quantized, 0.01);
  EXPECT_LE(rep.error, 0.01);
  EXPECT_GE(rep.error, 0.0);
  EXPECT_EQ(rep.held_out_samples, 8);  // 40 samples, 32 calibrate
  EXPECT_EQ(rep.samples, 32);
  ASSERT_EQ(rep.layers.size(), 3u);
  for (const LayerChoice& l : rep.layers) EXPECT_EQ(l.quantized, l.node != "fc2") << l.node;
  EXPECT_GT(rep.layers[2].sensitivity, rep.layers[0].sensitivity);
  EXPECT_GT(rep.layers[2].sensitivity, rep.layers[1].sensitivity);
  EXPECT_EQ(rep.quantized, (std::vector<std::string>{"fc0", "fc1"}));

  // The CLI prints the choice, and the plan is the chosen one.
  std::string out;
  ASSERT_EQ(kiln("build " + model + " -o " + dir_ + "/b.plan --device cpu --shapes x:8x32 --int8 --calib " + dir_ +
                     "/calib --max-error 0.01", &out), 0) << out;
  expect_has(out, "max-error 0.01 (1 - cosine vs FP32, worst output, 8 held-out samples)");
  expect_has(out, "kept float: fc2 (sensitivity");
  expect_has(out, "layer precisions: fc0 int8, fc1 int8, fc2 float");
  expect_has(out, "quantization: 2 layers INT8, 0 FP8, 1 FP32 (reasons: 1 no Q/DQ at the layer's inputs)");
  // Without the outlier, every layer INT8 already meets the budget: nothing is kept float.
  QuantizeReport rl;
  auto q2 = quantize_onnx(three_layer_mlp(false).save(dir_ + "/mlp3.onnx"), c, &rl);
  ASSERT_TRUE(q2.ok()) << q2.status().to_string();
  EXPECT_LE(rl.error_all_quantized, 0.01);
  EXPECT_EQ(rl.error, rl.error_all_quantized);
  EXPECT_EQ(rl.quantized.size(), 3u);
  for (const LayerChoice& l : rl.layers) EXPECT_TRUE(l.quantized) << l.node;
}

TEST_F(QuantDebug, MaxErrorBadInputIsAClearError) {
  const std::string model = three_layer_mlp(true).save(dir_ + "/outlier.onnx");
  const std::string base = "build " + model + " -o " + dir_ + "/p.plan --device cpu --shapes x:8x32 --int8 ";
  expect_error(base + "--calib-cache " + dir_ + "/c.calib --max-error 0.01", "--max-error needs --calib DATA");
  expect_error(base + "--calib " + dir_ + "/calib --max-error 0", "give a value in (0, 1)");
  expect_error(base + "--calib " + dir_ + "/calib --max-error -0.5", "give a value in (0, 1)");
  expect_error(base + "--calib " + dir_ + "/calib --max-error 1", "give a value in (0, 1)");
  expect_error(base + "--calib " + dir_ + "/calib --max-error 0.01 --calib-split 1", "--calib-split 1");
  expect_error(base + "--calib " + dir_ + "/calib --weight-scales per-row", "--weight-scales 'per-row': expected per-channel or per-tensor");
  // A fixed batch of 8: 40 samples split 0.9 leave 4 held out, less than one batch.
  const std::string fixed = three_layer_mlp(true, 8).save(dir_ + "/fixed.onnx");
  expect_error("build " + fixed + " -o " + dir_ + "/p.plan --device cpu --int8 --calib " + dir_ +
                   "/calib --max-error 0.01 --calib-split 0.9",
               "36 to calibrate and 4 held out; each part needs at least 8 (the model's fixed batch)");
  // The library refuses the same.
  QuantizeConfig c;
  c.max_error = 0.01;
  c.cache = dir_ + "/none.calib";
  auto r = quantize_onnx(model, c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("needs calibration data"), std::string::npos) << r.status().to_string();
  c.data = dir_ + "/calib";
  c.max_error = 1.5;
  r = quantize_onnx(model, c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("(0, 1)"), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace kiln
