// Post-training quantization (kiln/quantize.h, docs/decisions/0050): the Q/DQ model written,
// its scales against hand computation from the spec's formulas, the calibration cache, the
// builder's --int8/--fp8 path, and the errors for data, caches and specs that do not fit.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "builder/build_from_graph.h"
#include "io/npy.h"
#include "io/npz.h"
#include "kiln/builder.h"
#include "kiln/quantize.h"
#include "kiln/runtime.h"
#include "onnx/importer.h"
#include "backends/cpu/interpreter.h"
#include "plan/onnx_test_models.h"
#include "plan/quant_test_util.h"

namespace kiln {
namespace {

using testing::OnnxModel;

std::vector<float> ramp(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

using testing::mlp_model;

Tensor samples(int64_t n, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  Tensor t(DataType::kFloat32, {n, 4});
  const std::vector<float> v = ramp(static_cast<size_t>(n * 4), lo, hi, seed);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// A CPU plan of `onnx_path` (built with `c`; x from [1, 4] to [64, 4]) run on x.
Tensor run_cpu(const std::string& onnx_path, BuilderConfig c, const Tensor& x) {
  return testing::run_cpu_plan(onnx_path, std::move(c), x, nullptr, {1, 4}, {64, 4});
}

class Quantize : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("quantize");
    ASSERT_FALSE(dir_.empty());
    model_ = mlp_model().save(dir_ + "/mlp.onnx");
    data_ = dir_ + "/calib.npz";
    ASSERT_TRUE(io::write_npz(data_, {{"x", samples(40, 7)}}).ok());
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  std::string dir_, model_, data_;
};

const onnx::TensorProto* find_init(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

TEST_F(Quantize, WritesQdqWithMinMaxScalesAndPerChannelInt8Weights) {
  QuantizeConfig c;
  c.data = data_;
  c.calibrator = "minmax";
  QuantizeReport rep;
  auto bytes = quantize_onnx(model_, c, &rep);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  EXPECT_EQ(rep.quantized, (std::vector<std::string>{"fc1", "fc2"}));
  EXPECT_EQ(rep.batches, 5);  // 40 samples, dynamic batch: 8 per batch
  EXPECT_EQ(rep.samples, 40);
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(*bytes));
  int q = 0, dq = 0;
  for (const auto& n : m.graph().node()) {
    q += n.op_type() == "QuantizeLinear";
    dq += n.op_type() == "DequantizeLinear";
  }
  EXPECT_EQ(q, 2);   // x and r
  EXPECT_EQ(dq, 4);  // x, r, W1, W2
  // x's scale: max |x| over the samples / 127 (min-max).
  const Tensor x = samples(40, 7);
  float amax = 0;
  for (int64_t i = 0; i < x.numel(); ++i) amax = std::max(amax, std::fabs(x.data<float>()[i]));
  ASSERT_TRUE(rep.activation_scales.count("x"));
  EXPECT_FLOAT_EQ(rep.activation_scales["x"], amax / 127.f);
  const onnx::TensorProto* xs = find_init(m, "x_scale");
  ASSERT_NE(xs, nullptr);
  float stored = 0;
  std::memcpy(&stored, xs->raw_data().data(), 4);
  EXPECT_FLOAT_EQ(stored, amax / 127.f);
  // W1 [8, 4] with transB: one scale per output row; q = round(W / s) within [-127, 127],
  // the row's largest magnitude mapping to +-127.
  const onnx::TensorProto* wq = find_init(m, "W1_quantized");
  const onnx::TensorProto* ws = find_init(m, "W1_scale");
  ASSERT_NE(wq, nullptr);
  ASSERT_NE(ws, nullptr);
  EXPECT_EQ(wq->data_type(), onnx::TensorProto::INT8);
  ASSERT_EQ(ws->dims_size(), 1);
  EXPECT_EQ(ws->dims(0), 8);
  EXPECT_EQ(find_init(m, "W1"), nullptr);  // the float weight is gone
  std::vector<float> w1(32);
  for (int i = 0; i < 32; ++i) w1[i] = mlp_model().proto().graph().initializer(0).float_data(i);
  for (int r = 0; r < 8; ++r) {
    float m_abs = 0;
    for (int k = 0; k < 4; ++k) m_abs = std::max(m_abs, std::fabs(w1[r * 4 + k]));
    float s = 0;
    std::memcpy(&s, ws->raw_data().data() + 4 * r, 4);
    EXPECT_FLOAT_EQ(s, m_abs / 127.f) << "row " << r;
    bool has_extreme = false;
    for (int k = 0; k < 4; ++k) {
      const int8_t v = static_cast<int8_t>(wq->raw_data()[r * 4 + k]);
      EXPECT_EQ(v, static_cast<int8_t>(std::nearbyint(w1[r * 4 + k] / s))) << r << "," << k;
      has_extreme |= std::abs(v) == 127;
    }
    EXPECT_TRUE(has_extreme) << "row " << r;
  }
  // W2 [8, 3] of MatMul: per output column (axis 1).
  const onnx::TensorProto* w2s = find_init(m, "W2_scale");
  ASSERT_NE(w2s, nullptr);
  EXPECT_EQ(w2s->dims(0), 3);
  for (const auto& n : m.graph().node())
    if (n.op_type() == "DequantizeLinear" && n.input(0) == "W2_quantized") {
      ASSERT_EQ(n.attribute_size(), 1);
      EXPECT_EQ(n.attribute(0).i(), 1);
    }
}

// The Q/DQ model runs on the CPU reference; the first layer's output matches a hand computation
// of DQ(Q(x)) . DQ(Q(W1))^T + b1 (ONNX QuantizeLinear: saturate(round_half_even(x / s))).
TEST_F(Quantize, QdqModelComputesTheFakeQuantizedProduct) {
  QuantizeConfig c;
  c.data = data_;
  c.calibrator = "minmax";
  QuantizeReport rep;
  auto bytes = quantize_onnx(model_, c, &rep);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  // A model that ends after fc1 (its output h) shows the Gemm alone.
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(*bytes));
  auto* out = m.mutable_graph()->mutable_output(0);
  out->set_name("h");
  out->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(8);
  const std::string qpath = dir_ + "/fc1.qdq.onnx";
  {
    std::ofstream f(qpath, std::ios::binary);
    f << m.SerializeAsString();
  }
  const Tensor x = samples(5, 99, -3.f, 3.f);  // beyond the calibrated range: Q saturates
  BuilderConfig bc;
  bc.target = TargetDevice::kCpu;
  OptimizationProfile p;
  ASSERT_TRUE(p.set_dimensions("x", {1, 4}, {5, 4}, {8, 4}).ok());
  bc.profiles = {p};
  auto plan = Builder::build(qpath, bc);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto e = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(e.ok());
  auto ctx = (*e)->create_execution_context();
  ASSERT_TRUE(ctx->set_input("x", x).ok());
  ASSERT_TRUE(ctx->execute().ok());
  auto h = ctx->output("h");
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  const float sx = rep.activation_scales.at("x");
  std::vector<float> w1(32), b1(8);
  for (int i = 0; i < 32; ++i) w1[i] = mlp_model().proto().graph().initializer(0).float_data(i);
  for (int i = 0; i < 8; ++i) b1[i] = mlp_model().proto().graph().initializer(1).float_data(i);
  for (int n = 0; n < 5; ++n)
    for (int r = 0; r < 8; ++r) {
      float m_abs = 0;
      for (int k = 0; k < 4; ++k) m_abs = std::max(m_abs, std::fabs(w1[r * 4 + k]));
      const float sw = m_abs / 127.f;
      double acc = 0;
      for (int k = 0; k < 4; ++k) {
        const float qx = std::clamp(std::nearbyint(x.data<float>()[n * 4 + k] / sx), -128.f, 127.f);
        const float qw = std::nearbyint(w1[r * 4 + k] / sw);
        acc += static_cast<double>(qx * sx) * static_cast<double>(qw * sw);
      }
      EXPECT_NEAR(h->data<float>()[n * 8 + r], acc + b1[r], 1e-5) << n << "," << r;
    }
}

TEST_F(Quantize, BuilderInt8MatchesTheWrittenQdqModelAndStaysNearFloat) {
  QuantizeConfig c;
  c.data = data_;
  c.calibrator = "entropy";
  auto bytes = quantize_onnx(model_, c);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  const std::string qpath = dir_ + "/mlp.qdq.onnx";
  {
    std::ofstream f(qpath, std::ios::binary);
    f << *bytes;
  }
  const Tensor x = samples(6, 123);
  BuilderConfig q;
  q.int8 = true;
  q.calibration.data = data_;
  q.calibration.calibrator = "entropy";
  const Tensor y_calib = run_cpu(model_, q, x);
  BuilderConfig from_file;
  from_file.int8 = true;  // the file has Q/DQ: no calibration needed
  const Tensor y_file = run_cpu(qpath, from_file, x);
  const Tensor y_float = run_cpu(model_, BuilderConfig{}, x);
  ASSERT_TRUE(y_calib.defined() && y_file.defined() && y_float.defined());
  EXPECT_TRUE(y_calib.bit_equal(y_file));
  double num = 0, den = 0;
  bool differs = false;
  for (int64_t i = 0; i < y_float.numel(); ++i) {
    const double d = y_calib.data<float>()[i] - y_float.data<float>()[i];
    num += d * d;
    den += static_cast<double>(y_float.data<float>()[i]) * y_float.data<float>()[i];
    differs |= d != 0;
  }
  EXPECT_TRUE(differs);                     // quantization happened
  EXPECT_LT(std::sqrt(num / den), 0.05);    // and kept the answer (8-bit: ~1% here)
}

TEST_F(Quantize, CacheIsWrittenReusedAndRefusedForAnotherModel) {
  const std::string cache = dir_ + "/calib.cache";
  QuantizeConfig c;
  c.data = data_;
  c.cache = cache;
  c.calibrator = "percentile:99.9";
  auto first = quantize_onnx(model_, c);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  std::ifstream f(cache);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("kiln-calibration-cache 1"), std::string::npos) << text;
  EXPECT_NE(text.find("calibrator: percentile:99.9"), std::string::npos) << text;
  EXPECT_NE(text.find("format: int8"), std::string::npos) << text;
  EXPECT_NE(text.find("\nx: "), std::string::npos) << text;
  EXPECT_NE(text.find("\nr: "), std::string::npos) << text;
  // The cache alone (no data) gives the same model.
  QuantizeConfig again;
  again.cache = cache;
  again.calibrator = "percentile:99.9";
  QuantizeReport rep;
  auto second = quantize_onnx(model_, again, &rep);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_TRUE(rep.from_cache);
  EXPECT_EQ(*first, *second);
  // Another calibrator and no data: refused with the reason.
  again.calibrator = "minmax";
  auto other_cal = quantize_onnx(model_, again);
  ASSERT_FALSE(other_cal.ok());
  EXPECT_NE(other_cal.status().message().find("calibrator percentile:99.9"), std::string::npos)
      << other_cal.status().message();
  // Another model: refused, and the cache is left as it was.
  OnnxModel other = mlp_model();
  other.initializer("unused", {1}, {1.f});
  const std::string other_path = other.save(dir_ + "/other.onnx");
  QuantizeConfig oc;
  oc.data = data_;
  oc.cache = cache;
  oc.calibrator = "percentile:99.9";
  auto refused = quantize_onnx(other_path, oc);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("made for another model"), std::string::npos) << refused.status().message();
  std::ifstream f2(cache);
  std::string text2((std::istreambuf_iterator<char>(f2)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, text2);
}

TEST_F(Quantize, DelayedScalingUsesTheAmaxHistory) {
  // Two batches of 8 with different ranges: most_recent keeps the last batch's amax, max the
  // larger one; margin 1 doubles it. Scale = amax * 2^margin / 448 for FP8... here INT8: / 127.
  Tensor x(DataType::kFloat32, {16, 4});
  for (int i = 0; i < 32; ++i) x.data<float>()[i] = (i % 2 ? -1.f : 1.f) * 4.f * (i + 1) / 32;   // amax 4
  for (int i = 32; i < 64; ++i) x.data<float>()[i] = (i % 2 ? -1.f : 1.f) * 1.f * (i - 31) / 32;  // amax 1
  const std::string data = dir_ + "/two.npz";
  ASSERT_TRUE(io::write_npz(data, {{"x", x}}).ok());
  auto scale_of = [&](const std::string& spec) {
    QuantizeConfig c;
    c.data = data;
    c.calibrator = spec;
    QuantizeReport rep;
    auto r = quantize_onnx(model_, c, &rep);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(rep.batches, 2);
    return rep.activation_scales["x"];
  };
  EXPECT_FLOAT_EQ(scale_of("delayed:16:max"), 4.f / 127.f);
  EXPECT_FLOAT_EQ(scale_of("delayed:16:most_recent"), 1.f / 127.f);
  EXPECT_FLOAT_EQ(scale_of("delayed:16:most_recent:1"), 2.f / 127.f);
  EXPECT_FLOAT_EQ(scale_of("delayed:1:max"), 1.f / 127.f);  // a history of one keeps the last batch
}

TEST_F(Quantize, Fp8NeedsOpset19AndWritesE4M3Weights) {
  QuantizeConfig c;
  c.data = data_;
  c.format = QuantFormat::kFp8E4M3;
  // Below opset 13: refused. 13..18: moved to 19 (the model here is opset 17).
  const std::string m11 = mlp_model(11).save(dir_ + "/mlp11.onnx");
  auto old = quantize_onnx(m11, c);
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(old.status().message().find("opset 19"), std::string::npos) << old.status().message();
  auto up = quantize_onnx(model_, c);
  ASSERT_TRUE(up.ok()) << up.status().to_string();
  onnx::ModelProto um;
  ASSERT_TRUE(um.ParseFromString(*up));
  EXPECT_EQ(um.opset_import(0).version(), 19);

  const std::string m19 = mlp_model(19).save(dir_ + "/mlp19.onnx");
  QuantizeReport rep;
  auto bytes = quantize_onnx(m19, c, &rep);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  EXPECT_EQ(rep.calibrator, "minmax");  // the default
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(*bytes));
  const onnx::TensorProto* wq = find_init(m, "W1_quantized");
  ASSERT_NE(wq, nullptr);
  EXPECT_EQ(wq->data_type(), 17);  // FLOAT8E4M3FN
  // Each row's largest magnitude maps to E4M3's largest finite value, 448 = 0x7E (+) / 0xFE (-).
  for (int r = 0; r < 8; ++r) {
    bool has_max = false;
    for (int k = 0; k < 4; ++k) {
      const uint8_t b = static_cast<uint8_t>(wq->raw_data()[r * 4 + k]);
      has_max |= (b & 0x7f) == 0x7e;
    }
    EXPECT_TRUE(has_max) << "row " << r;
  }
  // The FP8 Q/DQ model runs and stays near the float model.
  const std::string qpath = dir_ + "/mlp19.qdq.onnx";
  {
    std::ofstream f(qpath, std::ios::binary);
    f << *bytes;
  }
  const Tensor x = samples(6, 5);
  BuilderConfig fp8;
  fp8.fp8 = true;
  const Tensor y = run_cpu(qpath, fp8, x);
  const Tensor ref = run_cpu(m19, BuilderConfig{}, x);
  ASSERT_TRUE(y.defined() && ref.defined());
  double num = 0, den = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    const double d = y.data<float>()[i] - ref.data<float>()[i];
    num += d * d;
    den += static_cast<double>(ref.data<float>()[i]) * ref.data<float>()[i];
  }
  EXPECT_GT(num, 0);
  EXPECT_LT(std::sqrt(num / den), 0.1);  // E4M3 keeps 3 mantissa bits: a few % per value
}

TEST_F(Quantize, BadDataAndSpecsAreClearErrors) {
  auto err = [&](QuantizeConfig c, const std::string& part) {
    auto r = quantize_onnx(model_, c);
    ASSERT_FALSE(r.ok()) << part;
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
  };
  QuantizeConfig c;
  err(c, "needs calibration data");
  c.data = dir_ + "/missing.npz";
  err(c, "missing.npz");
  const std::string wrong_name = dir_ + "/wrong.npz";
  ASSERT_TRUE(io::write_npz(wrong_name, {{"input", samples(4, 1)}}).ok());
  c.data = wrong_name;
  err(c, "has no array for input 'x'");
  Tensor bad_dims(DataType::kFloat32, {4, 5});
  const std::string wrong_dims = dir_ + "/dims.npz";
  ASSERT_TRUE(io::write_npz(wrong_dims, {{"x", bad_dims}}).ok());
  c.data = wrong_dims;
  err(c, "has shape [4,5]");
  const std::string extra = dir_ + "/extra.npz";
  ASSERT_TRUE(io::write_npz(extra, {{"x", samples(4, 1)}, {"y", samples(4, 1)}}).ok());
  c.data = extra;
  err(c, "'y' the model has no input for");
  // A directory of .npy files works like an .npz.
  std::filesystem::create_directories(dir_ + "/npydir");
  ASSERT_TRUE(io::write_npy(dir_ + "/npydir/x.npy", samples(8, 3)).ok());
  c.data = dir_ + "/npydir";
  EXPECT_TRUE(quantize_onnx(model_, c).ok());
  c.data = data_;
  c.calibrator = "kl";
  err(c, "unknown method 'kl'");
  c.calibrator = "percentile:120";
  err(c, "(0, 100]");
  c.calibrator = "delayed:0";
  err(c, "history length");
  c.calibrator = "";
  c.cache = dir_ + "/not_a_cache";
  {
    std::ofstream f(c.cache);
    f << "hello\n";
  }
  err(c, "is not a Kiln calibration cache");
}

TEST_F(Quantize, BuilderRefusesInt8WithoutQdqOrCalibration) {
  BuilderConfig c;
  c.int8 = true;
  c.target = TargetDevice::kCpu;
  OptimizationProfile p;
  ASSERT_TRUE(p.set_dimensions("x", {1, 4}, {2, 4}, {8, 4}).ok());
  c.profiles = {p};
  auto plan = Builder::build(model_, c);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("--calib"), std::string::npos) << plan.status().message();
  c.fp8 = true;
  c.calibration.data = data_;
  auto both = Builder::build(model_, c);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("not both"), std::string::npos) << both.status().message();
}

// A model whose layers are 8-bit tensor-core sized (K, N multiples of 16):
// y = MatMul(Relu(Gemm(x [batch, 32], W1 [48, 32]^T) + b1), W2 [48, 16]) + b2.
OnnxModel mlp16_model() {
  OnnxModel m(17);
  m.input("x", onnx::TensorProto::FLOAT, {std::string("batch"), int64_t{32}});
  m.initializer("W1", {48, 32}, ramp(48 * 32, -0.3f, 0.3f, 11));
  m.initializer("b1", {48}, ramp(48, -0.1f, 0.1f, 12));
  m.initializer("W2", {48, 16}, ramp(48 * 16, -0.4f, 0.4f, 13));
  m.initializer("b2", {16}, ramp(16, -0.1f, 0.1f, 14));
  auto* g = m.node("Gemm", {"x", "W1", "b1"}, {"h"}, "fc1");
  auto* a = g->add_attribute();
  a->set_name("transB");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  m.node("Relu", {"h"}, {"r"}, "relu1");
  m.node("MatMul", {"r", "W2"}, {"p"}, "fc2");
  m.node("Add", {"p", "b2"}, {"y"}, "add2");
  m.output("y", onnx::TensorProto::FLOAT, {std::string("batch"), int64_t{16}});
  return m;
}

// DQ(Q(x)), DQ(W) -> Gemm / MatMul (+ bias Add) become QuantLinear layers whose integer
// arithmetic gives the unfused Q/DQ graph's values (up to that graph's float summation), INT8
// and FP8.
TEST_F(Quantize, QdqLinearLayersFuseAndMatchTheUnfusedGraph) {
  for (QuantFormat f : {QuantFormat::kInt8, QuantFormat::kFp8E4M3}) {
    SCOPED_TRACE(quant_format_name(f));
    const std::string model = mlp16_model().save(dir_ + "/mlp16.onnx");
    OnnxModel m19 = mlp16_model();
    m19.proto().mutable_opset_import(0)->set_version(19);
    const std::string src = f == QuantFormat::kFp8E4M3 ? m19.save(dir_ + "/mlp16_19.onnx") : model;
    Tensor xs(DataType::kFloat32, {24, 32});
    const std::vector<float> xv = ramp(24 * 32, -2.f, 2.f, 21);
    std::copy(xv.begin(), xv.end(), xs.data<float>());
    const std::string data = dir_ + "/x32.npz";
    ASSERT_TRUE(io::write_npz(data, {{"x", xs}}).ok());
    QuantizeConfig qc;
    qc.data = data;
    qc.format = f;
    auto bytes = quantize_onnx(src, qc);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    const std::string qpath = dir_ + "/mlp16.qdq.onnx";
    {
      std::ofstream o(qpath, std::ios::binary);
      o << *bytes;
    }
    Tensor x(DataType::kFloat32, {5, 32});
    const std::vector<float> v = ramp(5 * 32, -2.5f, 2.5f, 22);
    std::copy(v.begin(), v.end(), x.data<float>());
    std::vector<std::string> fused_ops, plain_ops;
    const Tensor fused = testing::run_cpu_plan(qpath, BuilderConfig{}, x, &fused_ops);
    BuilderConfig off;
    off.disabled_passes = {"fuse_qdq_linear"};
    const Tensor plain = testing::run_cpu_plan(qpath, off, x, &plain_ops);
    ASSERT_TRUE(fused.defined() && plain.defined());
    EXPECT_EQ(std::count(fused_ops.begin(), fused_ops.end(), "QuantLinear"), 2) << ::testing::PrintToString(fused_ops);
    EXPECT_EQ(std::count(fused_ops.begin(), fused_ops.end(), "QuantizeLinear"), 0);
    EXPECT_EQ(std::count(plain_ops.begin(), plain_ops.end(), "QuantLinear"), 0);
    double max_ref = 0;
    for (int64_t i = 0; i < fused.numel(); ++i)
      max_ref = std::max(max_ref, static_cast<double>(std::fabs(plain.data<float>()[i])));
    testing::expect_within_one_quantization_step(fused, plain, max_ref);
  }
}

// Per-tensor weight scales (QuantizeConfig::per_tensor_weights, `--weight-scales per-tensor`):
// y = MatMul(MatMul(x, Wa) + MatMul(x, Wb), Wc). Wa and Wb read x and share one scalar scale (the
// larger amax of the two / qmax), Wc gets its own; no DequantizeLinear of a weight has an axis, and
// the CPU plan's QuantLinear layers give the unfused Q/DQ graph's values (INT8 and FP8).
TEST_F(Quantize, PerTensorWeightScalesAreSharedByTheLayersOfOneInput) {
  OnnxModel m(19);
  m.input("x", onnx::TensorProto::FLOAT, {std::string("batch"), int64_t{32}});
  const std::vector<float> wa = ramp(32 * 16, -0.3f, 0.3f, 31), wb = ramp(32 * 16, -0.7f, 0.7f, 32),
                           wc = ramp(16 * 16, -0.2f, 0.2f, 33);
  m.initializer("Wa", {32, 16}, wa);
  m.initializer("Wb", {32, 16}, wb);
  m.initializer("Wc", {16, 16}, wc);
  m.node("MatMul", {"x", "Wa"}, {"a"}, "qa");
  m.node("MatMul", {"x", "Wb"}, {"b"}, "qb");
  m.node("Add", {"a", "b"}, {"s"}, "sum");
  m.node("MatMul", {"s", "Wc"}, {"y"}, "out");
  m.output("y", onnx::TensorProto::FLOAT, {std::string("batch"), int64_t{16}});
  const std::string model = m.save(dir_ + "/pt.onnx");
  Tensor xs(DataType::kFloat32, {16, 32});
  const std::vector<float> xv = ramp(16 * 32, -2.f, 2.f, 34);
  std::copy(xv.begin(), xv.end(), xs.data<float>());
  const std::string data = dir_ + "/pt.npz";
  ASSERT_TRUE(io::write_npz(data, {{"x", xs}}).ok());
  auto amax = [](const std::vector<float>& v) {
    float r = 0;
    for (float f : v) r = std::max(r, std::fabs(f));
    return r;
  };
  for (QuantFormat f : {QuantFormat::kInt8, QuantFormat::kFp8E4M3}) {
    SCOPED_TRACE(quant_format_name(f));
    const float qmax = f == QuantFormat::kInt8 ? 127.f : 448.f;
    QuantizeConfig qc;
    qc.data = data;
    qc.format = f;
    qc.per_tensor_weights = true;
    auto bytes = quantize_onnx(model, qc);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    onnx::ModelProto q;
    ASSERT_TRUE(q.ParseFromString(*bytes));
    auto scale_of = [&](const std::string& w) {
      const onnx::TensorProto* t = find_init(q, w + "_scale");
      EXPECT_NE(t, nullptr) << w;
      if (!t) return 0.f;
      EXPECT_EQ(t->dims_size(), 0) << w << ": a scalar scale";
      float v = 0;
      std::memcpy(&v, t->raw_data().data(), 4);
      return v;
    };
    EXPECT_FLOAT_EQ(scale_of("Wa"), std::max(amax(wa), amax(wb)) / qmax);
    EXPECT_FLOAT_EQ(scale_of("Wb"), scale_of("Wa"));
    EXPECT_FLOAT_EQ(scale_of("Wc"), amax(wc) / qmax);
    for (const auto& n : q.graph().node())
      if (n.op_type() == "DequantizeLinear" && n.input(0).rfind("W", 0) == 0) EXPECT_EQ(n.attribute_size(), 0) << n.name();
    const std::string qpath = dir_ + "/pt.qdq.onnx";
    {
      std::ofstream o(qpath, std::ios::binary);
      o << *bytes;
    }
    Tensor x(DataType::kFloat32, {5, 32});
    const std::vector<float> v = ramp(5 * 32, -2.5f, 2.5f, 35);
    std::copy(v.begin(), v.end(), x.data<float>());
    std::vector<std::string> fused_ops;
    const Tensor fused = testing::run_cpu_plan(qpath, BuilderConfig{}, x, &fused_ops, {1, 32}, {64, 32});
    BuilderConfig off;
    off.disabled_passes = {"fuse_qdq_linear"};
    const Tensor plain = testing::run_cpu_plan(qpath, off, x, nullptr, {1, 32}, {64, 32});
    ASSERT_TRUE(fused.defined() && plain.defined());
    EXPECT_GE(std::count(fused_ops.begin(), fused_ops.end(), "QuantLinear"), 2) << ::testing::PrintToString(fused_ops);
    double max_ref = 0;
    for (int64_t i = 0; i < fused.numel(); ++i)
      max_ref = std::max(max_ref, static_cast<double>(std::fabs(plain.data<float>()[i])));
    testing::expect_within_one_quantization_step(fused, plain, max_ref);
  }
}

// DQ(Q(x)), DQ(W) -> Conv (+ bias, residual Add, Relu) become QuantConv layers (docs/decisions/0078)
// whose integer arithmetic gives the unfused Q/DQ graph's values (up to that graph's float
// summation), INT8 and FP8: all three convs, one of them with the residual Add and the Relu.
TEST_F(Quantize, QdqConvLayersFuseAndMatchTheUnfusedGraph) {
  for (QuantFormat f : {QuantFormat::kInt8, QuantFormat::kFp8E4M3}) {
    SCOPED_TRACE(quant_format_name(f));
    const std::string src = testing::residual_cnn_model(f == QuantFormat::kFp8E4M3 ? 19 : 17).save(dir_ + "/cnn.onnx");
    Tensor xs(DataType::kFloat32, {12, 16, 8, 8});
    const std::vector<float> xv = ramp(static_cast<size_t>(xs.numel()), -2.f, 2.f, 41);
    std::copy(xv.begin(), xv.end(), xs.data<float>());
    const std::string data = dir_ + "/cnn.npz";
    ASSERT_TRUE(io::write_npz(data, {{"x", xs}}).ok());
    QuantizeConfig qc;
    qc.data = data;
    qc.format = f;
    auto bytes = quantize_onnx(src, qc);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    const std::string qpath = dir_ + "/cnn.qdq.onnx";
    {
      std::ofstream o(qpath, std::ios::binary);
      o << *bytes;
    }
    Tensor x(DataType::kFloat32, {2, 16, 8, 8});
    const std::vector<float> v = ramp(static_cast<size_t>(x.numel()), -2.5f, 2.5f, 42);
    std::copy(v.begin(), v.end(), x.data<float>());
    std::vector<std::string> fused_ops, plain_ops;
    BuilderConfig on;
    on.quant_conv = true;  // an INT8 Q/DQ model: QuantConv only when asked for (decision 0078 addendum)
    const Tensor fused = testing::run_cpu_plan(qpath, on, x, &fused_ops);
    BuilderConfig off;
    off.disabled_passes = {"fuse_qdq_conv"};
    const Tensor plain = testing::run_cpu_plan(qpath, off, x, &plain_ops);
    ASSERT_TRUE(fused.defined() && plain.defined());
    auto count = [](const std::vector<std::string>& ops, const char* op) { return std::count(ops.begin(), ops.end(), op); };
    EXPECT_EQ(count(fused_ops, "QuantConv"), 3) << ::testing::PrintToString(fused_ops);
    EXPECT_EQ(count(fused_ops, "FusedConv") + count(fused_ops, "Conv"), 0);
    EXPECT_EQ(count(fused_ops, "Add") + count(fused_ops, "Relu"), 0) << ::testing::PrintToString(fused_ops);
    EXPECT_EQ(count(plain_ops, "QuantConv"), 0);
    double max_ref = 0;
    for (int64_t i = 0; i < fused.numel(); ++i)
      max_ref = std::max(max_ref, static_cast<double>(std::fabs(plain.data<float>()[i])));
    ASSERT_GT(max_ref, 0.1);
    testing::expect_within_one_quantization_step(fused, plain, max_ref);
  }
}

// FP8 with E5M2 activations for the layers a pattern names (issue 12: TensorRT has no E5M2):
// that activation's Q/DQ zero point is FLOAT8E5M2 (19) with scale amax / 57344, weights stay
// E4M3FN, the model runs and stays near the float one; E5M2 with INT8 or a pattern matching no
// layer is refused.
TEST_F(Quantize, Fp8E5m2ActivationsForNamedLayers) {
  const std::string m19 = mlp_model(19).save(dir_ + "/mlp19.onnx");
  QuantizeConfig c;
  c.data = data_;
  c.format = QuantFormat::kFp8E4M3;
  c.e5m2 = {"fc2"};
  QuantizeReport rep;
  auto bytes = quantize_onnx(m19, c, &rep);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(*bytes));
  ASSERT_NE(find_init(m, "r_zero_point"), nullptr);
  EXPECT_EQ(find_init(m, "r_zero_point")->data_type(), 19);  // FLOAT8E5M2
  EXPECT_EQ(find_init(m, "x_zero_point")->data_type(), 17);  // FLOAT8E4M3FN
  EXPECT_EQ(find_init(m, "W2_quantized")->data_type(), 17);
  // r = Relu(fc1(x)): its scale is max |r| / 57344 (min-max), x's max |x| / 448.
  const Tensor x = samples(40, 7);
  float ax = 0;
  for (int64_t i = 0; i < x.numel(); ++i) ax = std::max(ax, std::fabs(x.data<float>()[i]));
  EXPECT_FLOAT_EQ(rep.activation_scales.at("x"), ax / 448.f);
  EXPECT_GT(rep.activation_scales.at("x") / rep.activation_scales.at("r"), 1.f);  // 57344 levels of range vs 448
  const std::string qpath = dir_ + "/mlp19.e5m2.onnx";
  {
    std::ofstream f(qpath, std::ios::binary);
    f << *bytes;
  }
  BuilderConfig fp8;
  fp8.fp8 = true;
  const Tensor in = samples(6, 5);
  const Tensor y = run_cpu(qpath, fp8, in), ref = run_cpu(m19, BuilderConfig{}, in);
  ASSERT_TRUE(y.defined() && ref.defined());
  double num = 0, den = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    num = std::max(num, static_cast<double>(std::fabs(y.data<float>()[i] - ref.data<float>()[i])));
    den = std::max(den, static_cast<double>(std::fabs(ref.data<float>()[i])));
  }
  EXPECT_GT(num, 0);
  EXPECT_LT(num / den, 0.2);  // E5M2 keeps 2 mantissa bits
  // The cache records the E5M2 layers: another choice is refused without data.
  const std::string cache = dir_ + "/e5m2.cache";
  c.cache = cache;
  ASSERT_TRUE(quantize_onnx(m19, c).ok());
  QuantizeConfig other;
  other.format = QuantFormat::kFp8E4M3;
  other.cache = cache;
  auto refused = quantize_onnx(m19, other);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("E5M2 layers 'fc2'"), std::string::npos) << refused.status().message();
  // Errors.
  QuantizeConfig int8;
  int8.data = data_;
  int8.e5m2 = {"fc2"};
  auto e1 = quantize_onnx(model_, int8);
  ASSERT_FALSE(e1.ok());
  EXPECT_NE(e1.status().message().find("are FP8"), std::string::npos) << e1.status().message();
  c.cache.clear();
  c.e5m2 = {"nope*"};
  auto e2 = quantize_onnx(m19, c);
  ASSERT_FALSE(e2.ok());
  EXPECT_NE(e2.status().message().find("'nope*' matches no quantized layer"), std::string::npos) << e2.status().message();
}

// Opset 17 -> 19 for FP8 moves a Reduce op's `axes` attribute to its input (ONNX opset 18), and
// the upgraded, quantized model computes what the original does up to FP8 rounding.
TEST_F(Quantize, Fp8UpgradeMovesReduceAxesToAnInput) {
  OnnxModel m = mlp_model(17);
  // y2 = ReduceMean(y, axes=[1], keepdims=1) as a second output.
  auto* r = m.node("ReduceMean", {"y"}, {"y2"}, "mean");
  auto* a = r->add_attribute();
  a->set_name("axes");
  a->set_type(onnx::AttributeProto::INTS);
  a->add_ints(1);
  m.output("y2", onnx::TensorProto::FLOAT, {std::string("batch"), int64_t{1}});
  const std::string path = m.save(dir_ + "/mlp_mean.onnx");
  QuantizeConfig c;
  c.data = data_;
  c.format = QuantFormat::kFp8E4M3;
  auto bytes = quantize_onnx(path, c);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  onnx::ModelProto q;
  ASSERT_TRUE(q.ParseFromString(*bytes));
  EXPECT_EQ(q.opset_import(0).version(), 19);
  const onnx::NodeProto* mean = nullptr;
  for (const auto& n : q.graph().node())
    if (n.op_type() == "ReduceMean") mean = &n;
  ASSERT_NE(mean, nullptr);
  ASSERT_EQ(mean->input_size(), 2);
  EXPECT_EQ(mean->attribute_size(), 0);
  const onnx::TensorProto* axes = find_init(q, mean->input(1));
  ASSERT_NE(axes, nullptr);
  int64_t ax = 0;
  std::memcpy(&ax, axes->raw_data().data(), 8);
  EXPECT_EQ(ax, 1);
  // The quantized model's mean equals the mean of its own y (the reduction moved, not changed).
  const std::string qpath = dir_ + "/mlp_mean.qdq.onnx";
  {
    std::ofstream f(qpath, std::ios::binary);
    f << *bytes;
  }
  auto g = onnx_import::import_model_file(qpath);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const Tensor x = samples(3, 17);
  auto out = interpret(*g, {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0];
  const Tensor& y2 = (*out)[1];
  for (int r0 = 0; r0 < 3; ++r0) {
    double mean_y = 0;
    for (int j = 0; j < 3; ++j) mean_y += y.data<float>()[r0 * 3 + j];
    EXPECT_NEAR(y2.data<float>()[r0], mean_y / 3, 1e-6);
  }
}

TEST(Npz, RoundTripAndErrors) {
  const std::string dir = testing::make_temp_dir("npz");
  Tensor a(DataType::kFloat32, {2, 3});
  for (int i = 0; i < 6; ++i) a.data<float>()[i] = 0.5f * i;
  Tensor b(DataType::kInt64, {4});
  for (int i = 0; i < 4; ++i) b.data<int64_t>()[i] = -i;
  ASSERT_TRUE(io::write_npz(dir + "/ab.npz", {{"a", a}, {"ids", b}}).ok());
  auto r = io::read_npz(dir + "/ab.npz");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].first, "a");
  EXPECT_TRUE((*r)[0].second.bit_equal(a));
  EXPECT_EQ((*r)[1].first, "ids");
  EXPECT_TRUE((*r)[1].second.bit_equal(b));
  {
    std::ofstream f(dir + "/bad.npz");
    f << "not a zip file at all";
  }
  auto bad = io::read_npz(dir + "/bad.npz");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("is not a .npz (ZIP) archive"), std::string::npos) << bad.status().message();
  // A ZIP whose member is not .npy.
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln
