// The CUDA lowering accepts the exported classifier models (FP32 row-major rules and FP16 NHWC
// rules, the builder's own pipeline via cuda_layer_graph, at batch 1): check_gpu_support lowers
// without touching the device, so this runs in every CUDA build, GPU or not. Models are the
// exports of scripts/export_models.py under models/ (skipped when absent).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "builder/build_from_graph.h"
#include "kiln/builder.h"
#include "onnx/importer.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln {
namespace {

TEST(CudaSupport, ExportedClassifiersLowerInFp32AndFp16) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  int checked = 0;
  for (const char* name : {"resnet101", "googlenet", "mobilenet_v2", "efficientnet_b0"}) {
    const std::string path = std::string(KILN_SOURCE_DIR) + "/models/" + name + ".onnx";
    if (!std::filesystem::exists(path)) continue;
    auto imported = onnx_import::import_model_file(path);
    ASSERT_TRUE(imported.ok()) << name << ": " << imported.status().to_string();
    ASSERT_EQ(imported->inputs.size(), 1u) << name;
    const Shape batch1 = {1, 3, 224, 224};
    for (bool fp16 : {false, true}) {
      // The graph the builder itself lowers for the CUDA target (one pipeline: build_from_graph.h).
      BuilderConfig c;
      c.fp16 = fp16;
      OptimizationProfile p;
      ASSERT_TRUE(p.set_dimensions(imported->value(imported->inputs[0]).name, batch1, batch1, batch1).ok());
      c.profiles.push_back(p);
      std::vector<Shape> opt;
      auto laid = cuda_layer_graph(*imported, c, &opt);
      ASSERT_TRUE(laid.ok()) << name << ": " << laid.status().to_string();
      ASSERT_EQ(opt, std::vector<Shape>{batch1});
      auto vs = cuda::infer_value_shapes_by_reference(*laid, opt);
      ASSERT_TRUE(vs.ok()) << name << ": " << vs.status().to_string();
      Status s = cuda::check_gpu_support(*laid, *vs, fp16);
      EXPECT_TRUE(s.ok()) << name << (fp16 ? " [fp16]: " : " [fp32]: ") << s.to_string();
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no exported models under models/ (scripts/export_models.py)";
#endif
}

}  // namespace
}  // namespace kiln
