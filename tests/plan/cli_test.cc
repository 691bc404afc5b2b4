// The `kiln` binary end to end, each command in a new process (std::system): a plan written
// by `kiln build` loads in another process and gives bit-identical outputs; every user error
// exits 2 with a message naming the problem; a mismatch in `kiln compare` exits 1.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/npy.h"
#include "kiln/runtime.h"
#include "plan/plan_test_util.h"
#include "runtime/gpu_engine.h"

namespace kiln {
namespace {

class KilnCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("cli");
    ASSERT_FALSE(dir_.empty());
    model_ = testing::add_relu_model().save(dir_ + "/add_relu.onnx");
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  // Runs `kiln <args>`; returns the exit code, stdout+stderr in *out.
  int kiln(const std::string& args, std::string* out = nullptr) {
    const int rc = testing::run_kiln(args, dir_, &last_);
    if (out) *out = last_;
    return rc;
  }
  std::string build_plan() {
    const std::string plan = dir_ + "/add_relu.plan";
    // Without fuse_pointwise Add and Relu stay two layers, which the inspect checks count.
    EXPECT_EQ(kiln("build " + model_ + " -o " + plan +
                   " --disable-pass fuse_pointwise --min-shapes x:1x4 --opt-shapes x:2x4 --max-shapes x:8x4"), 0)
        << last_;
    return plan;
  }
  std::string write_input(const Tensor& t, const std::string& name) {
    const std::string path = dir_ + "/" + name;
    EXPECT_TRUE(io::write_npy(path, t).ok());
    return path;
  }
  void expect_error(const std::string& args, int code, const std::string& part) {
    std::string out;
    EXPECT_EQ(kiln(args, &out), code) << out;
    EXPECT_NE(out.find(part), std::string::npos) << "output: " << out << "\nmissing: " << part;
    EXPECT_EQ(out.find("terminate called"), std::string::npos) << out;
  }
  std::string dir_, model_, last_;
};

Tensor sample_x(int64_t rows) {
  Tensor x(DataType::kFloat32, {rows, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 0.731f * static_cast<float>(i % 7) - 2.1f;
  return x;
}

TEST_F(KilnCli, PlanFromBuildRunsBitExactInAnotherProcess) {
  const std::string plan = build_plan();
  EXPECT_NE(last_.find("input  x float32 [batch,4], profile [1,4]..[8,4] (opt [2,4])"), std::string::npos) << last_;
  // The same build in this process gives the same bytes (builds are deterministic).
  BuilderConfig c;
  OptimizationProfile p;
  ASSERT_TRUE(p.set_dimensions("x", {1, 4}, {2, 4}, {8, 4}).ok());
  c.profiles.push_back(p);
  c.disabled_passes = {"fuse_pointwise"};  // as build_plan() asks the CLI
  auto bytes = Builder::build(model_, c);
  ASSERT_TRUE(bytes.ok());
  std::ifstream f(plan, std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(file, *bytes);

  const Tensor x = sample_x(3);
  const std::string in = write_input(x, "x.npy");
  std::string out;
  ASSERT_EQ(kiln("run " + plan + " --input x=" + in + " --output-dir " + dir_ + "/out", &out), 0) << out;
  EXPECT_NE(out.find("output y float32 [3,4]"), std::string::npos) << out;
  EXPECT_NE(out.find("latency"), std::string::npos) << out;
  auto y_file = io::read_npy(dir_ + "/out/y.npy");
  ASSERT_TRUE(y_file.ok()) << y_file.status().to_string();

  auto engine = Runtime::load_engine(plan);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto ctx = (*engine)->create_execution_context();
  ASSERT_TRUE(ctx->set_input("x", x).ok());
  ASSERT_TRUE(ctx->execute().ok());
  EXPECT_TRUE(ctx->output("y")->bit_equal(*y_file));
}

TEST_F(KilnCli, RunGeneratesSeededInputsAndSanitizesNames) {
  const std::string model = testing::static_model().save(dir_ + "/static.onnx");
  const std::string plan = dir_ + "/static.plan";
  ASSERT_EQ(kiln("build " + model + " -o " + plan), 0) << last_;
  ASSERT_EQ(kiln("run " + plan + " --seed 5 --output-dir " + dir_ + "/a"), 0) << last_;
  EXPECT_NE(last_.find("(random)"), std::string::npos) << last_;
  ASSERT_EQ(kiln("run " + plan + " --seed 5 --output-dir " + dir_ + "/b"), 0) << last_;
  auto a = io::read_npy(dir_ + "/a/out_0.npy");
  auto b = io::read_npy(dir_ + "/b/out_0.npy");
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string();
  EXPECT_TRUE(a->bit_equal(*b));
}

TEST_F(KilnCli, InspectAndBench) {
  const std::string plan = build_plan();
  std::string out;
  ASSERT_EQ(kiln("inspect " + plan + " --json", &out), 0) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  ASSERT_TRUE(j["layers"].is_array());
  ASSERT_EQ(j["layers"].size(), 2u);
  EXPECT_EQ(j["layers"][0]["tactic"], "cpu.ref");
  EXPECT_EQ(j["layers"][0]["origin"][0], "add0");
  EXPECT_EQ(j["format_version"], kPlanFormatVersion);
  EXPECT_EQ(j["build"]["max_aux_streams"], -1);
  EXPECT_EQ(j["profiles"][0]["x"]["max"][0], 8);
  ASSERT_EQ(kiln("inspect " + plan, &out), 0) << out;
  EXPECT_NE(out.find("Layers (2)"), std::string::npos) << out;
  const std::string json = dir_ + "/bench.json";
  ASSERT_EQ(kiln("bench " + plan + " --warmup 1 --iterations 5 --shapes x:4x4 --json " + json, &out), 0) << out;
  EXPECT_NE(out.find("percentile(99%)"), std::string::npos) << out;
  std::ifstream f(json);
  auto b = nlohmann::json::parse(f, nullptr, false);
  ASSERT_FALSE(b.is_discarded());
  EXPECT_EQ(b["iterations"], 5);
  EXPECT_EQ(b["throughput"]["batch"], 4);
  EXPECT_GE(b["latency_ms"]["p99"].get<double>(), b["latency_ms"]["min"].get<double>());
  EXPECT_GE(b["plan_load_ms"].get<double>(), 0.0);
  EXPECT_NE(out.find("Plan load time:"), std::string::npos) << out;
}

// --layer-precisions: the constraint is recorded per layer (build summary, inspect text and
// JSON); a rule matching no layer or an unknown precision is a usage error naming it.
TEST_F(KilnCli, LayerPrecisionsAreRecordedAndChecked) {
  const std::string plan = dir_ + "/lp.plan";
  std::string out;
  ASSERT_EQ(kiln("build " + model_ + " -o " + plan + " --device cpu --disable-pass fuse_pointwise --shapes x:2x4 "
                 "--layer-precisions 'add*:fp32,relu*:fp16'", &out), 0) << out;
  EXPECT_NE(out.find("1 layer(s) constrained to fp32"), std::string::npos) << out;
  EXPECT_NE(out.find("1 layer(s) constrained to fp16"), std::string::npos) << out;
  ASSERT_EQ(kiln("inspect " + plan + " --json", &out), 0) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["layers"][0]["precision"], "fp32");
  EXPECT_EQ(j["layers"][1]["precision"], "fp16");
  EXPECT_EQ(j["layers"][0]["precision_constrained"], true);
  EXPECT_EQ(j["layers"][1]["precision_constrained"], true);
  ASSERT_EQ(kiln("inspect " + plan, &out), 0) << out;
  EXPECT_NE(out.find("precision fp32 (constrained)"), std::string::npos) << out;
  // Without rules every layer shows its decided precision, none constrained (docs/decisions/0033).
  ASSERT_EQ(kiln("build " + model_ + " -o " + plan + " --device cpu --disable-pass fuse_pointwise --shapes x:2x4 --fp16",
                 &out), 0) << out;
  EXPECT_EQ(out.find("constrained to"), std::string::npos) << out;
  ASSERT_EQ(kiln("inspect " + plan + " --json", &out), 0) << out;
  j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  ASSERT_EQ(j["layers"].size(), 2u);
  for (const auto& l : j["layers"]) {
    EXPECT_EQ(l["precision"], "fp16") << l;
    EXPECT_FALSE(l.contains("precision_constrained")) << l;
  }
  // INT8 / FP8 are refused with the reason, not silently built as float layers.
  expect_error("build " + model_ + " -o " + plan + " --shapes x:2x4 --int8", 2, "INT8 layers need calibration data");
  expect_error("build " + model_ + " -o " + plan + " --shapes x:2x4 --fp8", 2, "FP8 layers need calibration data");
  expect_error("build " + model_ + " -o " + plan + " --shapes x:2x4 --calib x.npz", 2, "add --int8 or --fp8");
  expect_error("build " + model_ + " -o " + plan + " --shapes x:2x4 --layer-precisions 'nope*:fp32'", 2,
               "'nope*' matches no layer");
  expect_error("build " + model_ + " -o " + plan + " --shapes x:2x4 --layer-precisions 'add*:fp8'", 2,
               "precision 'fp8', expected fp32, fp16 or bf16");
}

// --dump-profile works on CPU plans; --cuda-graph and --streams are CUDA-only and say so.
TEST_F(KilnCli, ProfileOnCpuAndCudaOnlyFlags) {
  const std::string plan = build_plan();
  const std::string prof = dir_ + "/prof.json";
  std::string out;
  ASSERT_EQ(kiln("run " + plan + " --dump-profile " + prof, &out), 0) << out;
  EXPECT_NE(out.find("Per-layer profile"), std::string::npos) << out;
  std::ifstream f(prof);
  auto p = nlohmann::json::parse(f, nullptr, false);
  ASSERT_FALSE(p.is_discarded());
  ASSERT_EQ(p["layers"].size(), 2u);
  double share = 0;
  for (const auto& l : p["layers"]) {
    EXPECT_EQ(l["tactic"], "cpu.ref");
    EXPECT_GE(l["median_ms"].get<double>(), 0.0);
    share += l["share"].get<double>();
  }
  EXPECT_NEAR(share, 1.0, 1e-9);
  ASSERT_EQ(kiln("bench " + plan + " --warmup 0 --iterations 2 --dump-profile " + prof, &out), 0) << out;
  expect_error("bench " + plan + " --streams 2", 2, "--streams 2 needs a CUDA plan");
  expect_error("bench " + plan + " --cuda-graph", 2, "--cuda-graph needs a CUDA plan");
  expect_error("run " + plan + " --cuda-graph", 2, "--cuda-graph needs a CUDA plan");
  ASSERT_EQ(kiln("inspect " + plan, &out), 0) << out;
  EXPECT_NE(out.find("Load time:"), std::string::npos) << out;
}

TEST_F(KilnCli, CompareAgreesWithTheReferenceAndFlagsMismatch) {
  const std::string plan = build_plan();
  const std::string json = dir_ + "/cmp.json";
  std::string out;
  ASSERT_EQ(kiln("compare " + plan + " " + model_ + " --json " + json, &out), 0) << out;
  EXPECT_NE(out.find("PASS"), std::string::npos) << out;
  std::ifstream f(json);
  auto j = nlohmann::json::parse(f, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["outputs"][0]["max_abs_error"], 0.0);
  EXPECT_NEAR(j["outputs"][0]["cosine"].get<double>(), 1.0, 1e-12);
  // Same interface, different bias: the plan no longer matches this model.
  testing::OnnxModel other;
  other.input("x", testing::kF32, {std::string("batch"), int64_t{4}});
  other.initializer("b", {4}, {0.5f, 0.75f, 1.0f, -2.0f});
  other.node("Add", {"x", "b"}, {"sum"}, "add0");
  other.node("Relu", {"sum"}, {"y"}, "relu0");
  other.output("y", testing::kF32, {std::string("batch"), int64_t{4}});
  const std::string other_path = other.save(dir_ + "/other.onnx");
  EXPECT_EQ(kiln("compare " + plan + " " + other_path, &out), 1) << out;
  EXPECT_NE(out.find("FAIL"), std::string::npos) << out;
}

// The CUDA side of the same commands (skips without a GPU): bench with 2 streams and CUDA
// graphs, run with --cuda-graph, --dump-profile listing the GPU layers.
using GpuKilnCli = KilnCli;

TEST_F(GpuKilnCli, BenchStreamsCudaGraphAndProfile) {
  if (!gpu::available()) GTEST_SKIP() << "no CUDA device (or built without CUDA)";
  const std::string plan = dir_ + "/gpu.plan";
  std::string out;
  ASSERT_EQ(kiln("build " + model_ + " -o " + plan + " --device gpu --shapes x:4x4", &out), 0) << out;
  const std::string json = dir_ + "/bench.json", prof = dir_ + "/prof.json";
  ASSERT_EQ(kiln("bench " + plan + " --streams 2 --cuda-graph --warmup 2 --iterations 40 --json " + json +
                     " --dump-profile " + prof,
                 &out),
            0)
      << out;
  EXPECT_NE(out.find("GPU compute time"), std::string::npos) << out;
  EXPECT_NE(out.find("Host-to-host latency"), std::string::npos) << out;
  std::ifstream f(json);
  auto b = nlohmann::json::parse(f, nullptr, false);
  ASSERT_FALSE(b.is_discarded()) << out;
  EXPECT_EQ(b["streams"], 2);
  EXPECT_EQ(b["cuda_graph"], true);
  EXPECT_GE(b["iterations"].get<int>(), 40);
  EXPECT_EQ(b["outputs_identical_across_streams"], true);
  EXPECT_GT(b["throughput"]["inferences_per_s"].get<double>(), 0.0);
  EXPECT_GE(b["gpu_compute_ms"]["p99"].get<double>(), b["gpu_compute_ms"]["median"].get<double>());
  EXPECT_GT(b["host_to_host_ms"]["median"].get<double>(), 0.0);
  std::ifstream pf(prof);
  auto p = nlohmann::json::parse(pf, nullptr, false);
  ASSERT_FALSE(p.is_discarded());
  ASSERT_GE(p["layers"].size(), 1u);
  EXPECT_EQ(p["runs"], 20);
  for (const auto& l : p["layers"]) EXPECT_NE(l["tactic"].get<std::string>(), "cpu.ref") << l.dump();
  // run --cuda-graph: capture, replay, same bits as a plain run.
  const std::string x = write_input(sample_x(4), "x.npy");
  ASSERT_EQ(kiln("run " + plan + " --input x=" + x + " --cuda-graph --output-dir " + dir_ + "/g", &out), 0) << out;
  EXPECT_NE(out.find("replay"), std::string::npos) << out;
  ASSERT_EQ(kiln("run " + plan + " --input x=" + x + " --output-dir " + dir_ + "/p", &out), 0) << out;
  auto a = io::read_npy(dir_ + "/g/y.npy"), c = io::read_npy(dir_ + "/p/y.npy");
  ASSERT_TRUE(a.ok() && c.ok()) << out;
  EXPECT_TRUE(a->bit_equal(*c)) << "--cuda-graph changed the output";
}

TEST_F(KilnCli, PlanErrorsExit2) {
  const std::string plan = build_plan();
  std::ifstream f(plan, std::ios::binary);
  const std::vector<uint8_t> good((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& name, std::vector<uint8_t> b) {
    const std::string path = dir_ + "/" + name;
    std::ofstream o(path, std::ios::binary);
    o.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return path;
  };
  expect_error("run " + write("trunc.plan", std::vector<uint8_t>(good.begin(), good.end() - 10)), 2,
               "truncated at section 'weights': need");
  auto v99 = good;
  testing::store_le(v99, plan::kOffVersion, 99, 4);
  testing::reseal(v99);
  expect_error("inspect " + write("v99.plan", v99), 2, "plan format version 99, this build reads " + std::to_string(kPlanFormatVersion));
  auto bad = good;
  bad[good.size() / 2] ^= 0x10;
  expect_error("run " + write("bad.plan", bad), 2, "checksum mismatch");
  expect_error("run " + dir_ + "/missing.plan", 2, "not found");
  expect_error("run " + model_, 2, "not a Kiln plan");
}

// trtexec's habit: dynamic dims with no shapes given build with 1 each, with a warning naming them.
TEST_F(KilnCli, BuildWithoutShapesUsesOneForDynamicDims) {
  std::string out;
  ASSERT_EQ(kiln("build " + model_ + " -o " + dir_ + "/ones.plan", &out), 0) << out;
  EXPECT_NE(out.find("kiln build: warning: input 'x' has dynamic dims [batch,4] and no shapes were given: building "
                     "with [1,4]"),
            std::string::npos)
      << out;
  auto engine = Runtime::load_engine(dir_ + "/ones.plan");
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const ShapeRange* r = (*engine)->profiles()[0].find("x");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->min, (Shape{1, 4}));
  EXPECT_EQ(r->max, (Shape{1, 4}));
  ASSERT_EQ(kiln("build " + model_ + " -o " + dir_ + "/given.plan --shapes x:3x4", &out), 0) << out;
  EXPECT_EQ(out.find("warning"), std::string::npos) << out;
}

TEST_F(KilnCli, BuildErrorsExit2) {
  const std::string bytes = testing::add_relu_model().bytes();
  {
    std::ofstream o(dir_ + "/trunc.onnx", std::ios::binary);
    o << bytes.substr(0, bytes.size() / 2);
  }
  expect_error("build " + dir_ + "/trunc.onnx -o " + dir_ + "/p.plan", 2, "truncated");
  testing::OnnxModel m;
  m.input("x", testing::kF32, {int64_t{2}});
  m.node("Frobnicate", {"x"}, {"y"}, "frob_7");
  m.output("y", testing::kF32, {int64_t{2}});
  const std::string unknown = m.save(dir_ + "/unknown.onnx");
  expect_error("build " + unknown + " -o " + dir_ + "/p.plan", 2, "node 'frob_7' (Frobnicate, domain 'ai.onnx', opset 17)");
  expect_error("build " + dir_ + "/none.onnx -o " + dir_ + "/p.plan", 2, "not found");
  expect_error("build " + model_ + " -o " + dir_ + "/p.plan --shapes x:1x3", 2, "dim 1 is fixed at 4");
  expect_error("build " + model_, 2, "required");
  expect_error("run", 2, "required");
  expect_error("frobnicate", 2, "");
}

TEST_F(KilnCli, InputErrorsExit2) {
  const std::string plan = build_plan();
  expect_error("run " + plan + " --input x=" + write_input(Tensor(DataType::kFloat32, {3, 5}), "wide.npy"), 2,
               "input 'x': dim 1 is 5");
  expect_error("run " + plan + " --input x=" + write_input(Tensor(DataType::kFloat64, {3, 4}), "f64.npy"), 2,
               "input 'x': dtype float64, the engine expects float32");
  expect_error("run " + plan + " --input x=" + write_input(sample_x(9), "big.npy"), 2,
               "dim 0 is 9, outside the optimization profile's range 1..8");
  expect_error("run " + plan + " --shapes x:9x4", 2, "outside the optimization profile's range 1..8");
  expect_error("run " + plan + " --input y=" + write_input(sample_x(2), "y.npy"), 2, "'y' is not an input of the plan");
  expect_error("run " + plan + " --input x=" + dir_ + "/nothing.npy", 2, "not found");
  expect_error("run " + plan + " --input x.npy", 2, "expected name=FILE");
}

// `kiln quantize` writes a Q/DQ model; `kiln build --int8 --calib-cache` of the float model and
// `kiln build --int8` of the written model are the same plan, byte for byte (docs/decisions/0050).
TEST_F(KilnCli, QuantizeAndBuildInt8GiveTheSamePlan) {
  const std::string mlp = testing::mlp_model().save(dir_ + "/mlp.onnx");
  Tensor x(DataType::kFloat32, {16, 4});
  for (int i = 0; i < 64; ++i) x.data<float>()[i] = static_cast<float>((i * 29) % 41 - 20) / 10.f;
  std::filesystem::create_directories(dir_ + "/calib");
  ASSERT_TRUE(io::write_npy(dir_ + "/calib/x.npy", x).ok());
  std::string out;
  ASSERT_EQ(kiln("quantize " + mlp + " --calib " + dir_ + "/calib -o " + dir_ + "/mlp.qdq.onnx --calib-cache " + dir_ +
                 "/mlp.calib", &out), 0) << out;
  EXPECT_NE(out.find("2 layers quantized"), std::string::npos) << out;
  ASSERT_EQ(kiln("build " + mlp + " -o " + dir_ + "/a.plan --device cpu --shapes x:2x4 --int8 --calib-cache " + dir_ +
                 "/mlp.calib", &out), 0) << out;
  ASSERT_EQ(kiln("build " + dir_ + "/mlp.qdq.onnx -o " + dir_ + "/b.plan --device cpu --shapes x:2x4 --int8", &out), 0)
      << out;
  auto read = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  const std::string a = read(dir_ + "/a.plan"), b = read(dir_ + "/b.plan");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  // inspect names each 8-bit layer's scales (text and JSON): a Gemm of 8-bit GEMM size (K = 32,
  // N = 16) becomes a QuantLinear layer.
  testing::OnnxModel big;
  big.input("x", testing::kF32, {std::string("batch"), int64_t{32}});
  std::vector<float> w(16 * 32);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>((i * 37) % 61) - 30) / 40.f;
  big.initializer("W", {16, 32}, w);
  auto* g = big.node("Gemm", {"x", "W"}, {"y"}, "fc");
  auto* at = g->add_attribute();
  at->set_name("transB");
  at->set_type(onnx::AttributeProto::INT);
  at->set_i(1);
  big.output("y", testing::kF32, {std::string("batch"), int64_t{16}});
  const std::string big_path = big.save(dir_ + "/fc32.onnx");
  Tensor xb(DataType::kFloat32, {8, 32});
  for (int i = 0; i < 8 * 32; ++i) xb.data<float>()[i] = static_cast<float>((i * 13) % 29 - 14) / 7.f;
  std::filesystem::create_directories(dir_ + "/calib32");
  ASSERT_TRUE(io::write_npy(dir_ + "/calib32/x.npy", xb).ok());
  ASSERT_EQ(kiln("build " + big_path + " -o " + dir_ + "/q.plan --device cpu --shapes x:2x32 --int8 --calib " + dir_ +
                 "/calib32", &out), 0) << out;
  ASSERT_EQ(kiln("inspect " + dir_ + "/q.plan", &out), 0) << out;
  EXPECT_NE(out.find("(QuantLinear)"), std::string::npos) << out;
  EXPECT_NE(out.find("quant x int8 per_tensor scale="), std::string::npos) << out;
  EXPECT_NE(out.find("; w int8 per_axis axis=0 scale[16]"), std::string::npos) << out;
  ASSERT_EQ(kiln("inspect " + dir_ + "/q.plan --json", &out), 0) << out;
  EXPECT_NE(out.find("\"quantization\""), std::string::npos) << out;
  // A cache for another model is refused, and names why.
  testing::OnnxModel other = testing::mlp_model();
  other.initializer("unused", {1}, {1.f});
  const std::string other_path = other.save(dir_ + "/other.onnx");
  expect_error("build " + other_path + " -o " + dir_ + "/c.plan --device cpu --shapes x:2x4 --int8 --calib-cache " +
                   dir_ + "/mlp.calib", 2, "made for another model");
}

}  // namespace
}  // namespace kiln
