// QuantConv on the CUDA path (docs/decisions/0078), from the INT8 / FP8 Q/DQ model of a residual
// CNN block (testing::residual_cnn_model quantized by kiln::quantize_onnx):
//   - without a GPU (CUDA builds): the graph the builder lowers has its 8-bit convs as QuantConv
//     layers stored NHWC at fp32 and fp16, and check_gpu_support accepts it;
//   - with a GPU: the CUDA plans (fp32 and fp16 storage) agree with the CPU plan of the same model
//     (integer accumulation on both sides; the fp16 plan also rounds its float activations), and
//     each QuantConv layer ran an 8-bit tactic (its tactic name starts with "quant_conv").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "builder/build_from_graph.h"
#include "gpu_test_util.h"
#include "io/npz.h"
#include "kiln/builder.h"
#include "kiln/quantize.h"
#include "kiln/runtime.h"
#include "onnx/importer.h"
#include "plan/onnx_test_models.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

Tensor wave_input(const Shape& s, float amp, float phase) {
  Tensor t(DataType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = amp * std::sin(0.37f * static_cast<float>(i) + phase);
  return t;
}

// The Q/DQ model's bytes (calibrated on 12 samples), or "" after a test failure.
std::string qdq_model(const std::string& dir, QuantFormat f) {
  const std::string src = residual_cnn_model(f == QuantFormat::kFp8E4M3 ? 19 : 17).save(dir + "/cnn.onnx");
  EXPECT_TRUE(io::write_npz(dir + "/calib.npz", {{"x", wave_input({12, 16, 8, 8}, 2.f, 0.3f)}}).ok());
  QuantizeConfig qc;
  qc.data = dir + "/calib.npz";
  qc.format = f;
  auto bytes = quantize_onnx(src, qc);
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  return bytes.ok() ? *bytes : "";
}

BuilderConfig config(TargetDevice t, bool fp16, const Shape& x) {
  BuilderConfig c;
  c.target = t;
  c.fp16 = fp16;
  c.quant_conv = true;  // these tests are about the QuantConv CUDA path (off by default)
  OptimizationProfile p;
  EXPECT_TRUE(p.set_dimensions("x", x, x, x).ok());
  c.profiles = {p};
  return c;
}

TEST(GpuQuantConvSupport, ResidualCnnLowersWithQuantConvLayers) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  const std::string dir = make_temp_dir("quant_conv_support");
  ASSERT_FALSE(dir.empty());
  const Shape x = {2, 16, 8, 8};
  for (QuantFormat f : {QuantFormat::kInt8, QuantFormat::kFp8E4M3}) {
    SCOPED_TRACE(quant_format_name(f));
    const std::string bytes = qdq_model(dir, f);
    ASSERT_FALSE(bytes.empty());
    auto g = onnx_import::import_model_bytes(bytes, "");
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    for (bool fp16 : {false, true}) {
      SCOPED_TRACE(fp16);
      auto laid = cuda_layer_graph(*g, config(TargetDevice::kCuda, fp16, x), nullptr);
      ASSERT_TRUE(laid.ok()) << laid.status().to_string();
      int quant_conv = 0, eight_bit_out = 0;
      for (const ir::Node& n : laid->nodes) {
        if (n.removed || n.op != ir::OpKind::kQuantConv) continue;
        ++quant_conv;
        EXPECT_EQ(n.attr_string("layout", ""), "NHWC") << n.name;
        // conv1 -> Relu -> conv2 only: conv1 writes conv2's 8-bit input (docs/decisions/0081).
        if (n.has_attr("y_type")) {
          ++eight_bit_out;
          EXPECT_EQ(n.attr_string("y_type", ""), f == QuantFormat::kInt8 ? "int8" : "fp8e4m3fn");
        }
      }
      EXPECT_EQ(quant_conv, 3);
      EXPECT_EQ(eight_bit_out, 1);
      // By default a CUDA build keeps these convolutions in the Q/DQ form unless it is an FP8
      // build (decision 0078 addendum).
      BuilderConfig dflt = config(TargetDevice::kCuda, fp16, x);
      dflt.quant_conv = false;
      dflt.int8 = f == QuantFormat::kInt8;
      dflt.fp8 = f == QuantFormat::kFp8E4M3;
      auto plain = cuda_layer_graph(*g, dflt, nullptr);
      ASSERT_TRUE(plain.ok()) << plain.status().to_string();
      int fused_by_default = 0;
      for (const ir::Node& n : plain->nodes) fused_by_default += !n.removed && n.op == ir::OpKind::kQuantConv ? 1 : 0;
      EXPECT_EQ(fused_by_default, f == QuantFormat::kFp8E4M3 ? 3 : 0);
      auto vs = cuda::infer_value_shapes_by_reference(*laid, {x});
      ASSERT_TRUE(vs.ok()) << vs.status().to_string();
      Status s = cuda::check_gpu_support(*laid, *vs, fp16);
      EXPECT_TRUE(s.ok()) << s.to_string();
    }
  }
  std::filesystem::remove_all(dir);
#endif
}

TEST(GpuQuantConv, CudaPlansMatchTheCpuPlan) {
  REQUIRE_GPU();
  const std::string dir = make_temp_dir("quant_conv");
  ASSERT_FALSE(dir.empty());
  const Shape xs = {4, 16, 8, 8};
  const Tensor x = wave_input(xs, 2.5f, 1.1f);
  for (QuantFormat f : {QuantFormat::kInt8, QuantFormat::kFp8E4M3}) {
    SCOPED_TRACE(quant_format_name(f));
    const std::string path = dir + "/cnn.qdq.onnx";
    {
      std::ofstream o(path, std::ios::binary);
      o << qdq_model(dir, f);
    }
    auto run = [&](TargetDevice t, bool fp16, int* quant_conv_layers) -> Tensor {
      auto plan = Builder::build(path, config(t, fp16, xs));
      EXPECT_TRUE(plan.ok()) << plan.status().to_string();
      if (!plan.ok()) return {};
      auto e = Runtime::deserialize_engine(*plan);
      EXPECT_TRUE(e.ok()) << e.status().to_string();
      if (!e.ok()) return {};
      for (const LayerInfo& l : (*e)->layers())
        if (l.op == "QuantConv") {
          ++*quant_conv_layers;
          if (t == TargetDevice::kCuda) {
            EXPECT_EQ(l.tactic.rfind("quant_conv", 0), 0u) << l.name << ": " << l.tactic;
            std::printf("  %s %s: %s\n", fp16 ? "fp16" : "fp32", l.name.c_str(), l.tactic.c_str());  // which tactic won
          }
        }
      auto ctx = (*e)->create_execution_context();
      EXPECT_TRUE(ctx->set_input("x", x).ok());
      EXPECT_TRUE(ctx->execute().ok());
      auto y = ctx->output("y");
      EXPECT_TRUE(y.ok());
      return y.ok() ? *y : Tensor();
    };
    int cpu_layers = 0;
    const Tensor ref = run(TargetDevice::kCpu, false, &cpu_layers);
    ASSERT_TRUE(ref.defined());
    EXPECT_EQ(cpu_layers, 3);
    double max_ref = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) max_ref = std::max(max_ref, std::fabs(double{ref.data<float>()[i]}));
    ASSERT_GT(max_ref, 0.1);
    for (bool fp16 : {false, true}) {
      SCOPED_TRACE(fp16);
      int gpu_layers = 0;
      const Tensor got = run(TargetDevice::kCuda, fp16, &gpu_layers);
      ASSERT_TRUE(got.defined());
      ASSERT_EQ(got.shape(), ref.shape());
      EXPECT_EQ(gpu_layers, cpu_layers);
      // fp32 storage: the same quantized codes, integer sums; FP8 sums in float32 on the GPU (double
      // on the CPU) and the epilogue's float rounding differ by a few ulps, and an element at a
      // rounding boundary of the next quantization may move by one step. fp16 storage rounds each
      // activation before it is quantized: more elements move by one step.
      double max_err = 0;
      for (int64_t i = 0; i < ref.numel(); ++i)
        max_err = std::max(max_err, std::fabs(double{got.data<float>()[i]} - ref.data<float>()[i]));
      EXPECT_LT(max_err, (fp16 ? 4e-2 : 2e-2) * max_ref) << max_err << " of " << max_ref;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::testing
