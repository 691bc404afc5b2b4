// The ONNX Runtime-style Q/DQ CNN + MLP (testing::ort_qdq_cnn_mlp_model) as the builder lowers
// it for CUDA, without a GPU: after propagate_qdq / eliminate_redundant_qdq its Gemm and MatMul
// are QuantLinear layers, no 8-bit tensor reaches a data-movement layer, and check_gpu_support
// accepts the graph with the fp32 and fp16 rules (docs/decisions/0056).
#include <gtest/gtest.h>

#include "builder/build_from_graph.h"
#include "kiln/builder.h"
#include "onnx/importer.h"
#include "plan/onnx_test_models.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

TEST(GpuQdqPropagationSupport, OrtQdqCnnMlpLowersWithQuantLinearLayers) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  auto g = onnx_import::import_model_bytes(ort_qdq_cnn_mlp_model().bytes(), "");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const Shape x_shape = {2, 3, 8, 8};
  for (bool fp16 : {false, true}) {
    SCOPED_TRACE(fp16);
    BuilderConfig c;
    c.target = TargetDevice::kCuda;
    c.fp16 = fp16;
    OptimizationProfile p;
    ASSERT_TRUE(p.set_dimensions("x", x_shape, x_shape, x_shape).ok());
    c.profiles = {p};
    auto laid = cuda_layer_graph(*g, c, nullptr);
    ASSERT_TRUE(laid.ok()) << laid.status().to_string();
    int quant_linear = 0;
    for (const ir::Node& n : laid->nodes) {
      if (n.removed) continue;
      quant_linear += n.op == ir::OpKind::kQuantLinear;
      EXPECT_NE(n.op, ir::OpKind::kGemm) << n.name;
      for (ir::ValueId v : n.inputs)
        if (v != ir::kNoValue && n.op != ir::OpKind::kQuantLinear)
          EXPECT_TRUE(laid->value(v).dtype != DataType::kInt8 || laid->value(v).constant) << n.describe();
    }
    EXPECT_EQ(quant_linear, 2);
    auto vs = cuda::infer_value_shapes_by_reference(*laid, {x_shape});
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    Status s = cuda::check_gpu_support(*laid, *vs, fp16);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
#endif
}

}  // namespace
}  // namespace kiln::testing
