// BF16 storage, the padded first conv, the timing cache, the workspace limit and fallbacks on
// the CUDA path, against the CPU reference on random (never zero) data. Skips cleanly where
// there is no GPU (or Kiln was built without CUDA). Each failure message names the layer,
// tactic or measurement that broke.
#include <gtest/gtest.h>

#include "builder/build_from_graph.h"
#include "gpu/gpu_test_util.h"

#include <cmath>
#include <map>

#include "gpu/builder_graph.h"
#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "passes/pass_test_util.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#include "builder/tactic_selector.h"
#include "builder/timing_cache.h"
#include "runtime/gpu_engine.h"
#endif

namespace kiln::testing {
namespace {

using ir::OpKind;

// conv 3x3 + bias + relu -> maxpool 2x2 -> conv 1x1 + residual + relu -> avgpool 2x2 ->
// global avg pool -> flatten -> gemm(+bias) -> softmax. Input C = `c_in`.
[[maybe_unused]] ir::Graph conv_net(int64_t c_in) {
  TinyGraph t;
  auto x = t.input("x", {2, c_in, 16, 16});
  auto w1 = t.constant("w1", random_tensor({16, c_in, 3, 3}, 41, -0.3f, 0.3f));
  auto b1 = t.constant("b1", random_tensor({16}, 42));
  auto c1 = t.node(OpKind::kConv, "conv1", {x, w1, b1}, {2, 16, 16, 16}, {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  auto r1 = t.node(OpKind::kRelu, "relu1", {c1}, {2, 16, 16, 16});
  auto p1 = t.node(OpKind::kMaxPool, "pool1", {r1}, {2, 16, 8, 8},
                   {{"kernel_shape", ir::Attribute::of_ints({2, 2})}, {"strides", ir::Attribute::of_ints({2, 2})}});
  auto w2 = t.constant("w2", random_tensor({16, 16, 1, 1}, 43, -0.3f, 0.3f));
  auto c2 = t.node(OpKind::kConv, "conv2", {p1, w2}, {2, 16, 8, 8});
  auto a2 = t.node(OpKind::kAdd, "add2", {c2, p1}, {2, 16, 8, 8});
  auto r2 = t.node(OpKind::kRelu, "relu2", {a2}, {2, 16, 8, 8});
  auto p2 = t.node(OpKind::kAveragePool, "pool2", {r2}, {2, 16, 4, 4},
                   {{"kernel_shape", ir::Attribute::of_ints({2, 2})}, {"strides", ir::Attribute::of_ints({2, 2})}});
  auto gp = t.node(OpKind::kGlobalAveragePool, "gap", {p2}, {2, 16, 1, 1});
  auto fl = t.node(OpKind::kFlatten, "flatten", {gp}, {2, 16});
  auto wf = t.constant("wf", random_tensor({10, 16}, 44));
  auto bf = t.constant("bf", random_tensor({10}, 45));
  auto fc = t.node(OpKind::kGemm, "fc", {fl, wf, bf}, {2, 10}, {{"transB", ir::Attribute::of_int(1)}});
  auto sm = t.node(OpKind::kSoftmax, "softmax", {fc}, {2, 10});
  t.g.outputs = {fc, sm};
  return t.g;
}

// Y = relu(X[64,256] · W[256,128] + b): a cuBLASLt GEMM with a bias + ReLU epilogue.
[[maybe_unused]] ir::Graph gemm_net() {
  TinyGraph t;
  auto x = t.input("x", {64, 256});
  auto w = t.constant("w", random_tensor({256, 128}, 51, -0.2f, 0.2f));
  auto b = t.constant("b", random_tensor({128}, 52));
  auto y = t.node(OpKind::kGemm, "gemm", {x, w, b}, {64, 128});
  auto r = t.node(OpKind::kRelu, "relu", {y}, {64, 128});
  t.g.outputs = {r};
  return t.g;
}

// Cosine similarity of all outputs taken as one vector.
[[maybe_unused]] double cosine(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double dot = 0, na = 0, nb = 0;
  for (size_t k = 0; k < a.size() && k < b.size(); ++k)
    for (int64_t i = 0; i < a[k].numel() && i < b[k].numel(); ++i) {
      const double x = a[k].data<float>()[i], y = b[k].data<float>()[i];
      dot += x * y;
      na += x * x;
      nb += y * y;
    }
  return dot / std::sqrt(na * nb);
}

#ifdef KILN_HAVE_CUDA
struct GpuRun {
  std::vector<Tensor> out;
  std::vector<cuda::GpuLayerInfo> layers;
  std::string error;
};

// Builds with `o`; when `o` brings no tactic selection, the builder's selector with an
// in-memory timing cache times the tactics, as a build does.
GpuRun run_gpu(const ir::Graph& g, const std::vector<Tensor>& in, cuda::GpuBuildOptions o) {
  GpuRun r;
  TimingCache memory(gpu::timing_cache_header());
  TacticSelector selector(&memory, TacticSelectorConfig{});
  if (o.tune && !o.select_tactic) o.select_tactic = selector.as_function();
  auto shapes = cuda::infer_value_shapes_by_reference(g, {in[0].shape()});
  if (!shapes.ok()) {
    r.error = shapes.status().to_string();
    return r;
  }
  auto model = cuda::GpuModel::create(g, *shapes, o);
  if (!model.ok()) {
    r.error = model.status().to_string();
    return r;
  }
  r.layers = (*model)->layers();
  auto ctx = (*model)->create_context();
  if (!ctx.ok()) {
    r.error = ctx.status().to_string();
    return r;
  }
  Status s = (*ctx)->run(in, &r.out);
  if (!s.ok()) r.error = s.to_string();
  return r;
}

std::string describe(const std::vector<cuda::GpuLayerInfo>& layers) {
  std::string d;
  for (const auto& l : layers)
    d += "\n  " + l.name + ": " + l.tactic + (l.fallback.empty() ? "" : "  [fallback: " + l.fallback + "]");
  return d;
}

const cuda::GpuLayerInfo* find_layer(const std::vector<cuda::GpuLayerInfo>& layers, const std::string& name) {
  for (const auto& l : layers)
    if (l.name == name) return &l;
  return nullptr;
}
#endif

TEST(GpuPrecision, Bf16ConvNetMatchesCpuReference) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  const ir::Graph g = cuda_graph(conv_net(8), cuda_config(false, true));
  std::vector<Tensor> in = {random_tensor({2, 8, 16, 16}, 46)};
  auto ref = interpret(conv_net(8), in);
  ASSERT_TRUE(ref.ok());
  cuda::GpuBuildOptions o;
  o.precision.bf16 = true;
  GpuRun r = run_gpu(g, in, o);
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_EQ(r.out.size(), ref->size());
  EXPECT_GE(cosine(*ref, r.out), 0.999) << describe(r.layers);
  EXPECT_LE(relative_diff(*ref, r.out), 5e-2) << describe(r.layers);
  // Every tuned layer names bf16 storage; fallbacks (if any) say why.
  for (const auto& l : r.layers) {
    if (l.op == "Reformat") continue;
    EXPECT_NE(l.tactic.find("bf16"), std::string::npos) << l.name << ": " << l.tactic;
    if (l.tactic.find("+epilogue") != std::string::npos || l.tactic.rfind("kiln.pool", 0) == 0)
      EXPECT_FALSE(l.fallback.empty()) << l.name << " runs a fallback tactic without saying why";
  }
  std::printf("bf16 conv net layers:%s\n", describe(r.layers).c_str());
#endif
}

TEST(GpuPrecision, Bf16GemmMatchesCpuReference) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  ir::Graph g = gemm_net();
  std::vector<Tensor> in = {random_tensor({64, 256}, 53)};
  auto ref = interpret(g, in);
  ASSERT_TRUE(ref.ok());
  cuda::GpuBuildOptions o;
  o.precision.bf16 = true;
  GpuRun r = run_gpu(g, in, o);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_GE(cosine(*ref, r.out), 0.999) << describe(r.layers);
  const auto* gemm = find_layer(r.layers, "gemm");
  ASSERT_NE(gemm, nullptr) << describe(r.layers);
  EXPECT_EQ(gemm->tactic.rfind("cublaslt.matmul", 0), 0u) << gemm->tactic;
  EXPECT_NE(gemm->tactic.find("bf16"), std::string::npos) << gemm->tactic;
  EXPECT_GT(gemm->tuned_ms, 0.0);
#endif
}

// The Builder records bf16 in the plan; the engine rebuilt from the plan runs bf16 layers and
// reports device layers, tuned times and memory for `kiln inspect`.
TEST(GpuPrecision, Bf16PlanRecordsPrecisionAndDeviceLayers) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  ir::Graph g = conv_net(8);
  BuilderConfig c;
  c.target = TargetDevice::kCuda;
  c.bf16 = true;
  auto plan = build_from_graph(g, c);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto engine = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  EXPECT_TRUE((*engine)->bf16());
  EXPECT_FALSE((*engine)->fp16());
  const auto dl = (*engine)->device_layers();
  ASSERT_FALSE(dl.empty());
  bool any_tuned = false;
  for (const auto& l : dl) any_tuned |= l.tuned_ms > 0;
  EXPECT_TRUE(any_tuned) << "tuned times must survive the plan round trip (tactic ' tuned_ms=')";
  const DeviceMemoryInfo m = (*engine)->device_memory();
  EXPECT_GT(m.arena_bytes, 0u);
  EXPECT_LE(m.arena_bytes, m.activation_bytes_sum);
  EXPECT_GT(m.weight_bytes, 0u);
  auto ctx = (*engine)->create_execution_context();
  Tensor x = random_tensor({2, 8, 16, 16}, 47);
  ASSERT_TRUE(ctx->set_input("x", x).ok());
  Status s = ctx->execute();
  ASSERT_TRUE(s.ok()) << s.to_string();
  auto ref = interpret(g, {x});
  ASSERT_TRUE(ref.ok());
  auto out = ctx->output(g.value(g.outputs[0]).name);  // the passes keep graph output names
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_GE(cosine({(*ref)[0]}, {*out}), 0.999);
#endif
}

// ResNet-style first conv on C = 3: the input reformat writes NHWC with C padded to 8 and the
// conv weights are padded to match; results agree with the CPU reference and with no padding.
TEST(GpuPrecision, PaddedFirstConvMatchesUnpaddedAndReference) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  TinyGraph t;
  auto x = t.input("x", {4, 3, 32, 32});
  auto w = t.constant("w", random_tensor({16, 3, 7, 7}, 61, -0.2f, 0.2f));
  auto b = t.constant("b", random_tensor({16}, 62));
  auto c = t.node(OpKind::kConv, "conv1", {x, w, b}, {4, 16, 16, 16},
                  {{"pads", ir::Attribute::of_ints({3, 3, 3, 3})}, {"strides", ir::Attribute::of_ints({2, 2})}});
  auto r = t.node(OpKind::kRelu, "relu", {c}, {4, 16, 16, 16});
  t.g.outputs = {r};
  std::vector<Tensor> in = {random_tensor({4, 3, 32, 32}, 63)};
  auto ref = interpret(t.g, in);
  ASSERT_TRUE(ref.ok());
  for (bool bf16 : {false, true}) {
    const ir::Graph g = cuda_graph(t.g, cuda_config(!bf16, bf16));
    cuda::GpuBuildOptions o;
    o.precision.fp16 = !bf16;
    o.precision.bf16 = bf16;
    o.pad_input_channels = true;
    GpuRun padded = run_gpu(g, in, o);
    ASSERT_TRUE(padded.error.empty()) << padded.error;
    o.pad_input_channels = false;
    GpuRun plain = run_gpu(g, in, o);
    ASSERT_TRUE(plain.error.empty()) << plain.error;
    const char* prec = bf16 ? "bf16" : "fp16";
    EXPECT_GE(cosine(*ref, padded.out), 0.999) << prec << describe(padded.layers);
    EXPECT_GE(cosine(*ref, plain.out), 0.999) << prec << describe(plain.layers);
    EXPECT_LE(relative_diff(padded.out, plain.out), bf16 ? 3e-2 : 5e-3) << prec;
    const auto* conv = find_layer(padded.layers, "conv1");
    ASSERT_NE(conv, nullptr) << describe(padded.layers);
    EXPECT_NE(conv->tactic.find("cpad=3->8"), std::string::npos) << conv->tactic;
    const auto* reformat = find_layer(padded.layers, "input_reformat:x");
    ASSERT_NE(reformat, nullptr) << describe(padded.layers);
    EXPECT_NE(reformat->tactic.find("cpad=3->8"), std::string::npos) << reformat->tactic;
    const auto* plain_conv = find_layer(plain.layers, "conv1");
    ASSERT_NE(plain_conv, nullptr);
    EXPECT_EQ(plain_conv->tactic.find("cpad"), std::string::npos) << plain_conv->tactic;
    std::printf("%s first conv: padded %.4f ms (%s), unpadded %.4f ms (%s)\n", prec, conv->tuned_ms,
                conv->tactic.c_str(), plain_conv->tuned_ms, plain_conv->tactic.c_str());
  }
#endif
}

// MaxPool with ceil_mode (GoogLeNet's): the output is one larger than cuDNN's floored size, so
// Kiln's pool kernel runs it (said in `fallback`); equal to the CPU reference in FP32, close in FP16.
TEST(GpuPrecision, CeilModeMaxPoolMatchesReference) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  TinyGraph t;
  auto x = t.input("x", {2, 8, 14, 14});
  auto p = t.node(OpKind::kMaxPool, "pool", {x}, {2, 8, 7, 7},
                  {{"kernel_shape", ir::Attribute::of_ints({3, 3})},
                   {"strides", ir::Attribute::of_ints({2, 2})},
                   {"ceil_mode", ir::Attribute::of_int(1)}});
  t.g.outputs = {p};
  std::vector<Tensor> in = {random_tensor({2, 8, 14, 14}, 71)};
  auto ref = interpret(t.g, in);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  ASSERT_EQ((*ref)[0].shape(), (Shape{2, 8, 7, 7}));
  for (bool fp16 : {false, true}) {
    cuda::GpuBuildOptions o;
    o.precision.fp16 = fp16;
    GpuRun r = run_gpu(t.g, in, o);
    ASSERT_TRUE(r.error.empty()) << r.error;
    const auto* pool = find_layer(r.layers, "pool");
    ASSERT_NE(pool, nullptr) << describe(r.layers);
    EXPECT_NE(pool->fallback.find("ceil_mode"), std::string::npos) << pool->fallback;
    EXPECT_LE(relative_diff(r.out, *ref), fp16 ? 1e-3 : 0.0) << (fp16 ? "fp16" : "fp32");
  }
#endif
}

// A second build with the timing cache of the first does no timing (no misses) and picks the
// same tactics; the cache survives the file round trip.
TEST(GpuTimingCache, SecondBuildSkipsTimingAndPicksSameTactics) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  std::vector<Tensor> in = {random_tensor({2, 8, 16, 16}, 71)};
  const TimingCacheHeader h = gpu::timing_cache_header();
  for (bool fp16 : {false, true}) {
    const ir::Graph g = cuda_graph(conv_net(8), cuda_config(fp16));
    TimingCache first(h);
    TacticSelector first_selector(&first, TacticSelectorConfig{});
    cuda::GpuBuildOptions o;
    o.precision.fp16 = fp16;
    o.select_tactic = first_selector.as_function();
    GpuRun a = run_gpu(g, in, o);
    ASSERT_TRUE(a.error.empty()) << a.error;
    EXPECT_GT(first.misses(), 0);
    EXPECT_GT(first.size(), 0u);
    const std::string path = ::testing::TempDir() + "/kiln_gpu_timing_cache.json";
    ASSERT_TRUE(first.save(path).ok());
    TimingCache second(h);
    ASSERT_TRUE(second.load(path, nullptr).ok());
    EXPECT_EQ(second.size(), first.size());
    TacticSelector second_selector(&second, TacticSelectorConfig{});
    o.select_tactic = second_selector.as_function();
    GpuRun b = run_gpu(g, in, o);
    ASSERT_TRUE(b.error.empty()) << b.error;
    EXPECT_EQ(second.misses(), 0) << "the second build timed a layer the cache should have answered";
    EXPECT_GT(second.hits(), 0);
    ASSERT_EQ(a.layers.size(), b.layers.size());
    for (size_t i = 0; i < a.layers.size(); ++i)
      EXPECT_EQ(a.layers[i].tactic, b.layers[i].tactic) << a.layers[i].name << (fp16 ? " fp16" : " fp32");
    EXPECT_LE(relative_diff(a.out, b.out), 1e-6);
    std::remove(path.c_str());
  }
#endif
}

// The workspace limit holds: with 1 KiB every chosen tactic stays within it and the results
// are still right (cuDNN and cuBLASLt have workspace-free algorithms for these shapes).
TEST(GpuWorkspace, TinyLimitIsHonoured) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  const ir::Graph g = cuda_graph(conv_net(8), cuda_config(true));
  std::vector<Tensor> in = {random_tensor({2, 8, 16, 16}, 81)};
  auto ref = interpret(conv_net(8), in);
  ASSERT_TRUE(ref.ok());
  cuda::GpuBuildOptions o;
  o.precision.fp16 = true;
  o.workspace_limit = 1024;
  GpuRun r = run_gpu(g, in, o);
  if (!r.error.empty()) {
    // Allowed only as the documented error: it names the layer and both byte counts.
    EXPECT_NE(r.error.find("layer '"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("1024 bytes allowed"), std::string::npos) << r.error;
    return;
  }
  for (const auto& l : r.layers) EXPECT_LE(l.workspace_bytes, 1024u) << l.name << ": " << l.tactic;
  EXPECT_GE(cosine(*ref, r.out), 0.999) << describe(r.layers);
#endif
}

}  // namespace
}  // namespace kiln::testing
