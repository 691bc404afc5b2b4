// The LLM step graph (src/llm/step_graph.h; docs/decisions/0059, 0063) of tiny random checkpoints
// (Llama with GQA and GPT-2 at head dim 32; the tiny Qwen2 at head dim 4) built into a CUDA plan
// (FP32 without TF32, and FP16) and the CPU plan, each with its own pool (device / host memory),
// run through the same steps — a prefill, a prefill chunk packed with a decode token, decode
// steps, padding tokens — through the Engine API: every requested row of logits of the CUDA plan
// against the CPU plan's, and the pools after the last step. Without a GPU: the step graph's CUDA
// lowering at fp32 / fp16 / bf16 (no CPU reference run, every layer supported). FP8 projections
// (StepGraphOptions::fp8_x_scales, calibrated by calibrate_fp8; decision 0059 addendum): lowered
// without a GPU, and the CUDA plan's logits against the CPU plan of the same FP8 graph (cuBLASLt
// FP8 GEMM or Kiln's reference GEMM vs the CPU's double sum of E4M3 products).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "builder/build_from_graph.h"
#include "core/numerics.h"
#include "gpu/gpu_test_util.h"
#include "kiln/runtime.h"
#include "llm/fp8_calibration.h"
#include "llm/random_checkpoint.h"
#include "llm/step_graph.h"

#ifdef KILN_HAVE_CUDA
#include <cuda_runtime.h>

#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::llm {
namespace {

using testing::make_model;
using testing::Model;

// head_dim 32 (the CUDA kernel takes multiples of 8 up to 256), GQA 4 / 2.
std::string llama_config() {
  return nlohmann::json{{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 128},
                        {"intermediate_size", 192}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
                        {"num_key_value_heads", 2}, {"vocab_size", 96}, {"max_position_embeddings", 128},
                        {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}, {"tie_word_embeddings", false},
                        {"torch_dtype", "float16"}, {"bos_token_id", 1}, {"eos_token_id", 2}}
      .dump();
}
// head_dim 32, MHA, learned positions, GELU.
std::string gpt2_config() {
  return nlohmann::json{{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"n_embd", 64}, {"n_layer", 2},
                        {"n_head", 2}, {"n_inner", nullptr}, {"vocab_size", 80}, {"n_positions", 64},
                        {"layer_norm_epsilon", 1e-5}, {"activation_function", "gelu_new"}}
      .dump();
}

constexpr int64_t kRows = 4, kMaxBlocks = 4, kBlockSize = 8, kNumBlocks = 12, kMaxTokens = 16;

using Fp8Scales = std::map<std::string, float>;

StatusOr<ir::Graph> step_graph(const Model& m, const std::string& cache_dtype, const Fp8Scales& fp8 = {},
                               bool per_tensor = false) {
  StepGraphOptions o;
  o.fp8_x_scales = fp8;
  o.fp8_per_tensor_weights = per_tensor;
  o.max_rows = kRows;
  o.max_blocks_per_seq = kMaxBlocks;
  o.block_size = kBlockSize;
  o.cache_dtype = cache_dtype;
  return build_step_graph(m.ck.config(), m.ck, o);
}

BuilderConfig step_config(TargetDevice dev, bool fp16) {
  BuilderConfig c;
  c.target = dev;
  c.fp16 = fp16;
  c.tf32 = false;
  OptimizationProfile p;
  for (const char* name : {kStepInputIdsName, kStepPositionIdsName, kStepTokenSeqName})
    EXPECT_TRUE(p.set_dimensions(name, {1}, {4}, {kMaxTokens}).ok());
  c.profiles = {p};
  return c;
}

TEST(GpuLlmStepLowering, StepGraphLowersWithoutACpuRun) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  for (const std::string& config : {llama_config(), testing::tiny_qwen2_config()}) {
    const Model m = make_model("gpu_step_lower", config, 5);
    for (const char* cache : {"float32", "bfloat16"}) {
      auto g = step_graph(m, cache);
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      for (const auto& [fp16, bf16] : {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
        BuilderConfig c = step_config(TargetDevice::kCuda, fp16);
        c.bf16 = bf16;
        std::vector<Shape> shapes;
        auto laid = cuda_layer_graph(*g, c, &shapes);
        ASSERT_TRUE(laid.ok()) << laid.status().to_string();
        auto vs = cuda::infer_value_shapes_by_reference(*laid, shapes);
        ASSERT_TRUE(vs.ok()) << vs.status().to_string();
        const cuda::StorageType st = fp16 ? cuda::StorageType::kF16 : (bf16 ? cuda::StorageType::kBF16 : cuda::StorageType::kF32);
        Status s = cuda::check_gpu_support(*laid, *vs, st);
        EXPECT_TRUE(s.ok()) << m.ck.config().model_type << " " << cache << " " << cuda::storage_name(st) << ": "
                            << s.to_string();
      }
    }
  }
#endif
}

// The FP8 step graph (every projection a QuantLinear with E4M3FN weights) lowers for CUDA at
// fp32 / fp16 / bf16 storage: llama_config's and gpt2_config's dims are multiples of 16.
TEST(GpuLlmStepLowering, Fp8StepGraphLowersWithoutACpuRun) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  for (const std::string& config : {llama_config(), gpt2_config()}) {
    const Model m = make_model("gpu_step_fp8_lower", config, 5);
    auto cal = calibrate_fp8(m.ck, {1, 17, 5, 33, 8, 2, 39, 11});
    ASSERT_TRUE(cal.ok()) << cal.status().to_string();
    auto g = step_graph(m, "float16", cal->x_scales);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    for (const auto& [fp16, bf16] : {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
      BuilderConfig c = step_config(TargetDevice::kCuda, fp16);
      c.bf16 = bf16;
      std::vector<Shape> shapes;
      auto laid = cuda_layer_graph(*g, c, &shapes);
      ASSERT_TRUE(laid.ok()) << laid.status().to_string();
      // Every calibrated projection runs in a QuantLinear (projections of one input share one:
      // fuse_horizontal_gemm, named in its origin).
      std::set<std::string> covered;
      for (const ir::Node& n : laid->nodes)
        if (!n.removed && n.op == ir::OpKind::kQuantLinear) {
          covered.insert(n.name);
          covered.insert(n.origin.begin(), n.origin.end());
        }
      for (const auto& [name, scale] : cal->x_scales) EXPECT_TRUE(covered.count(name)) << name << " " << m.ck.config().model_type;
      auto vs = cuda::infer_value_shapes_by_reference(*laid, shapes);
      ASSERT_TRUE(vs.ok()) << vs.status().to_string();
      const cuda::StorageType st = fp16 ? cuda::StorageType::kF16 : (bf16 ? cuda::StorageType::kBF16 : cuda::StorageType::kF32);
      Status s = cuda::check_gpu_support(*laid, *vs, st);
      EXPECT_TRUE(s.ok()) << m.ck.config().model_type << " fp8 " << cuda::storage_name(st) << ": " << s.to_string();
    }
  }
#endif
}

#ifdef KILN_HAVE_CUDA
// One plan of the step graph with its pools (host memory for the CPU plan, device memory for the
// CUDA plan), all zero at the start.
class StepPlan {
 public:
  StepPlan(const Model& m, const std::string& cache_dtype, TargetDevice dev, bool fp16, const Fp8Scales& fp8 = {},
           bool per_tensor = false)
      : dev_(dev) {
    auto g = step_graph(m, cache_dtype, fp8, per_tensor);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    if (!g.ok()) return;
    auto plan = build_from_graph(*g, step_config(dev, fp16));
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    if (!plan.ok()) return;
    auto e = Runtime::deserialize_engine(*plan);
    EXPECT_TRUE(e.ok()) << e.status().to_string();
    if (!e.ok()) return;
    engine_ = *e;
    ctx_ = engine_->create_execution_context();
    const ModelConfig& c = m.ck.config();
    pool_bytes_ = static_cast<size_t>(kNumBlocks * kv_block_elements(c, kBlockSize)) * (cache_dtype == "float32" ? 4 : 2);
    for (int64_t l = 0; l < c.num_layers; ++l) {
      if (dev == TargetDevice::kCpu) {
        host_.emplace_back(pool_bytes_, 0);
        pools_.push_back(host_.back().data());
      } else {
        void* p = nullptr;
        EXPECT_EQ(cudaMalloc(&p, pool_bytes_), cudaSuccess);
        EXPECT_EQ(cudaMemset(p, 0, pool_bytes_), cudaSuccess);
        pools_.push_back(p);
      }
    }
  }
  ~StepPlan() {
    if (dev_ == TargetDevice::kCuda)
      for (void* p : pools_) cudaFree(p);
  }
  bool ready() const { return ctx_ != nullptr; }
  const Engine& engine() const { return *engine_; }

  // Logits [R, vocab] of one step: tokens (sequence row or -1, position, id) and the logit rows.
  StatusOr<Tensor> step(const std::vector<std::array<int64_t, 3>>& toks, const std::vector<int64_t>& logit_rows) {
    const int64_t t = static_cast<int64_t>(toks.size());
    Tensor ids(DataType::kInt64, {t}), pos(DataType::kInt64, {t}), seq(DataType::kInt32, {t}),
        table(DataType::kInt32, {kRows, kMaxBlocks}), pools(DataType::kInt64, {static_cast<int64_t>(pools_.size()), 2}),
        rows(DataType::kInt64, {kRows});
    for (int64_t i = 0; i < t; ++i) {
      seq.data<int32_t>()[i] = static_cast<int32_t>(toks[i][0]);
      pos.data<int64_t>()[i] = toks[i][1];
      ids.data<int64_t>()[i] = toks[i][2];
    }
    // Rows 0 and 2 (the test's sequences) own blocks scattered over the pool; rows 1 and 3 unused.
    const int32_t blocks[kRows * kMaxBlocks] = {7, 2, 10, 5, 0, 0, 0, 0, 3, 11, 1, 8, 0, 0, 0, 0};
    std::copy(blocks, blocks + kRows * kMaxBlocks, table.data<int32_t>());
    for (size_t l = 0; l < pools_.size(); ++l) {
      pools.data<int64_t>()[2 * l] = static_cast<int64_t>(reinterpret_cast<intptr_t>(pools_[l]));
      pools.data<int64_t>()[2 * l + 1] = kNumBlocks;
    }
    for (int64_t r = 0; r < kRows; ++r)
      rows.data<int64_t>()[r] = r < static_cast<int64_t>(logit_rows.size()) ? logit_rows[r] : 0;
    KILN_RETURN_IF_ERROR(ctx_->set_input(kStepInputIdsName, ids));
    KILN_RETURN_IF_ERROR(ctx_->set_input(kStepPositionIdsName, pos));
    KILN_RETURN_IF_ERROR(ctx_->set_input(kStepTokenSeqName, seq));
    KILN_RETURN_IF_ERROR(ctx_->set_input(kStepBlockTableName, table));
    KILN_RETURN_IF_ERROR(ctx_->set_input(kStepKvPoolsName, pools));
    KILN_RETURN_IF_ERROR(ctx_->set_input(kStepLogitRowsName, rows));
    KILN_RETURN_IF_ERROR(ctx_->execute());
    KILN_ASSIGN_OR_RETURN(Tensor out, ctx_->output(kStepLogitsName));
    // next_tokens: every row's argmax of the logits, the lowest id among equal maxima.
    KILN_ASSIGN_OR_RETURN(Tensor next, ctx_->output(kStepNextTokensName));
    const int64_t rows_n = out.shape()[0], vocab = out.shape()[1];
    EXPECT_EQ(next.dtype(), DataType::kInt64);
    EXPECT_EQ(next.shape(), (Shape{rows_n}));
    for (int64_t r = 0; r < rows_n && next.dtype() == DataType::kInt64; ++r) {
      const float* l = out.data<float>() + r * vocab;
      EXPECT_EQ(next.data<int64_t>()[r], std::max_element(l, l + vocab) - l) << "row " << r;
    }
    return out.clone();
  }

  // Layer l's pool bytes (copied back from the device for a CUDA plan).
  std::vector<uint8_t> pool(size_t l) const {
    std::vector<uint8_t> h(pool_bytes_);
    if (dev_ == TargetDevice::kCpu) return host_[l];
    EXPECT_EQ(cudaMemcpy(h.data(), pools_[l], pool_bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  size_t layers() const { return pools_.size(); }

 private:
  TargetDevice dev_;
  std::shared_ptr<Engine> engine_;
  std::unique_ptr<ExecutionContext> ctx_;
  size_t pool_bytes_ = 0;
  std::vector<std::vector<uint8_t>> host_;
  std::vector<void*> pools_;
};

double row_diff(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num = std::max(num, std::isnan(a[i]) ? INFINITY : std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num / den;
}

// Two sequences (rows 0 and 2) of `ids` through five steps on both plans.
void expect_cuda_matches_cpu(const Model& m, const std::string& cache_dtype, bool fp16, double tol, const Fp8Scales& fp8 = {},
                             bool per_tensor = false) {
  SCOPED_TRACE(cache_dtype + (fp16 ? " fp16" : " fp32") + (fp8.empty() ? "" : " fp8 projections") +
               (per_tensor ? " (per-tensor weight scales)" : ""));
  const std::vector<std::vector<int64_t>> ids = {{1, 17, 5, 33, 8, 2, 39, 11, 29, 60, 3, 44}, {3, 30, 12, 7, 21, 36, 4, 9, 50}};
  const int64_t row_of[2] = {0, 2};
  const int64_t vocab = m.ck.config().vocab_size;
  auto tok = [&](int s, int64_t p) {
    return std::array<int64_t, 3>{s < 0 ? -1 : row_of[s], s < 0 ? 0 : p, s < 0 ? 0 : ids[s][p] % vocab};
  };
  struct Step {
    std::vector<std::array<int64_t, 3>> toks;
    std::vector<int64_t> logit_rows;
  };
  const std::vector<Step> steps = {
      {{tok(0, 0), tok(0, 1), tok(0, 2), tok(0, 3), tok(0, 4), tok(0, 5), tok(0, 6), tok(0, 7), tok(0, 8)}, {8, 3}},
      {{tok(1, 0), tok(1, 1), tok(1, 2), tok(1, 3), tok(0, 9), tok(1, 4)}, {4, 5}},  // B's chunk + A's decode
      {{tok(1, 5), tok(0, 10)}, {0, 1}},                                            // decode both
      {{tok(0, 11), tok(-1, 0), tok(1, 6), tok(-1, 0)}, {0, 2}},                    // padded
      {{tok(1, 7), tok(1, 8)}, {0, 1}},
  };
  StepPlan cpu(m, cache_dtype, TargetDevice::kCpu, false, fp8, per_tensor),
      gpu(m, cache_dtype, TargetDevice::kCuda, fp16, fp8, per_tensor);
  ASSERT_TRUE(cpu.ready() && gpu.ready());
  if (per_tensor && fp16) {
    // Per-tensor weight scales on Hopper: cuBLASLt's FP8 GEMM applies both scales, the bias and the
    // fp16 store itself (the fused form, decision 0085); the builder times it against the unfused one.
    int dev = 0, major = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    int quant = 0, fused = 0;
    for (const LayerInfo& l : gpu.engine().layers())
      if (l.op == "QuantLinear") {
        ++quant;
        fused += l.tactic.find("fused-scale") != std::string::npos;
        std::printf("[fp8 per-tensor] %s: %s\n", l.name.c_str(), l.tactic.c_str());
      }
    EXPECT_GT(quant, 0);
    if (major >= 9) {
      EXPECT_EQ(fused, quant) << "QuantLinear layers running cuBLASLt's fused scalar-scale FP8 GEMM";
    }
  }
  const int64_t V = m.ck.config().vocab_size;
  for (size_t si = 0; si < steps.size(); ++si) {
    auto c = cpu.step(steps[si].toks, steps[si].logit_rows);
    auto g = gpu.step(steps[si].toks, steps[si].logit_rows);
    ASSERT_TRUE(c.ok()) << "step " << si << ": " << c.status().to_string();
    ASSERT_TRUE(g.ok()) << "step " << si << ": " << g.status().to_string();
    for (size_t r = 0; r < steps[si].logit_rows.size(); ++r)
      EXPECT_LT(row_diff(g->data<float>() + r * V, c->data<float>() + r * V, V), tol) << "step " << si << ", row " << r;
  }
  // The caches the two plans wrote hold the same K/V, to the plan's precision.
  for (size_t l = 0; l < cpu.layers(); ++l) {
    const std::vector<uint8_t> a = gpu.pool(l), b = cpu.pool(l);
    const size_t elem = cache_dtype == "float32" ? 4 : 2;
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size() / elem; ++i) {
      float x, y;
      if (elem == 4) {
        std::memcpy(&x, a.data() + 4 * i, 4);
        std::memcpy(&y, b.data() + 4 * i, 4);
      } else {
        uint16_t hx, hy;
        std::memcpy(&hx, a.data() + 2 * i, 2);
        std::memcpy(&hy, b.data() + 2 * i, 2);
        x = cache_dtype == "float16" ? fp16_to_float(hx) : bf16_to_float(hx);
        y = cache_dtype == "float16" ? fp16_to_float(hy) : bf16_to_float(hy);
      }
      num = std::max(num, std::isnan(x) ? INFINITY : std::fabs(double(x) - y));
      den = std::max(den, std::fabs(double(y)));
    }
    EXPECT_GT(den, 0) << "layer " << l << ": nothing cached";
    EXPECT_LT(num / den, tol) << "layer " << l << " pool";
  }
}
#endif

TEST(GpuLlmStep, LlamaGqaCudaPlanMatchesCpuPlan) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  const Model m = make_model("gpu_step_llama", llama_config(), 5);
  expect_cuda_matches_cpu(m, "float32", false, 1e-3);
  expect_cuda_matches_cpu(m, "float16", true, 3e-2);
  expect_cuda_matches_cpu(m, "bfloat16", true, 5e-2);
#endif
}

// Head dim 4 (the repository's tiny Qwen2 config): the kernel's element-by-element variant.
TEST(GpuLlmStep, TinyQwen2HeadDim4CudaPlanMatchesCpuPlan) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  const Model m = make_model("gpu_step_qwen2", testing::tiny_qwen2_config(), 3);
  expect_cuda_matches_cpu(m, "float32", false, 1e-3);
  expect_cuda_matches_cpu(m, "float16", true, 3e-2);
#endif
}

TEST(GpuLlmStep, Gpt2CudaPlanMatchesCpuPlan) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  const Model m = make_model("gpu_step_gpt2", gpt2_config(), 6);
  expect_cuda_matches_cpu(m, "float32", false, 1e-3);
  expect_cuda_matches_cpu(m, "float16", true, 3e-2);
#endif
}

// FP8 projections: the CUDA plan (QuantLinear: Kiln's quantize kernel + cuBLASLt FP8 E4M3 GEMM on
// sm_89+, else Kiln's reference GEMM) against the CPU plan of the same graph. Both quantize X
// with the same x_scale, but an fp16 X (fp16 plans) can round to another E4M3 value than the
// float32 X, and the sums differ in order: tolerances are those of the float16 comparisons plus
// that rounding (not yet measured on a GPU: the lead's first run sets them).
TEST(GpuLlmStep, Fp8ProjectionsCudaPlanMatchesCpuPlan) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  for (const std::string& config : {llama_config(), gpt2_config()}) {
    const Model m = make_model("gpu_step_fp8", config, 5);
    auto cal = calibrate_fp8(m.ck, {1, 17, 5, 33, 8, 2, 39, 11, 29, 60, 3, 44});
    ASSERT_TRUE(cal.ok()) << cal.status().to_string();
    // Each projection quantizes its input to E4M3 (3 mantissa bits): an input that lands on the other
    // side of a rounding boundary on the GPU (its fp32 sums in another order) moves by a whole E4M3 step,
    // up to 6.25% of that element, and the next layers carry it on. Measured on an H200 (2026-11-26):
    // max |Δ| / max |ref| per logits row 0.024–0.049 with fp32 storage; with fp16 storage (activations
    // rounded to fp16 before each quantization, residual adds in the GEMM) up to 0.087, the pool within
    // 0.064. A wrong scale or packing gives O(1).
    expect_cuda_matches_cpu(m, "float32", false, 6e-2, cal->x_scales);
    expect_cuda_matches_cpu(m, "float16", true, 1.2e-1, cal->x_scales);
  }
#endif
}

// Per-tensor FP8 weight scales (StepGraphOptions::fp8_per_tensor_weights, build-llm's default):
// the same comparison; fp16 plans run the fused cuBLASLt form on Hopper (checked above).
TEST(GpuLlmStep, Fp8PerTensorWeightsCudaPlanMatchesCpuPlan) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  for (const std::string& config : {llama_config(), gpt2_config()}) {
    const Model m = make_model("gpu_step_fp8t", config, 5);
    auto cal = calibrate_fp8(m.ck, {1, 17, 5, 33, 8, 2, 39, 11, 29, 60, 3, 44});
    ASSERT_TRUE(cal.ok()) << cal.status().to_string();
    expect_cuda_matches_cpu(m, "float32", false, 6e-2, cal->x_scales, true);
    expect_cuda_matches_cpu(m, "float16", true, 1.2e-1, cal->x_scales, true);
  }
#endif
}

}  // namespace
}  // namespace kiln::llm
