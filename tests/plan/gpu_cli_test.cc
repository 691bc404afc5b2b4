// `kiln build --device gpu` end to end on a small conv net (skips without a GPU): --bf16 is
// recorded and inspected, --timing-cache is written and makes the second build time nothing,
// tuning progress and the tuning share are printed, `kiln inspect` shows device layers (tactic,
// tuned ms, channel padding), fallbacks and the device memory.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "plan/plan_test_util.h"
#include "runtime/gpu_engine.h"

namespace kiln {
namespace {

// x [2,3,16,16] -> Conv 3x3 (16 filters, pad 1) + bias -> Relu -> GlobalAveragePool -> Flatten
// -> Gemm (transB) [2,10].
testing::OnnxModel conv_model() {
  testing::OnnxModel m;
  m.input("x", testing::kF32, {int64_t{2}, int64_t{3}, int64_t{16}, int64_t{16}});
  std::vector<float> w(16 * 3 * 3 * 3), b(16), fw(10 * 16), fb(10);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.05f * static_cast<float>(static_cast<int>(i % 13) - 6);
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.1f * static_cast<float>(static_cast<int>(i % 5) - 2);
  for (size_t i = 0; i < fw.size(); ++i) fw[i] = 0.03f * static_cast<float>(static_cast<int>(i % 11) - 5);
  for (size_t i = 0; i < fb.size(); ++i) fb[i] = 0.01f * static_cast<float>(i);
  m.initializer("w", {16, 3, 3, 3}, w);
  m.initializer("b", {16}, b);
  m.initializer("fw", {10, 16}, fw);
  m.initializer("fb", {10}, fb);
  auto* conv = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv1");
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  m.node("Relu", {"c"}, {"r"}, "relu1");
  m.node("GlobalAveragePool", {"r"}, {"g"}, "gap");
  m.node("Flatten", {"g"}, {"f"}, "flatten");
  auto* gemm = m.node("Gemm", {"f", "fw", "fb"}, {"y"}, "fc");
  auto* tb = gemm->add_attribute();
  tb->set_name("transB");
  tb->set_type(onnx::AttributeProto::INT);
  tb->set_i(1);
  m.output("y", testing::kF32, {int64_t{2}, int64_t{10}});
  return m;
}

class GpuCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu::available()) GTEST_SKIP() << "no CUDA device (or built without CUDA)";
    dir_ = testing::make_temp_dir("gpu_cli");
    ASSERT_FALSE(dir_.empty());
    model_ = conv_model().save(dir_ + "/conv.onnx");
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) std::filesystem::remove_all(dir_);
  }
  int kiln(const std::string& args, std::string* out) { return testing::run_kiln(args, dir_, out); }
  std::string dir_, model_;
};

TEST_F(GpuCli, Bf16BuildWithTimingCacheAndInspect) {
  const std::string plan = dir_ + "/conv.plan", cache = dir_ + "/timing.json";
  std::string out;
  ASSERT_EQ(kiln("build " + model_ + " -o " + plan + " --device gpu --bf16 --timing-cache " + cache, &out), 0) << out;
  EXPECT_NE(out.find("tuning"), std::string::npos) << "no tuning progress on stderr:\n" << out;
  EXPECT_NE(out.find("tactic tuning"), std::string::npos) << "no tuning share in the summary:\n" << out;
  EXPECT_NE(out.find("does not exist yet"), std::string::npos) << out;
  EXPECT_NE(out.find("bf16"), std::string::npos) << out;
  ASSERT_TRUE(std::filesystem::exists(cache)) << out;
  std::ifstream cf(cache);
  nlohmann::json j = nlohmann::json::parse(cf, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["format"], "kiln-timing-cache");
  EXPECT_FALSE(j["entries"].empty()) << j.dump(1);

  ASSERT_EQ(kiln("build " + model_ + " -o " + plan + " --device gpu --bf16 --timing-cache " + cache, &out), 0) << out;
  EXPECT_NE(out.find(" 0 misses"), std::string::npos) << "the second build timed layers:\n" << out;
  EXPECT_EQ(out.find("timing cache: miss '"), std::string::npos) << out;

  ASSERT_EQ(kiln("inspect " + plan, &out), 0) << out;
  EXPECT_NE(out.find("Build: fp32 tf32 bf16"), std::string::npos) << out;
  EXPECT_NE(out.find("Device layers"), std::string::npos) << out;
  EXPECT_NE(out.find("tuned "), std::string::npos) << out;
  EXPECT_NE(out.find("Device memory: activation arena"), std::string::npos) << out;
  std::printf("%s\n", out.c_str());  // for the lead: fallbacks (if any) and tuned times

  ASSERT_EQ(kiln("inspect " + plan + " --json", &out), 0) << out;
  nlohmann::json ij = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(ij.is_discarded()) << out;
  EXPECT_TRUE(ij["build"]["bf16"].get<bool>());
  ASSERT_TRUE(ij.contains("device_layers")) << out;
  EXPECT_GT(ij["device_memory"]["arena_bytes"].get<size_t>(), 0u);
  EXPECT_LE(ij["device_memory"]["arena_bytes"].get<size_t>(), ij["device_memory"]["activation_bytes_sum"].get<size_t>());
}

TEST_F(GpuCli, CacheFromAnotherGpuIsIgnoredWithALogLine) {
  const std::string plan = dir_ + "/conv.plan", cache = dir_ + "/other.json";
  std::ofstream(cache) << R"({"format": "kiln-timing-cache", "version": 1,
    "header": {"gpu": "Some Other GPU", "sm": "8.0", "cudnn_version": 1, "cublaslt_version": 1, "kiln_version": "0"},
    "entries": {"gemm m=2 n=10 k=16 w=nk bf16 +bias ws<=33554432 | heuristic#0": 0.001}})";
  std::string out;
  ASSERT_EQ(kiln("build " + model_ + " -o " + plan + " --device gpu --fp16 --timing-cache " + cache, &out), 0) << out;
  EXPECT_NE(out.find("ignoring its 1 entries"), std::string::npos) << out;
  std::ofstream(cache) << "{not json";
  ASSERT_EQ(kiln("build " + model_ + " -o " + plan + " --device gpu --fp16 --timing-cache " + cache, &out), 2) << out;
  EXPECT_NE(out.find("timing cache"), std::string::npos) << out;
}

}  // namespace
}  // namespace kiln
