// Per-layer precision constraints on the CUDA path (BuilderConfig::layer_precisions): the
// lowering converts at precision boundaries only (checked without a GPU through
// plan_gpu_streams), mixed FP16/FP32 and BF16/FP32 engines against the CPU reference on random
// data, and the constraints surviving the plan round trip. GPU tests skip cleanly without one.
#include <gtest/gtest.h>

#include "builder/build_from_graph.h"
#include "gpu/gpu_test_util.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gpu/branch_graphs.h"
#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "passes/pass_test_util.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

// The ResNet block as the builder lowers it for a CUDA plan in fp16 / bf16 / fp32 with the
// `--layer-precisions` rules `spec` (BuilderConfig::layer_precisions).
[[maybe_unused]] ir::Graph constrained(const std::string& spec, bool fp16, bool bf16 = false) {
  auto rules = passes::parse_layer_precisions(spec);
  EXPECT_TRUE(rules.ok()) << rules.status().to_string();
  return resnet_block(2, 16, cuda_config(fp16, bf16, rules.ok() ? *rules : std::vector<LayerPrecision>{}));
}

#ifdef KILN_HAVE_CUDA
std::vector<std::string> lowered_layers(const ir::Graph& g, const cuda::GpuBuildOptions& o) {
  auto shapes = cuda::infer_value_shapes_by_reference(g, {{2, 16, 16, 16}});
  EXPECT_TRUE(shapes.ok()) << shapes.status().to_string();
  if (!shapes.ok()) return {};
  auto s = cuda::plan_gpu_streams(g, *shapes, o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? s->layers : std::vector<std::string>{};
}

std::vector<std::string> with_prefix(const std::vector<std::string>& names, const std::string& prefix) {
  std::vector<std::string> r;
  for (const auto& n : names)
    if (n.rfind(prefix, 0) == 0) r.push_back(n);
  return r;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "\n  " + x;
  return s;
}
#endif

// Without a GPU: one FP32 conv inside an FP16 plan gets exactly one convert layer in (to fp32)
// and one out (back to fp16); every layer constrained to fp32 makes the FP16 plan's layer list
// the FP32 plan's (no convert, no reformat: the input is read as given).
TEST(GpuLayerPrecision, LoweringConvertsOnlyAtPrecisionBoundaries) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  cuda::GpuBuildOptions fp16;
  fp16.precision.fp16 = true;
  fp16.max_aux_streams = 0;
  const auto plain = lowered_layers(resnet_block(2, 16, cuda_config(true)), fp16);
  EXPECT_TRUE(with_prefix(plain, "convert:").empty()) << joined(plain);
  const auto mixed = lowered_layers(constrained("conv2:fp32", true), fp16);
  const auto converts = with_prefix(mixed, "convert:");
  ASSERT_EQ(converts.size(), 2u) << joined(mixed);
  EXPECT_NE(converts[0].find(":fp32"), std::string::npos) << converts[0];
  EXPECT_NE(converts[1].find(":fp16"), std::string::npos) << converts[1];
  // conv2 sits between them.
  const auto at = [&](const std::string& n) { return std::find(mixed.begin(), mixed.end(), n) - mixed.begin(); };
  EXPECT_LT(at(converts[0]), at("conv2"));
  EXPECT_GT(at(converts[1]), at("conv2"));

  cuda::GpuBuildOptions fp32 = fp16;
  fp32.precision.fp16 = false;
  EXPECT_EQ(lowered_layers(constrained("*:fp32", true), fp16), lowered_layers(resnet_block(2, 16), fp32));
#endif
}

#ifdef KILN_HAVE_CUDA
struct Ran {
  std::vector<Tensor> out;
  std::vector<cuda::GpuLayerInfo> layers;
};

Ran run_on_gpu(const ir::Graph& g, const Tensor& x, const cuda::GpuBuildOptions& o) {
  Ran r;
  auto shapes = cuda::infer_value_shapes_by_reference(g, {x.shape()});
  EXPECT_TRUE(shapes.ok()) << shapes.status().to_string();
  if (!shapes.ok()) return r;
  auto model = cuda::GpuModel::create(g, *shapes, o);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  if (!model.ok()) return r;
  r.layers = (*model)->layers();
  auto ctx = (*model)->create_context();
  EXPECT_TRUE(ctx.ok()) << ctx.status().to_string();
  if (!ctx.ok()) return r;
  Status s = (*ctx)->run({x}, &r.out);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return r;
}

std::string tactic_of(const Ran& r, const std::string& layer) {
  for (const auto& l : r.layers)
    if (l.name == layer) return l.tactic;
  return "(no layer " + layer + ")";
}
#endif

// FP16 plan with conv2 and head in FP32: those layers' tactics are fp32 ones, the rest fp16,
// and the outputs match the CPU reference at FP16 accuracy.
TEST(GpuLayerPrecision, MixedFp16Fp32EngineMatchesCpuReference) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  const ir::Graph g = constrained("conv2:fp32,head:fp32", true);
  const Tensor x = random_tensor({2, 16, 16, 16}, 71);
  auto ref = interpret(resnet_block_graph(2, 16), {x});
  ASSERT_TRUE(ref.ok());
  cuda::GpuBuildOptions o;
  o.precision.fp16 = true;
  o.precision.tf32 = false;
  Ran r = run_on_gpu(g, x, o);
  ASSERT_EQ(r.out.size(), 1u);
  EXPECT_LE(relative_diff(*ref, r.out), 2e-2);
  for (const char* l : {"conv2", "head"}) {
    EXPECT_NE(tactic_of(r, l).find("fp32"), std::string::npos) << l << ": " << tactic_of(r, l);
    EXPECT_EQ(tactic_of(r, l).find("fp16"), std::string::npos) << l << ": " << tactic_of(r, l);
  }
  EXPECT_NE(tactic_of(r, "conv1").find("fp16"), std::string::npos) << tactic_of(r, "conv1");
#endif
}

// A BF16 plan with every layer constrained to FP32 (TF32 off) computes what the FP32 plan does:
// FP32-level error against the CPU reference, far below the plain BF16 plan's.
TEST(GpuLayerPrecision, AllFp32ConstraintsGiveFp32Accuracy) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  const Tensor x = random_tensor({2, 16, 16, 16}, 72);
  auto ref = interpret(resnet_block_graph(2, 16), {x});
  ASSERT_TRUE(ref.ok());
  cuda::GpuBuildOptions o;
  o.precision.bf16 = true;
  o.precision.tf32 = false;
  Ran plain = run_on_gpu(resnet_block(2, 16, cuda_config(false, true)), x, o);
  Ran all32 = run_on_gpu(constrained("*:fp32", false, true), x, o);
  ASSERT_EQ(plain.out.size(), 1u);
  ASSERT_EQ(all32.out.size(), 1u);
  const double e_plain = relative_diff(*ref, plain.out), e_all32 = relative_diff(*ref, all32.out);
  EXPECT_LE(e_all32, 1e-4);
  EXPECT_GT(e_plain, 1e-3) << "plain BF16 should carry BF16 rounding error";
  for (const auto& l : all32.layers) EXPECT_EQ(l.tactic.find("bf16"), std::string::npos) << l.name << ": " << l.tactic;
#endif
}

// The Builder writes the constraints into the plan (the "precision" attribute); the engine
// deserialized from it runs the constrained layer in FP32 and matches the CPU reference.
TEST(GpuLayerPrecision, ConstraintsSurviveThePlanRoundTrip) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  BuilderConfig c;
  c.target = TargetDevice::kCuda;
  c.fp16 = true;
  c.layer_precisions = {{"conv2", DataType::kFloat32}};
  const ir::Graph g = resnet_block_graph(2, 16);
  auto plan = build_from_graph(g, c);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto engine = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  int converts = 0;
  std::string conv2;
  for (const auto& l : (*engine)->device_layers()) {
    converts += l.name.rfind("convert:", 0) == 0;
    if (l.name == "conv2") conv2 = l.tactic;
  }
  EXPECT_EQ(converts, 2);
  EXPECT_NE(conv2.find("fp32"), std::string::npos) << conv2;
  auto ctx = (*engine)->create_execution_context();
  const Tensor x = random_tensor({2, 16, 16, 16}, 73);
  ASSERT_TRUE(ctx->set_input("x", x).ok());
  ASSERT_TRUE(ctx->execute().ok());
  auto ref = interpret(g, {x});
  ASSERT_TRUE(ref.ok());
  auto out = ctx->output(g.value(g.outputs[0]).name);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_LE(relative_diff(*ref, {*out}), 2e-2);
  // A rule that matches nothing is an error naming it.
  c.layer_precisions = {{"no_such_layer*", DataType::kFloat32}};
  auto bad = build_from_graph(g, c);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'no_such_layer*' matches no layer"), std::string::npos)
      << bad.status().message();
#endif
}

}  // namespace
}  // namespace kiln::testing
