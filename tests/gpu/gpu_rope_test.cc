// Rope on the CUDA path (factory_rope.cc, kernels_rope.cu; docs/decisions/0067). Without a GPU
// (CUDA builds): the Llama step graph lowers with one Rope layer per q and k of every layer, in
// the plan's 16-bit precision, and nothing of the former Cos / Sin / Slice / Concat chain. With a
// GPU (GpuRope*): one-node graphs as CUDA plans (fp32 / fp16 / bf16) against the CPU plan at
// positions up to 131071 (100000 included), the fp32 plan also against the formula in double
// at the same float32 angles (sincosf's accuracy, not __sincosf's), and a Llama-3.2-1B-shaped
// decode / prefill step (q [T, 32, 64], k [T, 8, 64], Llama-3 scaled inv_freq).
// GpuRopeBench.LlamaDecodeLayerMicroseconds only prints the kernel's time per layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "builder/build_from_graph.h"
#include "gpu/gpu_test_util.h"
#include "kiln/runtime.h"
#include "llm/random_checkpoint.h"
#include "llm/rope.h"
#include "llm/step_graph.h"

#ifdef KILN_HAVE_CUDA
#include <cuda_runtime.h>

#include "backends/cuda/gpu_model.h"
#include "backends/cuda/kernels_rope.h"
#endif

namespace kiln::testing {
namespace {

ir::ValueId add_input(ir::Graph& g, const std::string& name, DataType dt, const Shape& s) {
  ir::ValueId v = g.add_value(name, dt);
  ir::SymShape sym;
  for (int64_t d : s) sym.push_back(ir::Dim::known(d));
  g.value(v).shape = sym;
  g.inputs.push_back(v);
  return v;
}

// Llama-3.2-1B's RoPE: theta 500000, llama3 scaling (factor 32, low 1, high 4, original 8192).
std::vector<float> llama32_inv_freq(int64_t head_dim) {
  llm::RopeConfig r;
  r.theta = 500000.0;
  r.scaling = llm::RopeScaling::kLlama3;
  r.factor = 32.0;
  r.low_freq_factor = 1.0;
  r.high_freq_factor = 4.0;
  r.original_max_position_embeddings = 8192;
  auto f = llm::rope_inv_freq(r, head_dim);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  return f.ok() ? *f : std::vector<float>{};
}

// Rope nodes "q_rope" / "k_rope" on inputs q [T, hq, d] and k [T, hkv, d] (hkv 0: q only) at
// positions int64 [T], inv_freq a constant; outputs "q_rot", "k_rot".
ir::Graph rope_graph(int64_t t, int64_t hq, int64_t hkv, int64_t d, const std::vector<float>& inv) {
  ir::Graph g;
  g.name = "rope";
  g.opset_imports[""] = 21;
  const ir::ValueId pos = add_input(g, "positions", DataType::kInt64, {t});
  const ir::ValueId iv = g.add_value("inv_freq", DataType::kFloat32);
  Tensor it(DataType::kFloat32, {static_cast<int64_t>(inv.size())});
  std::copy(inv.begin(), inv.end(), it.data<float>());
  g.value(iv).shape = ir::SymShape{ir::Dim::known(static_cast<int64_t>(inv.size()))};
  g.value(iv).constant = std::make_shared<Tensor>(std::move(it));
  for (const auto& [name, h] : {std::pair<std::string, int64_t>{"q", hq}, {"k", hkv}}) {
    if (h == 0) continue;
    const ir::ValueId x = add_input(g, name, DataType::kFloat32, {t, h, d});
    const ir::ValueId y = g.add_value(name + "_rot", DataType::kFloat32);
    g.value(y).shape = g.value(x).shape;
    ir::Node n;
    n.name = name + "_rope";
    n.op = ir::OpKind::kRope;
    n.opset = 21;
    n.inputs = {x, pos, iv};
    n.outputs = {y};
    n.attrs = {{"head_axis", ir::Attribute::of_int(1)}};
    g.add_node(std::move(n));
    g.outputs.push_back(y);
  }
  return g;
}

Tensor random_x(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  Tensor t(DataType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// max |a - b| / max |b|.
double normalized_error(const Tensor& a, const Tensor& b) {
  double err = 0, ref = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double x = a.data<float>()[i], y = b.data<float>()[i];
    err = std::isnan(x) ? INFINITY : std::max(err, std::fabs(x - y));
    ref = std::max(ref, std::fabs(y));
  }
  return err / ref;
}

enum class Prec { kFp32, kFp16, kBf16 };

StatusOr<std::shared_ptr<Engine>> build(const ir::Graph& g, TargetDevice dev, Prec p) {
  BuilderConfig c;
  c.target = dev;
  c.fp16 = p == Prec::kFp16;
  c.bf16 = p == Prec::kBf16;
  c.tf32 = false;
  OptimizationProfile prof;
  for (ir::ValueId v : g.inputs) {
    Shape s;
    for (const ir::Dim& d : *g.value(v).shape) s.push_back(d.value);
    KILN_RETURN_IF_ERROR(prof.set_dimensions(g.value(v).name, s, s, s));
  }
  c.profiles.push_back(prof);
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> plan, build_from_graph(g, c));
  return Runtime::deserialize_engine(plan);
}

StatusOr<std::vector<Tensor>> run(Engine& e, const ir::Graph& g, const std::map<std::string, Tensor>& ins) {
  auto ctx = e.create_execution_context();
  for (const auto& [name, t] : ins) KILN_RETURN_IF_ERROR(ctx->set_input(name, t.clone()));
  KILN_RETURN_IF_ERROR(ctx->execute());
  std::vector<Tensor> out;
  for (ir::ValueId v : g.outputs) {
    KILN_ASSIGN_OR_RETURN(Tensor o, ctx->output(g.value(v).name));
    out.push_back(o.clone());
  }
  return out;
}

// ---------------------------------------------------------------- lowering (no GPU needed)
// The step graph's RoPE: no Cos / Sin / Concat layers, and the Rope layers of Q and K inside each
// layer's PagedAttention (passes::fuse_rope_attention, docs/decisions/0090: input 7 inv_freq).
TEST(GpuRopeLowering, LlamaStepGraphRotatesInsideThePagedAttention) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  const std::string config =
      nlohmann::json{{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 128},
                     {"intermediate_size", 192}, {"num_hidden_layers", 3}, {"num_attention_heads", 4},
                     {"num_key_value_heads", 2}, {"vocab_size", 96}, {"max_position_embeddings", 128},
                     {"rms_norm_eps", 1e-5}, {"rope_theta", 500000.0}, {"tie_word_embeddings", true}}
          .dump();
  const llm::testing::Model m = llm::testing::make_model("gpu_rope_lower", config, 11);
  llm::StepGraphOptions o;
  o.max_rows = 2;
  o.max_blocks_per_seq = 4;
  o.block_size = 8;
  auto g = llm::build_step_graph(m.ck.config(), m.ck, o);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  for (const auto& [fp16, bf16] : {std::pair{true, false}, std::pair{false, true}}) {
    BuilderConfig c;
    c.target = TargetDevice::kCuda;
    c.fp16 = fp16;
    c.bf16 = bf16;
    OptimizationProfile p;
    for (const char* name : {llm::kStepInputIdsName, llm::kStepPositionIdsName, llm::kStepTokenSeqName})
      ASSERT_TRUE(p.set_dimensions(name, {1}, {4}, {16}).ok());
    c.profiles = {p};
    std::vector<Shape> shapes;
    auto laid = cuda_layer_graph(*g, c, &shapes);
    ASSERT_TRUE(laid.ok()) << laid.status().to_string();
    int ropes = 0, fused = 0;
    for (const ir::Node& n : laid->nodes) {
      if (n.removed) continue;
      EXPECT_NE(n.op, ir::OpKind::kCos) << n.name;
      EXPECT_NE(n.op, ir::OpKind::kSin) << n.name;
      EXPECT_NE(n.op, ir::OpKind::kConcat) << n.name;
      ropes += n.op == ir::OpKind::kRope;
      if (n.op != ir::OpKind::kPagedAttention) continue;
      fused += n.inputs.size() == 8;
      EXPECT_EQ(n.attr_string("precision", ""), fp16 ? "fp16" : "bf16") << n.name;
    }
    EXPECT_EQ(ropes, 0);
    EXPECT_EQ(fused, 3);  // one PagedAttention per layer, each rotating its q and k
    auto vs = cuda::infer_value_shapes_by_reference(*laid, shapes);
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    Status s = cuda::check_gpu_support(*laid, *vs, fp16 ? cuda::StorageType::kF16 : cuda::StorageType::kBF16);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
#endif
}

// ---------------------------------------------------------------- on the GPU
// Positions across the range a 128k-context model reaches.
const std::vector<int64_t> kFarPositions = {0, 1, 7, 2047, 8191, 32767, 100000, 131071};

TEST(GpuRope, FarPositionsMatchTheCpuPlanAndTheFormula) {
  REQUIRE_GPU();
  const int64_t t = static_cast<int64_t>(kFarPositions.size()), h = 5, d = 128;
  const std::vector<float> inv = llama32_inv_freq(d);
  const ir::Graph g = rope_graph(t, h, 0, d, inv);
  Tensor pos(DataType::kInt64, {t});
  std::copy(kFarPositions.begin(), kFarPositions.end(), pos.data<int64_t>());
  const Tensor x = random_x({t, h, d}, 3);
  const std::map<std::string, Tensor> ins = {{"positions", pos}, {"q", x}};
  auto cpu = build(g, TargetDevice::kCpu, Prec::kFp32);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto ref = run(**cpu, g, ins);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  for (Prec p : {Prec::kFp32, Prec::kFp16, Prec::kBf16}) {
    auto gpu = build(g, TargetDevice::kCuda, p);
    ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
    bool found = false;
    for (const DeviceLayerInfo& l : (*gpu)->device_layers()) found |= l.op == "Rope";
    EXPECT_TRUE(found) << "no Rope layer in the CUDA plan";
    auto out = run(**gpu, g, ins);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    // fp16 / bf16: X is rounded to 16 bits on the way in and Y on the way out (2^-11, 2^-8).
    const double tol = p == Prec::kFp32 ? 2e-6 : (p == Prec::kFp16 ? 2e-3 : 1.6e-2);
    EXPECT_LT(normalized_error((*out)[0], (*ref)[0]), tol) << (p == Prec::kFp32 ? "fp32" : p == Prec::kFp16 ? "fp16" : "bf16");
    if (p != Prec::kFp32) continue;
    // The formula in double at the float32 angle: what sincosf gives within an ulp or two.
    double worst = 0;
    for (int64_t i = 0; i < t; ++i)
      for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t k = 0; k < d / 2; ++k) {
          const double a = static_cast<double>(static_cast<float>(kFarPositions[i]) * inv[k]);
          const float* xr = x.data<float>() + (i * h + hh) * d;
          const float* yr = (*out)[0].data<float>() + (i * h + hh) * d;
          const double y1 = xr[k] * std::cos(a) - xr[k + d / 2] * std::sin(a);
          const double y2 = xr[k + d / 2] * std::cos(a) + xr[k] * std::sin(a);
          worst = std::max({worst, std::fabs(yr[k] - y1), std::fabs(yr[k + d / 2] - y2)});
        }
    EXPECT_LT(worst, 4e-6);
  }
}

// A Llama-3.2-1B-shaped step: q [T, 32, 64] and k [T, 8, 64] in one graph, decode (T = 1, 64) and
// a prefill chunk (T = 512) at random positions below 131072.
TEST(GpuRope, LlamaShapedStepMatchesTheCpuPlan) {
  REQUIRE_GPU();
  const std::vector<float> inv = llama32_inv_freq(64);
  for (int64_t t : {1, 64, 512}) {
    const ir::Graph g = rope_graph(t, 32, 8, 64, inv);
    Tensor pos(DataType::kInt64, {t});
    std::mt19937 rng(static_cast<uint32_t>(t));
    for (int64_t i = 0; i < t; ++i) pos.data<int64_t>()[i] = std::uniform_int_distribution<int64_t>(0, 131071)(rng);
    const std::map<std::string, Tensor> ins = {
        {"positions", pos}, {"q", random_x({t, 32, 64}, 10 + t)}, {"k", random_x({t, 8, 64}, 20 + t)}};
    auto cpu = build(g, TargetDevice::kCpu, Prec::kFp32);
    ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
    auto ref = run(**cpu, g, ins);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    for (Prec p : {Prec::kFp16, Prec::kBf16}) {
      auto gpu = build(g, TargetDevice::kCuda, p);
      ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
      auto out = run(**gpu, g, ins);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      for (size_t o = 0; o < 2; ++o)
        EXPECT_LT(normalized_error((*out)[o], (*ref)[o]), p == Prec::kFp16 ? 2e-3 : 1.6e-2) << "T=" << t << " output " << o;
    }
  }
}

// Prints the kernel's time per layer at Llama-3.2-1B decode shapes (q: 32 heads, k: 8, d 64, fp16).
TEST(GpuRopeBench, LlamaDecodeLayerMicroseconds) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  for (int64_t t : {1, 8, 64}) {
    for (int64_t heads : {32, 8}) {
      cuda::RopeDesc d;
      d.rows = t;
      d.heads = heads;
      d.d = 64;
      d.half = 32;
      d.io = cuda::StorageType::kF16;
      void *x = nullptr, *y = nullptr, *pos = nullptr, *inv = nullptr;
      ASSERT_EQ(cudaMalloc(&x, t * heads * 64 * 2), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&y, t * heads * 64 * 2), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&pos, t * 8), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&inv, 32 * 4), cudaSuccess);
      cudaMemset(x, 0, t * heads * 64 * 2);
      cudaMemset(pos, 0, t * 8);
      cudaMemset(inv, 0, 32 * 4);
      cudaEvent_t a, b;
      cudaEventCreate(&a);
      cudaEventCreate(&b);
      constexpr int kReps = 200;
      ASSERT_EQ(cuda::launch_rope(x, pos, static_cast<float*>(inv), nullptr, nullptr, y, d, nullptr), cudaSuccess);
      cudaEventRecord(a);
      for (int i = 0; i < kReps; ++i) cuda::launch_rope(x, pos, static_cast<float*>(inv), nullptr, nullptr, y, d, nullptr);
      cudaEventRecord(b);
      ASSERT_EQ(cudaEventSynchronize(b), cudaSuccess);
      float ms = 0;
      cudaEventElapsedTime(&ms, a, b);
      std::printf("rope fp16 T=%lld heads=%lld d=64: %.2f us per launch (back to back)\n", static_cast<long long>(t),
                  static_cast<long long>(heads), 1000.0 * ms / kReps);
      cudaEventDestroy(a);
      cudaEventDestroy(b);
      cudaFree(x);
      cudaFree(y);
      cudaFree(pos);
      cudaFree(inv);
    }
  }
#endif
}

}  // namespace
}  // namespace kiln::testing
