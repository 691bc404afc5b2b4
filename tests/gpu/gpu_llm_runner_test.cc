// LlmRunner on CUDA plans of the step graph (skipped without a GPU): the KV pool in device
// memory, the same scheduling as on the CPU. Each generated token is checked by teacher forcing
// against LlmCpuRunner (the token the engine chose must be the reference's argmax or within a
// small margin of it: fp16 and TF32 GEMMs round differently), batched = alone, CUDA graphs =
// no graphs, sampled tokens = the reference's draw (GPU sampling: the Philox uniform of decision
// 0077; host sampling: the request's mt19937_64 Sampler), and the memory budget sizes the pool.
#include <gtest/gtest.h>

#include <random>

#include "gpu/gpu_test_util.h"
#include "llm/random_checkpoint.h"
#include "llm/runner.h"
#include "llm/sampling.h"
#include "tools/kiln/llm_build.h"

namespace kiln::llm {
namespace {

std::vector<int32_t> random_ids(size_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> p(n);
  for (int32_t& t : p) t = id(rng);
  return p;
}

std::unique_ptr<LlmRunner> cuda_runner(const Checkpoint& ck, const std::string& dtype, bool cuda_graph,
                                       uint64_t budget = 0, bool device_sampling = true) {
  cli::LlmBuildOptions o;
  o.dtype = dtype;
  o.device = "gpu";
  o.max_batch = 4;
  o.max_seq_len = std::min<int64_t>(64, ck.config().max_position_embeddings);
  o.max_num_tokens = 16;
  o.block_size = 8;
  auto built = cli::build_llm_engine(ck, o);
  EXPECT_TRUE(built.ok()) << built.status().to_string();
  if (!built.ok()) return nullptr;
  EXPECT_EQ(built->info.device, "cuda");
  auto engine = Runtime::deserialize_engine(built->plan);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return nullptr;
  LlmRunnerOptions ro;
  ro.cuda_graph = cuda_graph;
  ro.max_memory_bytes = budget;
  ro.device_sampling = device_sampling;
  auto r = LlmRunner::create(*engine, built->info, ck.config(), nullptr, ro);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(*r) : nullptr;
}

std::vector<LlmRequest> requests(int64_t vocab) {
  const size_t lens[] = {1, 9, 3, 20, 6};
  const int64_t news[] = {7, 3, 10, 5, 12};
  std::vector<LlmRequest> qs(5);
  for (size_t i = 0; i < 5; ++i) {
    qs[i].prompt = random_ids(lens[i], vocab, 300 + static_cast<uint32_t>(i));
    qs[i].options.max_new_tokens = news[i];
    qs[i].options.ignore_eos = true;
  }
  return qs;
}

// Teacher forcing: at every step the engine's token must be the CPU reference's argmax, or within
// `margin` of its logit. Returns how many tokens were not the exact argmax.
int check_near_argmax(const LlmCpuRunner& ref, const LlmRequest& q, const std::vector<int32_t>& got, float margin) {
  KvCache cache = ref.empty_cache();
  std::vector<int32_t> step = q.prompt;
  const int64_t V = ref.config().vocab_size;
  int off = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    auto logits = ref.forward(step, &cache, /*all_logits=*/false);
    EXPECT_TRUE(logits.ok()) << logits.status().to_string();
    if (!logits.ok()) return -1;
    const float* l = logits->data<float>();
    const float best = *std::max_element(l, l + V);
    EXPECT_GE(l[got[i]], best - margin) << "token " << i << " (" << got[i] << ")";
    off += l[got[i]] != best;
    step = {got[i]};
  }
  return off;
}

TEST(GpuLlmRunner, TokensAgreeWithTheCpuReferenceAndDoNotDependOnTheBatch) {
  REQUIRE_GPU();
  for (const std::string& config : {testing::tiny_llama_config(2), testing::tiny_gpt2_config(2), testing::tiny_qwen2_config()}) {
    testing::Model m = testing::make_model("gpurunner", config, 31);
    auto ref = LlmCpuRunner::create(m.ck);
    ASSERT_TRUE(ref.ok());
    for (const char* dtype : {"fp32", "fp16"}) {
      SCOPED_TRACE(m.ck.config().model_type + " " + dtype);
      auto r = cuda_runner(m.ck, dtype, /*cuda_graph=*/false);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->pool().memory(), KvPoolMemory::kDevice);
      const std::vector<LlmRequest> qs = requests(m.ck.config().vocab_size);
      auto batched = r->generate(qs);
      ASSERT_TRUE(batched.ok()) << batched.status().to_string();
      int off = 0;
      for (size_t i = 0; i < qs.size(); ++i) {
        ASSERT_EQ(static_cast<int64_t>((*batched)[i].tokens.size()), qs[i].options.max_new_tokens);
        off += check_near_argmax(**ref, qs[i], (*batched)[i].tokens, std::string(dtype) == "fp16" ? 0.05f : 0.01f);
        auto alone = r->generate({qs[i]});
        ASSERT_TRUE(alone.ok());
        EXPECT_EQ((*alone)[0].tokens, (*batched)[i].tokens) << "request " << i << ": batched != alone";
      }
      std::printf("%s %s: %d of 37 tokens not the reference's exact argmax\n", m.ck.config().model_type.c_str(), dtype, off);
      // CUDA graphs replay each bucket's step with new input data: the same tokens.
      auto g = cuda_runner(m.ck, dtype, /*cuda_graph=*/true);
      ASSERT_TRUE(g);
      auto replayed = g->generate(qs);
      ASSERT_TRUE(replayed.ok()) << replayed.status().to_string();
      for (size_t i = 0; i < qs.size(); ++i) EXPECT_EQ((*replayed)[i].tokens, (*batched)[i].tokens) << "request " << i;
    }
  }
}

// Teacher forcing for a sampling request: a Sampler with the request's options, fed the CPU
// reference's logits, must draw the same tokens (fp32: logits agree to ~1e-5, a draw flips only
// if its uniform lands that close to a CDF boundary). Catches a wrong or stale logits row.
void check_sampled(const LlmCpuRunner& ref, const LlmRequest& q, const std::vector<int32_t>& got) {
  KvCache cache = ref.empty_cache();
  Sampler sampler(q.options.sampling);
  std::vector<int32_t> step = q.prompt;
  const int64_t V = ref.config().vocab_size;
  for (size_t i = 0; i < got.size(); ++i) {
    auto logits = ref.forward(step, &cache, /*all_logits=*/false);
    ASSERT_TRUE(logits.ok()) << logits.status().to_string();
    EXPECT_EQ(sampler.next(logits->data<float>(), V), got[i]) << "sampled token " << i;
    step = {got[i]};
  }
}

// Teacher forcing for a request sampled on the GPU (decision 0077): at every step the reference's
// logits, penalized over the ids so far, give Sampler::distribution; the token must be its argmax
// (greedy; within 0.01 of it) or sample_index(distribution, device_uniform(seed, position)).
void check_device_sampled(const LlmCpuRunner& ref, const LlmRequest& q, const std::vector<int32_t>& got) {
  KvCache cache = ref.empty_cache();
  const SamplingOptions& o = q.options.sampling;
  std::vector<int32_t> ids = q.prompt, step = q.prompt;
  const int64_t V = ref.config().vocab_size;
  for (size_t i = 0; i < got.size(); ++i) {
    auto logits = ref.forward(step, &cache, /*all_logits=*/false);
    ASSERT_TRUE(logits.ok()) << logits.status().to_string();
    std::vector<float> row(logits->data<float>(), logits->data<float>() + V);
    apply_repetition_penalty(row.data(), V, ids, o.repetition_penalty);
    const Sampler s(o);
    if (s.greedy()) {  // the penalized argmax, up to fp32 rounding (as check_near_argmax)
      EXPECT_GE(row[got[i]], *std::max_element(row.begin(), row.end()) - 0.01f) << "token " << i;
    } else {
      EXPECT_EQ(got[i], sample_index(s.distribution(row.data(), V), device_uniform(o.seed, static_cast<int64_t>(ids.size()))))
          << "token " << i;
    }
    ids.push_back(got[i]);
    step = {got[i]};
  }
}

// Device io (decision 0060's addendum, 0077): a batch of greedy requests copies back only
// next_tokens (no logits row at all); with GPU sampling a batch with sampling and penalized
// requests copies back no logits row either (their ids come from the GPU sampler, which must draw
// what the reference predicts), and the greedy requests' tokens do not change; with host
// sampling exactly the sampling request's row comes back once per token it samples. With and
// without CUDA graphs (the runner captures enqueue and the sampler per bucket).
TEST(GpuLlmRunner, DeviceIoCopiesBackOnlyArgmaxOrTheSampledRows) {
  REQUIRE_GPU();
  testing::Model m = testing::make_model("gpudevio", testing::tiny_llama_config(2), 33);
  auto ref = LlmCpuRunner::create(m.ck);
  ASSERT_TRUE(ref.ok());
  const std::vector<LlmRequest> greedy = requests(m.ck.config().vocab_size);
  std::vector<LlmRequest> mixed = greedy;
  mixed[2].options.sampling.temperature = 1.5;
  mixed[2].options.sampling.seed = 11;
  for (bool graph : {false, true}) {
    SCOPED_TRACE(graph ? "cuda graph" : "enqueue");
    auto r = cuda_runner(m.ck, "fp32", graph, 0, /*device_sampling=*/false);
    ASSERT_TRUE(r);
    auto g = r->generate(greedy);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const LlmRunStats gs = r->last_stats();
    EXPECT_TRUE(gs.device_io);
    EXPECT_EQ(gs.logits_rows_read, 0);
    EXPECT_EQ(gs.argmax_only_steps, gs.steps);
    for (size_t i = 0; i < greedy.size(); ++i) {
      ASSERT_EQ(static_cast<int64_t>((*g)[i].tokens.size()), greedy[i].options.max_new_tokens);
      EXPECT_GE(check_near_argmax(**ref, greedy[i], (*g)[i].tokens, 0.01f), 0) << "request " << i;
    }

    auto x = r->generate(mixed);
    ASSERT_TRUE(x.ok()) << x.status().to_string();
    const LlmRunStats xs = r->last_stats();
    EXPECT_EQ(xs.logits_rows_read, mixed[2].options.max_new_tokens);
    EXPECT_EQ(xs.argmax_only_steps, xs.steps - mixed[2].options.max_new_tokens);
    for (size_t i = 0; i < mixed.size(); ++i)
      if (i != 2) EXPECT_EQ((*x)[i].tokens, (*g)[i].tokens) << "greedy request " << i;
    ASSERT_EQ(static_cast<int64_t>((*x)[2].tokens.size()), mixed[2].options.max_new_tokens);
    check_sampled(**ref, mixed[2], (*x)[2].tokens);
    EXPECT_NE((*x)[2].tokens, (*g)[2].tokens) << "temperature 1.5 drew the greedy tokens: the test cannot tell the modes apart";
    auto alone = r->generate({mixed[2]});
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ((*alone)[0].tokens, (*x)[2].tokens);
    EXPECT_EQ(r->last_stats().argmax_only_steps, 0);
  }

  // GPU sampling: request 2 sampled, 0 greedy with a repetition penalty, 4 sampled with top-k,
  // top-p and a penalty; 1 and 3 plain greedy.
  std::vector<LlmRequest> gpu = mixed;
  gpu[0].options.sampling.repetition_penalty = 1.3;
  gpu[4].options.sampling = {0.8, 20, 0.9, 99, 1.2};
  int64_t device_tokens = 0;
  for (size_t i : {0, 2, 4}) device_tokens += gpu[i].options.max_new_tokens;
  std::vector<int32_t> first[5];
  for (bool graph : {false, true}) {
    SCOPED_TRACE(graph ? "GPU sampling, cuda graph" : "GPU sampling, enqueue");
    auto r = cuda_runner(m.ck, "fp32", graph);
    ASSERT_TRUE(r);
    auto g = r->generate(greedy);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ(r->last_stats().device_sampled_tokens, 0);
    auto x = r->generate(gpu);
    ASSERT_TRUE(x.ok()) << x.status().to_string();
    const LlmRunStats xs = r->last_stats();
    EXPECT_TRUE(xs.device_sampling);
    EXPECT_EQ(xs.logits_rows_read, 0);
    EXPECT_EQ(xs.argmax_only_steps, xs.steps);
    EXPECT_EQ(xs.device_sampled_tokens, device_tokens);
    for (size_t i = 0; i < gpu.size(); ++i) {
      SCOPED_TRACE("request " + std::to_string(i));
      ASSERT_EQ(static_cast<int64_t>((*x)[i].tokens.size()), gpu[i].options.max_new_tokens);
      if (i == 1 || i == 3) {
        EXPECT_EQ((*x)[i].tokens, (*g)[i].tokens) << "a greedy request changed";
      } else {
        check_device_sampled(**ref, gpu[i], (*x)[i].tokens);
      }
      if (graph) {
        EXPECT_EQ((*x)[i].tokens, first[i]) << "CUDA graph != enqueue";
      } else {
        first[i] = (*x)[i].tokens;
      }
      // Alone: the same tokens (the draws depend on the seed and position only).
      auto alone = r->generate({gpu[i]});
      ASSERT_TRUE(alone.ok()) << alone.status().to_string();
      EXPECT_EQ((*alone)[0].tokens, (*x)[i].tokens) << "batched != alone";
    }
    EXPECT_NE((*x)[2].tokens, (*g)[2].tokens) << "temperature 1.5 drew the greedy tokens: the test cannot tell the modes apart";
  }
}

// LlmRunner::profile_step (bench-llm --profile-decode; docs/decisions/0089): before any step of
// the bucket it is an error; after a generate, every layer of the decode step has a device time
// (the step graph's GEMMs, PagedAttention and the LM head among them) and running the step again
// over the arena leaves the next generate's tokens as they were.
TEST(GpuLlmRunner, ProfileStepTimesEveryLayer) {
  REQUIRE_GPU();
  testing::Model m = testing::make_model("gpuprofile", testing::tiny_llama_config(2), 35);
  const std::vector<LlmRequest> qs = requests(m.ck.config().vocab_size);
  for (bool graph : {false, true}) {
    SCOPED_TRACE(graph ? "cuda graph" : "enqueue");
    auto r = cuda_runner(m.ck, "fp16", graph);
    ASSERT_TRUE(r);
    auto none = r->profile_step(1);
    ASSERT_FALSE(none.ok());
    EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument) << none.status().to_string();
    auto first = r->generate(qs);
    ASSERT_TRUE(first.ok()) << first.status().to_string();
    auto prof = r->profile_step(1);  // the last steps decode request 4 alone
    ASSERT_TRUE(prof.ok()) << prof.status().to_string();
    ASSERT_GT(prof->size(), 10u);
    double total = 0;
    bool head = false, paged = false;
    for (const LayerTiming& l : *prof) {
      EXPECT_GE(l.ms, 0.0) << l.name;
      EXPECT_FALSE(l.tactic.empty()) << l.name;
      total += l.ms;
      head = head || l.name == "lm_head";
      paged = paged || l.op == "PagedAttention";
    }
    EXPECT_GT(total, 0.0);
    EXPECT_TRUE(head);
    EXPECT_TRUE(paged);
    auto again = r->generate(qs);
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    for (size_t i = 0; i < qs.size(); ++i) EXPECT_EQ((*again)[i].tokens, (*first)[i].tokens) << "request " << i;
  }
}

TEST(GpuLlmRunner, TheMemoryBudgetSizesThePool) {
  REQUIRE_GPU();
  testing::Model m = testing::make_model("gpubudget", testing::tiny_llama_config(2), 32);
  // No budget: capped at max_batch full-length sequences (4 x 8 blocks).
  auto full = cuda_runner(m.ck, "fp16", false);
  ASSERT_TRUE(full);
  EXPECT_EQ(full->pool().num_blocks(), 4 * 8);
  // A budget below the weights is OutOfMemory naming the budget.
  cli::LlmBuildOptions o;
  o.dtype = "fp16";
  o.device = "gpu";
  o.max_batch = 4;
  o.max_seq_len = 64;
  o.max_num_tokens = 16;
  o.block_size = 8;
  auto built = cli::build_llm_engine(m.ck, o);
  ASSERT_TRUE(built.ok());
  auto engine = Runtime::deserialize_engine(built->plan);
  ASSERT_TRUE(engine.ok());
  LlmRunnerOptions ro;
  ro.max_memory_bytes = 1024;
  auto tiny = LlmRunner::create(*engine, built->info, m.ck.config(), nullptr, ro);
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().code(), StatusCode::kOutOfMemory);
  EXPECT_NE(tiny.status().message().find("budget"), std::string::npos) << tiny.status().message();
}

}  // namespace
}  // namespace kiln::llm
