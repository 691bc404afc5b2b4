// The CUDA lowering accepts the exported classifier models (FP32 row-major rules and FP16 NHWC
// rules, after the optimizer and layout assignment, at batch 1): check_gpu_support lowers
// without touching the device, so this runs in every CUDA build, GPU or not. Models are the
// exports of scripts/export_models.py under models/ (skipped when absent).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "backends/cpu/interpreter.h"
#include "ir/shape_inference.h"
#include "onnx/importer.h"
#include "passes/pass_test_util.h"
#include "passes/passes.h"

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
    ir::Graph g = std::move(*imported);
    ASSERT_EQ(g.inputs.size(), 1u) << name;
    ir::Value& in = g.value(g.inputs[0]);
    ASSERT_TRUE(in.shape.has_value()) << name;
    const Shape batch1 = {1, 3, 224, 224};
    for (size_t d = 0; d < in.shape->size() && d < batch1.size(); ++d) (*in.shape)[d] = ir::Dim::known(batch1[d]);
    ASSERT_TRUE(ir::infer_shapes(g, nullptr, &reference_evaluator()).ok()) << name;
    ASSERT_TRUE(passes::run_pipeline(g, kiln::testing::reference_pass_options()).ok()) << name;
    g.compact();
    ASSERT_TRUE(g.topo_sort().ok()) << name;
    for (bool fp16 : {false, true}) {
      ir::Graph laid = g;
      auto reformats = passes::assign_layouts(laid, fp16 ? passes::tensor_core_layout_preference
                                                          : passes::row_major_layout_preference);
      ASSERT_TRUE(reformats.ok()) << name << ": " << reformats.status().to_string();
      auto vs = cuda::infer_value_shapes_by_reference(laid, {batch1});
      ASSERT_TRUE(vs.ok()) << name << ": " << vs.status().to_string();
      Status s = cuda::check_gpu_support(laid, *vs, fp16);
      EXPECT_TRUE(s.ok()) << name << (fp16 ? " [fp16]: " : " [fp32]: ") << s.to_string();
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no exported models under models/ (scripts/export_models.py)";
#endif
}

}  // namespace
}  // namespace kiln
