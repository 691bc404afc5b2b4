// FusedPointwise and the conv epilogue's SiLU/GELU on the CUDA path against the CPU reference,
// on random (never zero) data: FP32 (near exact) and FP16 NHWC (FP16 tolerance), with
// broadcast inputs. Skips cleanly where there is no GPU (or Kiln was built without CUDA).
#include <gtest/gtest.h>

#include "gpu/gpu_test_util.h"

#include "passes/pass_test_util.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/device.h"
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

using ir::OpKind;

// x [2,8,6,6] -> Conv 3x3 (SiLU epilogue) -> * g[8,1,1] (+) y[1,8,1,1] -> Sigmoid -> * x ->
// HardSwish -> + z[6] -> Gelu(tanh); after the pipeline: FusedConv{Silu} + one FusedPointwise
// with inputs conv, g, y, x, z (per-channel, per-channel activation, full, last-dim broadcast).
[[maybe_unused]] ir::Graph pointwise_graph() {
  TinyGraph t;
  const Shape xs = {2, 8, 6, 6};
  auto x = t.input("x", xs);
  auto y = t.input("y", {1, 8, 1, 1});
  auto z = t.input("z", {6});
  auto w = t.constant("w", random_tensor({8, 8, 3, 3}, 101, -0.3f, 0.3f));
  auto b = t.constant("b", random_tensor({8}, 102));
  auto c = t.node(OpKind::kConv, "conv", {x, w, b}, xs, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  auto cs = t.node(OpKind::kSigmoid, "conv_sig", {c}, xs);
  auto silu = t.node(OpKind::kMul, "conv_silu", {c, cs}, xs);
  auto m = t.node(OpKind::kMul, "scale", {silu, t.constant("g", random_tensor({8, 1, 1}, 103, 0.5f, 1.5f))}, xs);
  auto a = t.node(OpKind::kAdd, "shift", {m, y}, xs);
  auto s = t.node(OpKind::kSigmoid, "sig", {a}, xs);
  auto gx = t.node(OpKind::kMul, "gate", {s, x}, xs);
  auto hs = t.node(OpKind::kHardSwish, "hswish", {gx}, xs);
  auto az = t.node(OpKind::kAdd, "add_z", {hs, z}, xs);
  t.g.outputs = {t.node(OpKind::kGelu, "gelu", {az}, xs, {{"approximate", ir::Attribute::of_string("tanh")}})};
  t.g.nodes.back().opset = 20;
  return t.g;
}

#ifdef KILN_HAVE_CUDA
std::vector<Tensor> run_on_gpu(const ir::Graph& g, const std::vector<Tensor>& in, bool fp16, std::vector<std::string>* ops) {
  std::vector<Shape> shapes;
  for (const Tensor& t : in) shapes.push_back(t.shape());
  auto vs = cuda::infer_value_shapes_by_reference(g, shapes);
  EXPECT_TRUE(vs.ok()) << vs.status().to_string();
  if (!vs.ok()) return {};
  cuda::GpuBuildOptions o;
  o.precision.fp16 = fp16;
  o.precision.tf32 = false;
  auto model = cuda::GpuModel::create(g, *vs, o);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  if (!model.ok()) return {};
  for (const auto& info : (*model)->layers()) ops->push_back(info.op);
  auto ctx = (*model)->create_context();
  EXPECT_TRUE(ctx.ok());
  std::vector<Tensor> out;
  Status s = (*ctx)->run(in, &out);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return out;
}

void check_against_cpu(bool fp16, double tol) {
  ir::Graph g = pointwise_graph();
  ASSERT_TRUE(passes::run_pipeline(g, kiln::testing::reference_pass_options()).ok());
  ASSERT_EQ(count_op(g, OpKind::kFusedPointwise), 1);
  ASSERT_EQ(count_op(g, OpKind::kFusedConv), 1);
  std::vector<Tensor> in = {random_tensor({2, 8, 6, 6}, 104, -2.f, 2.f), random_tensor({1, 8, 1, 1}, 105),
                            random_tensor({6}, 106)};
  auto ref = interpret(g, in);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  std::vector<std::string> ops;
  auto out = run_on_gpu(g, in, fp16, &ops);
  ASSERT_EQ(out.size(), ref->size());
  EXPECT_NE(std::find(ops.begin(), ops.end(), "FusedPointwise"), ops.end());
  EXPECT_LE(relative_diff(*ref, out), tol);
}
#endif

TEST(GpuPointwise, Fp32BroadcastProgramMatchesCpuReference) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  check_against_cpu(false, 1e-4);  // the conv (FP32, no TF32) dominates the difference
#endif
}

TEST(GpuPointwise, Fp16NhwcProgramMatchesCpuReference) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  check_against_cpu(true, 2e-2);
#endif
}

// A program alone (no conv): every 4-D input is a graph input, so FP16 mode stores them NHWC.
TEST(GpuPointwise, Fp16NhwcProgramOnGraphInputs) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  TinyGraph t;
  const Shape xs = {2, 5, 4, 3};
  auto x = t.input("x", xs);
  auto y = t.input("y", xs);
  auto e = t.node(OpKind::kSub, "sub", {x, y}, xs);
  auto ab = t.node(OpKind::kAbs, "abs", {e}, xs);
  auto l = t.node(OpKind::kLog, "log", {t.node(OpKind::kAdd, "add1", {ab, t.constant("one", Tensor::scalar(DataType::kFloat32, 1.f))}, xs)}, xs);
  auto cl = t.node(OpKind::kClip, "clip", {l, t.constant("lo", Tensor::scalar(DataType::kFloat32, 0.1f)),
                                          t.constant("hi", Tensor::scalar(DataType::kFloat32, 0.9f))}, xs);
  t.g.outputs = {t.node(OpKind::kMul, "mul", {cl, t.constant("k", random_tensor({5, 1, 1}, 107, 0.5f, 2.f))}, xs)};
  ir::Graph g = t.g;
  ASSERT_TRUE(passes::run_pipeline(g, kiln::testing::reference_pass_options()).ok());
  ASSERT_EQ(passes::live_layers(g), 1);
  std::vector<Tensor> in = {random_tensor(xs, 108, -2.f, 2.f), random_tensor(xs, 109, -2.f, 2.f)};
  auto ref = interpret(g, in);
  ASSERT_TRUE(ref.ok());
  for (bool fp16 : {false, true}) {
    std::vector<std::string> ops;
    auto out = run_on_gpu(g, in, fp16, &ops);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_LE(relative_diff(*ref, out), fp16 ? 2e-2 : 1e-5) << (fp16 ? "fp16" : "fp32");
  }
#endif
}

}  // namespace
}  // namespace kiln::testing
