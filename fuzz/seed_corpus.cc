// Writes the fuzz harnesses' seed corpora from the models the tests already make
// (tests/plan/onnx_test_models.h): OUT/onnx/*.onnx, OUT/plan/*.plan (each model built for the
// CPU), OUT/npy/*.npy (small tensors of several dtypes and ranks). scripts/fuzz.sh runs it and adds
// the ONNX backend test data's models when /usr/share/libonnx-testdata is installed. Nothing here
// is committed: the corpora are generated.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "builder/build_from_graph.h"
#include "core/numerics.h"
#include "io/npy.h"
#include "kiln/builder.h"
#include "onnx/importer.h"
#include "plan/onnx_test_models.h"

namespace {

using namespace kiln;
using testing::kF32;
using testing::OnnxModel;

OnnxModel conv_relu() {
  OnnxModel m;
  m.input("x", kF32, {std::string("n"), int64_t{3}, int64_t{8}, int64_t{8}});
  m.initializer("W", {4, 3, 3, 3}, std::vector<float>(108, 0.1f));
  m.initializer("B", {4}, {0.f, 1.f, -1.f, 0.5f});
  auto* c = m.node("Conv", {"x", "W", "B"}, {"c"}, "conv0");
  auto* pads = c->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  m.node("Relu", {"c"}, {"r"}, "relu0");
  m.node("GlobalAveragePool", {"r"}, {"y"}, "gap0");
  m.output("y", kF32, {std::string("n"), int64_t{4}, int64_t{1}, int64_t{1}});
  return m;
}

OnnxModel matmul_softmax() {
  OnnxModel m;
  m.input("a", kF32, {int64_t{2}, int64_t{4}});
  m.initializer("w", {4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  m.node("MatMul", {"a", "w"}, {"mm"}, "mm0");
  m.node("Softmax", {"mm"}, {"y"}, "sm0");
  m.output("y", kF32, {int64_t{2}, int64_t{3}});
  return m;
}

OnnxModel reshape_transpose() {
  OnnxModel m;
  m.input("x", kF32, {int64_t{2}, int64_t{6}});
  auto* shape = m.proto().mutable_graph()->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(3);
  for (int64_t v : {2, 3, 2}) shape->add_int64_data(v);
  m.node("Reshape", {"x", "shape"}, {"r"}, "reshape0");
  auto* t = m.node("Transpose", {"r"}, {"y"}, "tr0");
  auto* perm = t->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : {2, 0, 1}) perm->add_ints(v);
  m.output("y", kF32, {int64_t{2}, int64_t{2}, int64_t{3}});
  return m;
}

void write(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seed_corpus OUT_DIR\n");
    return 2;
  }
  const std::filesystem::path out = argv[1];
  for (const char* sub : {"onnx", "plan", "npy"}) std::filesystem::create_directories(out / sub);
  const std::vector<std::pair<std::string, OnnxModel>> models = {
      {"add_relu", testing::add_relu_model()}, {"static", testing::static_model()}, {"conv_relu", conv_relu()},
      {"matmul_softmax", matmul_softmax()}, {"reshape_transpose", reshape_transpose()}};
  int plans = 0;
  for (const auto& [name, m] : models) {
    write(out / "onnx" / (name + ".onnx"), m.bytes());
    auto g = onnx_import::import_model_bytes(m.bytes(), ".");
    if (!g.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), g.status().to_string().c_str());
      return 1;
    }
    BuilderConfig c;
    c.target = TargetDevice::kCpu;
    OptimizationProfile p;
    for (ir::ValueId v : g->inputs) {
      Shape s;
      for (const ir::Dim& d : *g->value(v).shape) s.push_back(d.is_known() ? d.value : 2);
      (void)p.set_dimensions(g->value(v).name, s, s, s);
    }
    c.profiles.push_back(p);
    auto plan = build_from_graph(*g, c);
    if (!plan.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), plan.status().to_string().c_str());
      return 1;
    }
    write(out / "plan" / (name + ".plan"), std::string(plan->begin(), plan->end()));
    ++plans;
  }
  int npys = 0;
  for (DataType dt : {DataType::kFloat32, DataType::kInt64, DataType::kUInt8, DataType::kFloat16, DataType::kBool}) {
    for (const Shape& s : {Shape{}, Shape{5}, Shape{2, 3}}) {
      Tensor t(dt, s);
      for (int64_t i = 0; i < t.numel(); ++i) store_from_int64(dt, t.raw(), i, i % 2);
      const std::string name = std::string(dtype_name(dt)) + "_" + std::to_string(s.size()) + ".npy";
      if (io::write_npy((out / "npy" / name).string(), t).ok()) ++npys;
    }
  }
  std::printf("seed corpus in %s: %zu models, %d plans, %d npy files\n", out.c_str(), models.size(), plans, npys);
  return 0;
}
