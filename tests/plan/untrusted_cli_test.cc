// Regression tests for issue 15 that run the `kiln` CLI in a new process: the crashes and aborts
// (a regression then fails one test, not the test binary) and the messages for wrong files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/checked_size.h"
#include "plan/untrusted_test_util.h"

namespace kiln {
namespace {

using namespace untrusted;

class UntrustedCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("untrusted");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  // Runs `kiln <args>`: expects exit code `code`, `part` in the output and no crash text.
  void expect_error(const std::string& args, int code, const std::string& part) {
    std::string out;
    EXPECT_EQ(testing::run_kiln(args, dir_, &out), code) << "kiln " << args << "\n" << out;
    EXPECT_NE(out.find(part), std::string::npos) << "kiln " << args << "\noutput: " << out << "\nmissing: " << part;
    for (const char* crash : {"terminate called", "internal check failed", "double free", "munmap_chunk", "Segmentation"})
      EXPECT_EQ(out.find(crash), std::string::npos) << out;
  }
  std::string dir_;
};

// Heap corruption: a batch of 2^62 built, then `kiln run` / `kiln compare` crashed in conv_forward
// (the element count wrapped). Now the profile resolver refuses the shape, naming the input.
TEST_F(UntrustedCli, BatchOf2To62IsRefusedAtBuild) {
  const std::string model = conv_model(int64_t{1} << 62).save(dir_ + "/huge_batch.onnx");
  expect_error("build " + model + " --device cpu -o " + dir_ + "/p.plan", 2, "input 'x'");
  expect_error("build " + model + " --device cpu -o " + dir_ + "/p.plan", 2, "2^48");
  auto g = import(conv_model(int64_t{1} << 62));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto plan = build_from_graph(*g, cpu_config());
  ASSERT_FALSE(plan.ok());
  expect_message(plan.status(), StatusCode::kInvalidArgument, "input 'x'");
}

// Abort: a profile of 1x3x2^20x2^20 floats (13 TB) ended in SIGABRT (`p != nullptr` in
// core/tensor.cc); now `kiln run` reports OutOfMemory naming the tensor and the bytes.
TEST_F(UntrustedCli, HugeProfileShapeIsOutOfMemoryNotAbort) {
  const std::string model = conv_model(std::string("batch")).save(dir_ + "/conv.onnx");
  OnnxModel wide;
  wide.input("x", kF32, {std::string("n"), int64_t{3}, std::string("h"), std::string("w")});
  wide.node("Relu", {"x"}, {"y"}, "relu0");
  output_any_shape(wide, "y");
  const std::string relu = wide.save(dir_ + "/relu.onnx");
  const std::string plan = dir_ + "/wide.plan";
  std::string out;
  ASSERT_EQ(testing::run_kiln("build " + relu + " --device cpu -o " + plan + " --shapes x:1x3x1048576x1048576", dir_, &out), 0) << out;
  expect_error("run " + plan, 2, "OutOfMemory");
  expect_error("run " + plan, 2, "13194139533312 bytes");
  // Past 2^48 elements the profile itself is refused.
  expect_error("build " + relu + " --device cpu -o " + plan + " --shapes x:1x3x65536x4294967296", 2, "2^48");
  (void)model;
}

// Abort: Conv pads of 2^40 made an output of ~2^82 elements; now shape inference refuses it at
// build, naming the node and its output.
TEST_F(UntrustedCli, HugeConvPadsAreAnErrorNamingTheOutput) {
  const std::string model = conv_model(int64_t{1}, int64_t{1} << 40).save(dir_ + "/pads.onnx");
  expect_error("build " + model + " --device cpu -o " + dir_ + "/p.plan", 2, "node 'conv0' (Conv): output 'y'");
}


// A malformed external-data offset threw std::stoll's exception out of Builder::build.
TEST_F(UntrustedCli, MalformedExternalDataOffsetIsAnError) {
  OnnxModel m = testing::static_model();
  auto* b = m.proto().mutable_graph()->mutable_initializer(0);
  b->clear_float_data();
  b->set_data_location(onnx::TensorProto::EXTERNAL);
  auto kv = [&](const char* k, const char* v) {
    auto* e = b->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", "weights.bin");
  kv("offset", "12abc");
  std::ofstream(dir_ + "/weights.bin", std::ios::binary) << std::string(64, '\0');
  const std::string model = m.save(dir_ + "/ext.onnx");
  auto plan = Builder::build(model, cpu_config());
  expect_message(plan.status(), StatusCode::kInvalidModel, "external data offset '12abc'");
  b->mutable_external_data(1)->set_value("99999999999999999999999");
  m.save(model);
  expect_message(Builder::build(model, cpu_config()).status(), StatusCode::kInvalidModel, "external data offset");
}

// Misleading messages: each kind of wrong file has its own.
TEST_F(UntrustedCli, WrongFilesHaveTheirOwnMessages) {
  const std::string model = testing::static_model().save(dir_ + "/m.onnx");
  const std::string plan = dir_ + "/m.plan";
  std::string out;
  ASSERT_EQ(testing::run_kiln("build " + model + " --device cpu -o " + plan, dir_, &out), 0) << out;
  std::filesystem::create_directory(dir_ + "/sub");
  std::ofstream(dir_ + "/empty.bin").close();
  expect_error("run " + dir_ + "/sub", 2, "is a directory");
  expect_error("build " + dir_ + "/sub -o " + plan, 2, "is a directory");
  expect_error("run " + dir_ + "/empty.bin", 2, "is empty");
  expect_error("build " + dir_ + "/empty.bin -o " + plan, 2, "is empty");
  expect_error("run " + dir_ + "/missing.plan", 2, "not found");
  expect_error("build " + plan + " --device cpu -o " + dir_ + "/x.plan", 2, "is a Kiln plan, not an ONNX model");
  expect_error("run " + model, 2, "is an ONNX model, not a Kiln plan");
  expect_error("run " + plan + " --input x=" + dir_ + "/sub", 2, "is a directory");
  if (::geteuid() != 0) {  // root reads everything
    const std::string locked = dir_ + "/locked.onnx";
    std::filesystem::copy_file(model, locked);
    ::chmod(locked.c_str(), 0);
    expect_error("build " + locked + " --device cpu -o " + plan, 2, "cannot be read");
  }
}

}  // namespace
}  // namespace kiln
