// The ONNX backend cases of the N-D NN layers (issue 11 item 1, docs/decisions/0070) lower on
// the CUDA path with the FP32 rules, without a GPU: each case's model is imported, laid out as the
// builder lays it out at the shapes of its test_data_set_0 inputs, and check_gpu_support must
// accept it. (Whether the numbers match is `kiln conformance --device gpu` on the GPU machine.)
// Skipped where Debian's libonnx-testdata is not installed. KILN_CONF_PROBE=DIR instead prints
// the verdict of every case under DIR (one suite directory) and checks nothing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "builder/build_from_graph.h"
#include "onnx/importer.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kData = "/usr/share/libonnx-testdata/data";

#ifdef KILN_HAVE_CUDA
// check_gpu_support's verdict on case directory `dir` ("" = it lowers).
std::string lowering_verdict(const fs::path& dir) {
  auto g = onnx_import::import_model_file((dir / "model.onnx").string());
  if (!g.ok()) return "import: " + g.status().to_string();
  std::vector<std::pair<int, fs::path>> files;
  for (const auto& f : fs::directory_iterator(dir / "test_data_set_0")) {
    const std::string n = f.path().filename().string();
    if (n.rfind("input_", 0) == 0) files.emplace_back(std::stoi(n.substr(6)), f.path());
  }
  std::sort(files.begin(), files.end());
  BuilderConfig config;
  config.target = TargetDevice::kCuda;
  config.tf32 = false;
  OptimizationProfile prof;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < files.size() && i < g->inputs.size(); ++i) {
    auto t = onnx_import::load_tensor_pb_file(files[i].second.string());
    if (!t.ok()) return "input: " + t.status().to_string();
    shapes.push_back(t->shape());
    if (!prof.set_dimensions(g->value(g->inputs[i]).name, t->shape(), t->shape(), t->shape()).ok()) return "profile";
  }
  config.profiles.push_back(prof);
  std::vector<Shape> opt;
  auto laid = cuda_layer_graph(*g, config, &opt);
  if (!laid.ok()) return "layout: " + laid.status().to_string();
  auto vs = cuda::infer_value_shapes_by_reference(*laid, opt);
  if (!vs.ok()) return "shapes: " + vs.status().to_string();
  const Status s = cuda::check_gpu_support(*laid, *vs, false);
  return s.ok() ? "" : s.to_string();
}
#endif

TEST(GpuConformanceLowering, NdLayerCasesLowerWithoutGpu) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  if (const char* probe = std::getenv("KILN_CONF_PROBE")) {
    std::vector<fs::path> cases;
    for (const auto& d : fs::directory_iterator(probe))
      if (fs::exists(d.path() / "model.onnx")) cases.push_back(d.path());
    std::sort(cases.begin(), cases.end());
    for (const auto& c : cases) {
      std::string v = lowering_verdict(c);
      for (char& ch : v)
        if (ch == '\n') ch = '|';
      std::cout << (v.empty() ? "LOWERS" : "REFUSED") << "\t" << c.filename().string() << "\t" << v << "\n";
    }
    return;
  }
  if (!fs::exists(kData)) GTEST_SKIP() << kData << " is missing (apt-get install libonnx-testdata)";
  // A sample of each family: Conv 1-D / 3-D / runtime weight / asymmetric pads, ConvTranspose,
  // N-D and SAME-padded pools with dilations and Indices, the normalizations, runtime Gemm,
  // GridSample.
  const char* cases[] = {
      "node/test_basic_conv_with_padding",
      "node/test_conv_with_strides_and_asymmetric_padding",
      "node/test_conv_with_autopad_same",
      "pytorch-converted/test_Conv1d_groups",
      "pytorch-converted/test_Conv3d_dilated_strided",
      "node/test_convtranspose",
      "node/test_convtranspose_1d",
      "node/test_convtranspose_3d",
      "node/test_convtranspose_output_shape",
      "node/test_convtranspose_autopad_same",
      "node/test_convtranspose_pads",
      "pytorch-operator/test_operator_convtranspose",
      "node/test_maxpool_1d_default",
      "node/test_maxpool_3d_default",
      "node/test_maxpool_2d_dilations",
      "node/test_averagepool_2d_same_lower",
      "node/test_maxpool_with_argmax_2d_precomputed_pads",
      "node/test_maxpool_with_argmax_2d_precomputed_strides",
      "node/test_gridsample",
      "node/test_gridsample_bicubic",
      "node/test_gridsample_reflection_padding",
      "pytorch-converted/test_AvgPool3d_stride",
      "node/test_batchnorm_example",
      "node/test_batchnorm_epsilon_training_mode",
      "pytorch-converted/test_BatchNorm3d_eval",
      "node/test_instancenorm_example",
      "node/test_lrn",
      "node/test_mvn",
      "node/test_gemm_all_attributes",
      "node/test_gemm_transposeA",
      "node/test_gemm_default_matrix_bias",
      "pytorch-operator/test_operator_addmm",
  };
  for (const char* c : cases) {
    const fs::path dir = fs::path(kData) / c;
    if (!fs::exists(dir / "model.onnx")) {
      ADD_FAILURE() << c << ": missing from " << kData;
      continue;
    }
    EXPECT_EQ(lowering_verdict(dir), "") << c;
  }
#endif
}

}  // namespace
}  // namespace kiln::testing
