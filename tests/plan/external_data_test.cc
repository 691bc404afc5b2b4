// External-data weights (ONNX IR spec, "External Tensor Data"): location/offset/length keys,
// offsets past 2^31 (models with more than 2 GB of weights), and clear errors for missing or
// short files and paths that escape the model directory.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "onnx/importer.h"
#include "plan/onnx_test_models.h"
#include "backends/cpu/interpreter.h"

namespace kiln::testing {
namespace {

// y = x + w; the initializer w [4] is added by add_external_initializer.
OnnxModel external_add_model() {
  OnnxModel m;
  m.input("x", kF32, {int64_t{4}});
  m.node("Add", {"x", "w"}, {"y"}, "add0");
  m.output("y", kF32, {int64_t{4}});
  return m;
}

void add_external_initializer(const std::string& model_path, const std::string& file, int64_t offset, int64_t length) {
  onnx::ModelProto mp;
  std::ifstream in(model_path, std::ios::binary);
  ASSERT_TRUE(mp.ParseFromIstream(&in));
  auto* t = mp.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto kv = [&](const char* k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", file);
  kv("offset", std::to_string(offset));
  if (length >= 0) kv("length", std::to_string(length));
  std::ofstream out(model_path, std::ios::binary | std::ios::trunc);
  ASSERT_TRUE(mp.SerializeToOstream(&out));
}

void write_weights(const std::string& path, int64_t offset, const float* w, int n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.seekp(offset);  // a sparse file: the gap costs no disk
  f.write(reinterpret_cast<const char*>(w), n * sizeof(float));
}

StatusOr<std::vector<Tensor>> run_model(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(ir::Graph g, onnx_import::import_model_file(path));
  Tensor x(DataType::kFloat32, {4});
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = 0.25f * (i + 1);
  return interpret(g, {x});
}

TEST(ExternalData, WeightsPast2GiBAreMappedAndUsed) {
  const std::string dir = make_temp_dir("extdata");
  const float w[4] = {1.5f, -2.f, 3.25f, 0.125f};
  const int64_t offset = (int64_t{5} << 29) + 64;  // 2.5 GiB + 64 bytes: beyond any 32-bit offset
  write_weights(dir + "/weights.bin", offset, w, 4);
  const std::string model = external_add_model().save(dir + "/model.onnx");
  add_external_initializer(model, "weights.bin", offset, 16);
  auto out = run_model(model);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ((*out)[0].data<float>()[i], 0.25f * (i + 1) + w[i]);
  std::filesystem::remove_all(dir);
}

TEST(ExternalData, MissingShortOrEscapingFilesGiveClearErrors) {
  const std::string dir = make_temp_dir("extdata_bad");
  const float w[4] = {1.f, 2.f, 3.f, 4.f};
  write_weights(dir + "/short.bin", 0, w, 2);  // 8 bytes, 16 needed
  struct Case {
    std::string file;
    int64_t offset, length;
    StatusCode code;
    std::string text;
  };
  const std::vector<Case> cases = {
      {"absent.bin", 0, 16, StatusCode::kNotFound, "absent.bin' not found"},
      {"short.bin", 0, 16, StatusCode::kInvalidModel, "holds 8 bytes, need 16"},
      {"short.bin", 0, 12, StatusCode::kInvalidModel, "length 12 bytes, expected 16"},
      {"../outside.bin", 0, 16, StatusCode::kInvalidModel, "escapes the model directory"},
  };
  for (const Case& c : cases) {
    const std::string model = external_add_model().save(dir + "/model.onnx");
    add_external_initializer(model, c.file, c.offset, c.length);
    auto g = onnx_import::import_model_file(model);
    ASSERT_FALSE(g.ok()) << c.file;
    EXPECT_EQ(g.status().code(), c.code) << g.status().to_string();
    EXPECT_NE(g.status().message().find(c.text), std::string::npos) << g.status().to_string();
    EXPECT_NE(g.status().message().find("tensor 'w'"), std::string::npos) << g.status().to_string();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::testing
