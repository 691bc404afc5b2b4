// An opset-23 model (RMSNormalization, then the 3-D form of Attention with is_causal) imported
// as Kiln's layers (onnx/lowered_ops.h, docs/decisions/0066) and lowered for CUDA in fp16,
// without a GPU: the layer graph keeps one Attention and one RMSNormalization layer, and
// check_gpu_support accepts it with the fp32 and fp16 rules.
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

OnnxModel rms_attention_model() {
  OnnxModel m(23);
  m.input("x", kF32, {std::string("batch"), int64_t{16}, int64_t{64}});
  std::vector<float> scale(64);
  for (size_t i = 0; i < scale.size(); ++i) scale[i] = 0.5f + 0.01f * static_cast<float>(i);
  m.initializer("scale", {64}, scale);
  m.node("RMSNormalization", {"x", "scale"}, {"h"}, "norm");
  auto* a = m.node("Attention", {"h", "h", "h"}, {"y"}, "attn");
  for (const auto& [k, v] : std::vector<std::pair<std::string, int64_t>>{{"is_causal", 1}, {"q_num_heads", 4}, {"kv_num_heads", 4}}) {
    auto* at = a->add_attribute();
    at->set_name(k);
    at->set_type(onnx::AttributeProto::INT);
    at->set_i(v);
  }
  m.output("y", kF32, {std::string("batch"), int64_t{16}, int64_t{64}});
  return m;
}

TEST(GpuOnnxAttentionImport, RmsNormAndAttentionLowerInFp16) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  onnx_import::ImportOptions o;  // allow_unknown off: opset 23 is known (0066 addendum)
  auto g = onnx_import::import_model_bytes(rms_attention_model().bytes(), "", o);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const Shape x_shape = {2, 16, 64};
  for (bool fp16 : {false, true}) {
    SCOPED_TRACE(fp16);
    BuilderConfig c;
    c.target = TargetDevice::kCuda;
    c.fp16 = fp16;
    OptimizationProfile p;
    ASSERT_TRUE(p.set_dimensions("x", {1, 16, 64}, x_shape, x_shape).ok());
    c.profiles = {p};
    auto laid = cuda_layer_graph(*g, c, nullptr);
    ASSERT_TRUE(laid.ok()) << laid.status().to_string();
    int attention = 0, rms = 0;
    for (const ir::Node& n : laid->nodes) {
      if (n.removed) continue;
      attention += n.op == ir::OpKind::kAttention;
      rms += n.op == ir::OpKind::kRMSNormalization;
    }
    EXPECT_EQ(attention, 1);
    EXPECT_EQ(rms, 1);
    auto vs = cuda::infer_value_shapes_by_reference(*laid, {x_shape});
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    Status s = cuda::check_gpu_support(*laid, *vs, fp16);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
#endif
}

// Attention-24 with nonpad_kv_seqlen and is_causal (no past): the run-time padding / causal mask
// (Shape, Gather, Range, Less, LessOrEqual, And layers) must be accepted too.
TEST(GpuOnnxAttentionImport, NonpadKvSeqlenMaskLowersInFp16) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  OnnxModel m(24);
  for (const char* name : {"q", "k", "v"}) m.input(name, kF32, {std::string("batch"), int64_t{4}, int64_t{8}, int64_t{16}});
  m.input("nonpad", onnx::TensorProto::INT64, {std::string("batch")});
  auto* a = m.node("Attention", {"q", "k", "v", "", "", "", "nonpad"}, {"y"}, "attn");
  auto* at = a->add_attribute();
  at->set_name("is_causal");
  at->set_type(onnx::AttributeProto::INT);
  at->set_i(1);
  m.output("y", kF32, {std::string("batch"), int64_t{4}, int64_t{8}, int64_t{16}});
  onnx_import::ImportOptions o;  // allow_unknown off: opset 24 is known (0066 addendum)
  auto g = onnx_import::import_model_bytes(m.bytes(), "", o);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const Shape qkv = {2, 4, 8, 16};
  for (bool fp16 : {false, true}) {
    SCOPED_TRACE(fp16);
    BuilderConfig c;
    c.target = TargetDevice::kCuda;
    c.fp16 = fp16;
    OptimizationProfile p;
    for (const char* name : {"q", "k", "v"}) ASSERT_TRUE(p.set_dimensions(name, {1, 4, 8, 16}, qkv, qkv).ok());
    ASSERT_TRUE(p.set_dimensions("nonpad", {1}, {2}, {2}).ok());
    c.profiles = {p};
    auto laid = cuda_layer_graph(*g, c, nullptr);
    ASSERT_TRUE(laid.ok()) << laid.status().to_string();
    auto vs = cuda::infer_value_shapes_by_reference(*laid, {qkv, qkv, qkv, {2}});
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    Status s = cuda::check_gpu_support(*laid, *vs, fp16);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
#endif
}

}  // namespace
}  // namespace kiln::testing
