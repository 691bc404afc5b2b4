// The CUDA path against the CPU reference, on random (never zero) data. Skips cleanly where
// there is no GPU (or Kiln was built without CUDA).
#include <gtest/gtest.h>

#include "gpu/gpu_test_util.h"

#include <cmath>
#include <map>

#include "passes/pass_test_util.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/device.h"
#include "backends/cuda/gpu_layers.h"
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

using ir::OpKind;

// conv(3x3, pad 1) -> +bias -> relu -> maxpool 2x2 -> conv(1x1) + residual -> global avg pool
// -> flatten -> gemm -> softmax
[[maybe_unused]] ir::Graph small_cnn() {
  TinyGraph t;
  auto x = t.input("x", {2, 8, 16, 16});
  auto w1 = t.constant("w1", random_tensor({16, 8, 3, 3}, 21, -0.3f, 0.3f));
  auto b1 = t.constant("b1", random_tensor({16}, 22));
  auto c1 = t.node(OpKind::kConv, "conv1", {x, w1, b1}, {2, 16, 16, 16}, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  auto r1 = t.node(OpKind::kRelu, "relu1", {c1}, {2, 16, 16, 16});
  auto p1 = t.node(OpKind::kMaxPool, "pool1", {r1}, {2, 16, 8, 8},
                   {{"kernel_shape", ir::Attribute::of_ints({2, 2})}, {"strides", ir::Attribute::of_ints({2, 2})}});
  auto w2 = t.constant("w2", random_tensor({16, 16, 1, 1}, 23, -0.3f, 0.3f));
  auto c2 = t.node(OpKind::kConv, "conv2", {p1, w2}, {2, 16, 8, 8});
  auto a2 = t.node(OpKind::kAdd, "add2", {c2, p1}, {2, 16, 8, 8});
  auto r2 = t.node(OpKind::kRelu, "relu2", {a2}, {2, 16, 8, 8});
  auto gp = t.node(OpKind::kGlobalAveragePool, "gap", {r2}, {2, 16, 1, 1});
  auto fl = t.node(OpKind::kFlatten, "flatten", {gp}, {2, 16});
  auto wf = t.constant("wf", random_tensor({10, 16}, 24));
  auto bf = t.constant("bf", random_tensor({10}, 25));
  ir::Attribute one;
  one.kind = ir::Attribute::Kind::kInt;
  one.i = 1;
  auto fc = t.node(OpKind::kGemm, "fc", {fl, wf, bf}, {2, 10}, {{"transB", one}});
  auto sm = t.node(OpKind::kSoftmax, "softmax", {fc}, {2, 10});
  t.g.outputs = {fc, sm};
  return t.g;
}

#ifdef KILN_HAVE_CUDA
std::vector<Tensor> run_gpu(const ir::Graph& g, const std::vector<Tensor>& in, bool fp16, bool tf32, bool graph,
                            std::map<std::string, TacticId> preset = {}) {
  auto shapes = cuda::infer_value_shapes_by_reference(g, {in[0].shape()});
  EXPECT_TRUE(shapes.ok()) << shapes.status().to_string();
  cuda::GpuBuildOptions o;
  o.precision.fp16 = fp16;
  o.precision.tf32 = tf32;
  for (const auto& [layer, id] : preset) o.preset_tactics[layer] = {id, 0};
  auto model = cuda::GpuModel::create(g, *shapes, o);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  if (!model.ok()) return {};
  for (const auto& [layer, id] : preset)
    for (const auto& info : (*model)->layers())
      if (info.name == layer) EXPECT_EQ(info.tactic_id, id) << layer << ": " << info.tactic;
  auto ctx = (*model)->create_context();
  EXPECT_TRUE(ctx.ok());
  (*ctx)->use_cuda_graph(graph);
  std::vector<Tensor> out;
  Status s = (*ctx)->run(in, &out);
  EXPECT_TRUE(s.ok()) << s.to_string();
  if (graph) {  // replay must give the same bits
    std::vector<Tensor> again;
    EXPECT_TRUE((*ctx)->run(in, &again).ok());
    for (size_t k = 0; k < out.size(); ++k) EXPECT_TRUE(out[k].bit_equal(again[k]));
  }
  return out;
}
#endif

TEST(GpuModel, Fp32MatchesCpuReference) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  ir::Graph g = small_cnn();
  passes::PassOptions po;
  po.evaluator = &reference_evaluator();
  ASSERT_TRUE(passes::run_pipeline(g, po).ok());
  std::vector<Tensor> in = {random_tensor({2, 8, 16, 16}, 26)};
  auto ref = interpret(g, in);
  ASSERT_TRUE(ref.ok());
  auto out = run_gpu(g, in, false, false, false);
  ASSERT_EQ(out.size(), ref->size());
  EXPECT_LE(relative_diff(*ref, out), 1e-4);
#endif
}

TEST(GpuModel, Fp16NhwcWithCudaGraphMatchesCpuReference) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  ir::Graph g = small_cnn();
  ASSERT_TRUE(passes::run_pipeline(g, kiln::testing::reference_pass_options()).ok());
  std::vector<Tensor> in = {random_tensor({2, 8, 16, 16}, 27)};
  auto ref = interpret(g, in);
  ASSERT_TRUE(ref.ok());
  auto out = run_gpu(g, in, true, true, true);
  ASSERT_EQ(out.size(), ref->size());
  EXPECT_LE(relative_diff(*ref, out), 2e-2);
#endif
}

// conv2 (1x1, residual, ReLU) forced onto each of its two tactics: cuDNN and the cuBLASLt GEMM
// with the residual as C and a bias+ReLU epilogue.
TEST(GpuModel, OneByOneConvTacticsAgree) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  ir::Graph g = small_cnn();
  ASSERT_TRUE(passes::run_pipeline(g, kiln::testing::reference_pass_options()).ok());
  std::vector<Tensor> in = {random_tensor({2, 8, 16, 16}, 28)};
  auto ref = interpret(g, in);
  ASSERT_TRUE(ref.ok());
  for (TacticId t : {make_tactic_id(TacticSource::kCudnn, 1), make_tactic_id(TacticSource::kCublasLt, 0)}) {
    auto out = run_gpu(g, in, true, true, false, {{"conv2", t}});
    ASSERT_EQ(out.size(), ref->size()) << t;
    EXPECT_LE(relative_diff(*ref, out), 2e-2) << t;
  }
#endif
}

// Both convs forced onto cuDNN's graph API (conv1: 3x3 + bias + ReLU; conv2: 1x1 + bias +
// residual + ReLU, each one operation graph), at heuristic ranks 0 and 1.
TEST(GpuModel, CudnnGraphConvMatchesCpuReference) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  ir::Graph g = small_cnn();
  ASSERT_TRUE(passes::run_pipeline(g, kiln::testing::reference_pass_options()).ok());
  std::vector<Tensor> in = {random_tensor({2, 8, 16, 16}, 29)};
  auto ref = interpret(g, in);
  ASSERT_TRUE(ref.ok());
  for (TacticId t : {make_tactic_id(TacticSource::kCudnnGraph, 0), make_tactic_id(TacticSource::kCudnnGraph, 1)}) {
    cuda::reset_conv_graph_decisions();
    auto out = run_gpu(g, in, true, true, false, {{"conv1", t}, {"conv2", t}});
    ASSERT_EQ(out.size(), ref->size()) << t;
    EXPECT_LE(relative_diff(*ref, out), 2e-2) << t;
  }
#endif
}

// A graph through assign_layouts (FP16 preference): conv NHWC, one Reformat layer of the plan
// before the row-major Reshape; the GPU runs that Reformat under its plan name.
TEST(GpuModel, LaidOutGraphMatchesCpuReference) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  TinyGraph t;
  auto x = t.input("x", {2, 8, 6, 6});
  auto w = t.constant("w", random_tensor({8, 8, 3, 3}, 31, -0.3f, 0.3f));
  auto c = t.node(OpKind::kConv, "conv", {x, w}, {2, 8, 6, 6}, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  auto r = t.node(OpKind::kRelu, "relu", {c}, {2, 8, 6, 6});
  Tensor shape_t(DataType::kInt64, {2});
  shape_t.data<int64_t>()[0] = 2;
  shape_t.data<int64_t>()[1] = 288;
  auto shape = t.constant("shape", shape_t);
  auto flat = t.node(OpKind::kReshape, "reshape", {r, shape}, {2, 288});
  auto sm = t.node(OpKind::kSoftmax, "softmax", {flat}, {2, 288}, {{"axis", ir::Attribute::of_int(-1)}});
  t.g.outputs = {sm};
  ir::Graph g = t.g;
  ASSERT_TRUE(passes::run_pipeline(g, kiln::testing::reference_pass_options()).ok());
  g.compact();
  auto n = passes::assign_layouts(g, passes::tensor_core_layout_preference);
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(*n, 1);
  std::vector<Tensor> in = {random_tensor({2, 8, 6, 6}, 32)};
  auto ref = interpret(g, in);
  ASSERT_TRUE(ref.ok());
  auto shapes = cuda::infer_value_shapes_by_reference(g, {in[0].shape()});
  ASSERT_TRUE(shapes.ok());
  cuda::GpuBuildOptions o;
  o.precision.fp16 = true;
  auto model = cuda::GpuModel::create(g, *shapes, o);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  int reformats = 0;
  for (const auto& info : (*model)->layers()) reformats += info.name.rfind("reformat:", 0) == 0;
  EXPECT_EQ(reformats, 1);
  auto out = run_gpu(g, in, true, true, false);
  ASSERT_EQ(out.size(), ref->size());
  EXPECT_LE(relative_diff(*ref, out), 2e-2);
#endif
}

}  // namespace
}  // namespace kiln::testing
