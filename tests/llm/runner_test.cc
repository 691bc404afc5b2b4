// LlmRunner (src/llm/runner.h) on CPU plans of the step graph built by build_llm_engine, against
// LlmCpuRunner (the decoder-graph reference, one request at a time): in-flight batching gives
// each request exactly its own tokens; requests beyond the max batch or the KV pool queue;
// chunked prefill equals unchunked; seeded sampling does not depend on batch companions; stop
// conditions (eos, max_new_tokens, stop strings, max length) and bad requests.
#include "llm/runner.h"

#include <gtest/gtest.h>

#include <random>

#include "builder/build_from_graph.h"
#include "llm/bpe_tokenizer.h"
#include "llm/random_checkpoint.h"
#include "tools/kiln/llm_build.h"
#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::llm {
namespace {

using nlohmann::json;
using testing::byte_tokenizer_json;

struct Fixture {
  testing::Model model;
  std::unique_ptr<LlmCpuRunner> reference;
};

Fixture make_fixture(const std::string& config_json, uint32_t seed) {
  Fixture f{testing::make_model("runner", config_json, seed), nullptr};
  auto r = LlmCpuRunner::create(f.model.ck);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (r.ok()) f.reference = std::move(*r);
  return f;
}

struct EngineShape {
  int64_t max_batch = 4, max_seq_len = 64, max_num_tokens = 16, block_size = 4;
  int64_t num_blocks = 0;  // 0: the runner's default
};

std::unique_ptr<LlmRunner> make_runner(const Checkpoint& ck, const EngineShape& s, std::unique_ptr<Tokenizer> tok = nullptr) {
  cli::LlmBuildOptions o;
  o.dtype = "fp32";
  o.device = "cpu";
  o.cache_dtype = "float32";
  o.max_batch = s.max_batch;
  o.max_seq_len = s.max_seq_len;
  o.max_num_tokens = s.max_num_tokens;
  o.block_size = s.block_size;
  auto built = cli::build_llm_engine(ck, o);
  EXPECT_TRUE(built.ok()) << built.status().to_string();
  if (!built.ok()) return nullptr;
  auto engine = Runtime::deserialize_engine(built->plan);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return nullptr;
  LlmRunnerOptions ro;
  ro.num_blocks = s.num_blocks;
  auto r = LlmRunner::create(*engine, built->info, ck.config(), std::move(tok), ro);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(*r) : nullptr;
}

std::vector<int32_t> random_prompt(size_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> p(n);
  for (int32_t& t : p) t = id(rng);
  return p;
}

std::vector<int32_t> alone(const LlmCpuRunner& ref, const LlmRequest& q) {
  auto g = ref.generate(q.prompt, q.options);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? g->tokens : std::vector<int32_t>{};
}

// Five requests of different prompt lengths and max_new_tokens, all submitted together.
std::vector<LlmRequest> five_requests(int64_t vocab) {
  const size_t lens[] = {1, 9, 3, 14, 6};
  const int64_t news[] = {7, 3, 10, 5, 12};
  std::vector<LlmRequest> qs(5);
  for (size_t i = 0; i < 5; ++i) {
    qs[i].prompt = random_prompt(lens[i], vocab, 100 + static_cast<uint32_t>(i));
    qs[i].options.max_new_tokens = news[i];
    qs[i].options.ignore_eos = true;
  }
  return qs;
}

void expect_each_alone(const LlmCpuRunner& ref, const std::vector<LlmRequest>& qs, const std::vector<LlmResult>& got) {
  ASSERT_EQ(got.size(), qs.size());
  for (size_t i = 0; i < qs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, alone(ref, qs[i])) << "request " << i;
    EXPECT_EQ(static_cast<int64_t>(got[i].tokens.size()), qs[i].options.max_new_tokens) << "request " << i;
    EXPECT_EQ(got[i].token_ms.size(), got[i].tokens.size());
  }
}

TEST(LlmRunner, InFlightBatchingGivesEachRequestItsOwnTokens) {
  for (const std::string& config : {testing::tiny_llama_config(2), testing::tiny_gpt2_config(2), testing::tiny_qwen2_config()}) {
    Fixture f = make_fixture(config, 11);
    ASSERT_TRUE(f.reference);
    EngineShape s;
    s.max_batch = 8;
    s.max_seq_len = 32;
    auto r = make_runner(f.model.ck, s);
    ASSERT_TRUE(r);
    const std::vector<LlmRequest> qs = five_requests(f.model.ck.config().vocab_size);
    // The streamed tokens are the returned ones, in order, the last flagged.
    std::vector<std::vector<int32_t>> streamed(qs.size());
    std::vector<int> lasts(qs.size(), 0);
    auto got = r->generate(qs, [&](size_t q, int32_t t, bool last) {
      ASSERT_LT(q, qs.size());
      EXPECT_EQ(lasts[q], 0) << "a token after request " << q << "'s last";
      streamed[q].push_back(t);
      lasts[q] += last;
    });
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    SCOPED_TRACE(f.model.ck.config().model_type);
    expect_each_alone(*f.reference, qs, *got);
    for (size_t i = 0; i < qs.size(); ++i) {
      EXPECT_EQ(streamed[i], (*got)[i].tokens);
      EXPECT_EQ(lasts[i], 1);
      EXPECT_EQ((*got)[i].stop, StopReason::kMaxNewTokens);
    }
    // All five ran together (decode tokens and prefills in the same steps), and the pool is whole again.
    EXPECT_EQ(r->last_stats().max_running, 5);
    // A CPU plan keeps the execute path: every token came from a logits row read on the host.
    int64_t tokens = 0;
    for (const LlmResult& x : *got) tokens += static_cast<int64_t>(x.tokens.size());
    EXPECT_FALSE(r->last_stats().device_io);
    EXPECT_EQ(r->last_stats().logits_rows_read, tokens);
    EXPECT_EQ(r->last_stats().argmax_only_steps, 0);
    EXPECT_EQ(r->blocks().free_blocks(), r->blocks().num_blocks());
    EXPECT_EQ(r->blocks().used_rows(), 0);
  }
}

TEST(LlmRunner, RequestsBeyondMaxBatchQueue) {
  Fixture f = make_fixture(testing::tiny_llama_config(2), 12);
  ASSERT_TRUE(f.reference);
  EngineShape s;
  s.max_batch = 2;
  s.max_num_tokens = 8;
  auto r = make_runner(f.model.ck, s);
  ASSERT_TRUE(r);
  const std::vector<LlmRequest> qs = five_requests(f.model.ck.config().vocab_size);
  auto got = r->generate(qs);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_each_alone(*f.reference, qs, *got);
  EXPECT_EQ(r->last_stats().max_running, 2);
  // FIFO: request 2 is admitted only after request 0 or 1 finished, so after one of their last tokens.
  const double first_done = std::min((*got)[0].token_ms.back(), (*got)[1].token_ms.back());
  EXPECT_GE((*got)[2].admitted_ms, first_done);
  EXPECT_EQ(r->blocks().free_blocks(), r->blocks().num_blocks());
  // The runner is reusable: the same requests again give the same tokens.
  auto again = r->generate(qs);
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < qs.size(); ++i) EXPECT_EQ((*again)[i].tokens, (*got)[i].tokens);
}

TEST(LlmRunner, AnExhaustedPoolQueuesRequests) {
  Fixture f = make_fixture(testing::tiny_llama_config(1), 13);
  ASSERT_TRUE(f.reference);
  EngineShape s;
  s.max_batch = 4;
  s.block_size = 4;
  s.num_blocks = 7;  // request 3 (14 + 5 - 1 = 18 tokens) alone needs 5 blocks
  auto r = make_runner(f.model.ck, s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->pool().num_blocks(), 7);
  const std::vector<LlmRequest> qs = five_requests(f.model.ck.config().vocab_size);
  auto got = r->generate(qs);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_each_alone(*f.reference, qs, *got);
  EXPECT_LT(r->last_stats().max_running, 4);  // rows were free; blocks were not
  EXPECT_EQ(r->blocks().free_blocks(), 7);
  // A request whose worst case needs more than the whole pool is an error naming it.
  LlmRequest big;
  big.prompt = random_prompt(20, f.model.ck.config().vocab_size, 3);
  big.options.max_new_tokens = 20;  // 39 tokens: 10 blocks
  auto bad = r->generate({qs[0], big});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("request 1"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("pool has 7"), std::string::npos) << bad.status().message();
}

TEST(LlmRunner, ChunkedPrefillEqualsUnchunked) {
  Fixture f = make_fixture(testing::tiny_llama_config(2), 14);
  ASSERT_TRUE(f.reference);
  const int64_t V = f.model.ck.config().vocab_size;
  std::vector<LlmRequest> qs(2);
  qs[0].prompt = random_prompt(45, V, 1);  // long: 6 chunks of <= 8 tokens
  qs[0].options.max_new_tokens = 6;
  qs[0].options.ignore_eos = true;
  qs[1].prompt = random_prompt(2, V, 2);
  qs[1].options.max_new_tokens = 12;
  qs[1].options.ignore_eos = true;
  EngineShape chunked;
  chunked.max_batch = 2;
  chunked.max_num_tokens = 8;
  EngineShape whole = chunked;
  whole.max_num_tokens = 64;
  auto rc = make_runner(f.model.ck, chunked), rw = make_runner(f.model.ck, whole);
  ASSERT_TRUE(rc && rw);
  auto a = rc->generate(qs);
  auto b = rw->generate(qs);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GE(rc->last_stats().prefill_chunks, 5);
  EXPECT_EQ(rw->last_stats().prefill_chunks, 0);
  EXPECT_LE(rc->last_stats().max_step_tokens, 8);
  for (size_t i = 0; i < qs.size(); ++i) {
    EXPECT_EQ((*a)[i].tokens, (*b)[i].tokens) << "request " << i;
    EXPECT_EQ((*a)[i].tokens, alone(*f.reference, qs[i])) << "request " << i;
  }
  // Steps pad T to a power of two (at most max_num_tokens): buckets, never T itself.
  EXPECT_EQ(rc->bucket(1), 1);
  EXPECT_EQ(rc->bucket(3), 4);
  EXPECT_EQ(rc->bucket(8), 8);
  EXPECT_EQ(rw->bucket(33), 64);
  EXPECT_GT(rc->last_stats().padded_tokens + rw->last_stats().padded_tokens, 0);
}

TEST(LlmRunner, SeededSamplingDoesNotDependOnCompanions) {
  Fixture f = make_fixture(testing::tiny_llama_config(2), 15);
  ASSERT_TRUE(f.reference);
  const int64_t V = f.model.ck.config().vocab_size;
  EngineShape s;
  s.max_batch = 4;
  auto r = make_runner(f.model.ck, s);
  ASSERT_TRUE(r);
  LlmRequest q;
  q.prompt = random_prompt(5, V, 9);
  q.options.max_new_tokens = 16;
  q.options.ignore_eos = true;
  q.options.sampling = {1.1, 20, 0.95, 1234, 1.0};
  auto solo = r->generate({q});
  ASSERT_TRUE(solo.ok()) << solo.status().to_string();
  std::vector<LlmRequest> crowd = {five_requests(V)[3], q, five_requests(V)[1], q};
  crowd[0].options.sampling = {0.7, 0, 0.8, 5, 1.0};
  crowd[3].options.sampling.seed = 99;  // the same request with another seed
  auto with = r->generate(crowd);
  ASSERT_TRUE(with.ok()) << with.status().to_string();
  EXPECT_EQ((*with)[1].tokens, (*solo)[0].tokens);
  EXPECT_NE((*with)[3].tokens, (*solo)[0].tokens);  // 16 draws over 64 ids: equal only by a miracle
  // And the CPU reference draws the same tokens from the same seed.
  EXPECT_EQ((*solo)[0].tokens, alone(*f.reference, q));
}

TEST(LlmRunner, RepetitionPenaltyAsTheReference) {
  Fixture f = make_fixture(testing::tiny_llama_config(2), 16);
  ASSERT_TRUE(f.reference);
  auto r = make_runner(f.model.ck, EngineShape{});
  ASSERT_TRUE(r);
  std::vector<LlmRequest> qs = five_requests(f.model.ck.config().vocab_size);
  for (auto& q : qs) q.options.sampling.repetition_penalty = 3.0;
  auto got = r->generate(qs);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_each_alone(*f.reference, qs, *got);
  // Greedy with a strong penalty never repeats a token of the prompt or of its own output here.
  qs[4].options.sampling.repetition_penalty = 1.0;
  auto plain = r->generate({qs[4]});
  ASSERT_TRUE(plain.ok());
  EXPECT_NE((*plain)[0].tokens, (*got)[4].tokens);
}

TEST(LlmRunner, StopConditions) {
  json c = json::parse(testing::tiny_gpt2_config(2));
  c["vocab_size"] = 256;
  c["n_positions"] = 40;
  Fixture f = make_fixture(c.dump(), 17);
  ASSERT_TRUE(f.reference);
  auto tok = BpeTokenizer::from_json(byte_tokenizer_json(), "bytes");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  auto r = make_runner(f.model.ck, EngineShape{4, 40, 16, 4, 0}, std::move(*tok));
  ASSERT_TRUE(r);
  LlmRequest q;
  q.prompt = {'a', 'b', 'c'};
  q.options.max_new_tokens = 12;
  q.options.ignore_eos = true;
  auto free_run = r->generate({q});
  ASSERT_TRUE(free_run.ok()) << free_run.status().to_string();
  const std::vector<int32_t> all = (*free_run)[0].tokens;
  ASSERT_EQ(all.size(), 12u);

  // eos: the 4th token made an eos id stops there, included.
  LlmRequest e = q;
  e.options.ignore_eos = false;
  e.options.eos_token_ids = {all[3]};
  // Stop strings: the decoded bytes of tokens 5..6; the run stops at the first token whose text
  // contains them.
  LlmRequest st = q;
  auto want_text = r->tokenizer()->decode({all[5], all[6]});
  ASSERT_TRUE(want_text.ok());
  st.options.stop_strings = {"\x01never", *want_text};
  size_t stop_at = 0;
  for (size_t k = 1; k <= all.size(); ++k) {
    auto t = r->tokenizer()->decode(std::vector<int32_t>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k)));
    ASSERT_TRUE(t.ok());
    if (t->find(*want_text) != std::string::npos) {
      stop_at = k;
      break;
    }
  }
  ASSERT_GT(stop_at, 0u);
  // Max length: 40 positions, a 36-token prompt gets 5 tokens (positions 36..39 are cached, the
  // 5th token would need position 40).
  LlmRequest ml;
  ml.prompt = random_prompt(36, 256, 4);
  ml.options.max_new_tokens = 30;
  ml.options.ignore_eos = true;
  auto got = r->generate({e, st, ml, q});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  size_t first_eos = 0;
  while (all[first_eos] != all[3]) ++first_eos;  // an earlier token may equal it
  EXPECT_EQ((*got)[0].stop, StopReason::kEos);
  EXPECT_EQ((*got)[0].tokens, std::vector<int32_t>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(first_eos + 1)));
  EXPECT_EQ((*got)[1].stop, StopReason::kStopString);
  EXPECT_EQ((*got)[1].tokens, std::vector<int32_t>(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(stop_at)));
  EXPECT_EQ((*got)[2].stop, StopReason::kMaxLength);
  EXPECT_EQ((*got)[2].tokens, alone(*f.reference, ml));
  EXPECT_EQ((*got)[2].tokens.size(), 5u);
  EXPECT_EQ((*got)[3].tokens, all);
  // Without a tokenizer stop strings are refused.
  auto bare = make_runner(f.model.ck, EngineShape{4, 40, 16, 4, 0});
  ASSERT_TRUE(bare);
  auto refused = bare->generate({q, st});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("request 1: stop strings"), std::string::npos) << refused.status().message();
}

// profile_step is for CUDA plans with device io (bench-llm --profile-decode): a CPU plan's runner
// says so, before and after a generate.
TEST(LlmRunner, ProfileStepNeedsACudaPlan) {
  Fixture f = make_fixture(testing::tiny_llama_config(1), 19);
  auto r = make_runner(f.model.ck, EngineShape{2, 16, 8, 4, 0});
  ASSERT_TRUE(r);
  auto p = r->profile_step(1);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnsupported);
  LlmRequest q;
  q.prompt = {1, 2, 3};
  q.options.max_new_tokens = 2;
  ASSERT_TRUE(r->generate({q}).ok());
  p = r->profile_step(1);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("device io"), std::string::npos) << p.status().message();
}

TEST(LlmRunner, BadRequestsAreErrorsNamingThem) {
  Fixture f = make_fixture(testing::tiny_llama_config(1), 18);
  auto r = make_runner(f.model.ck, EngineShape{2, 16, 8, 4, 0});
  ASSERT_TRUE(r);
  LlmRequest ok;
  ok.prompt = {1, 2, 3};
  ok.options.max_new_tokens = 2;
  auto expect_error = [&](LlmRequest bad, const std::string& what) {
    auto g = r->generate({ok, bad});
    ASSERT_FALSE(g.ok()) << what;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(g.status().message().find("request 1"), std::string::npos) << g.status().message();
    EXPECT_NE(g.status().message().find(what), std::string::npos) << g.status().message();
    EXPECT_EQ(r->blocks().used_rows(), 0);
  };
  LlmRequest b = ok;
  b.prompt = {};
  expect_error(b, "no tokens");
  b.prompt = {1, 64};
  expect_error(b, "token id 64");
  b.prompt = random_prompt(17, 64, 1);
  expect_error(b, "limit of 16");
  b = ok;
  b.options.max_new_tokens = -1;
  expect_error(b, "max_new_tokens");
  b = ok;
  b.options.sampling.top_p = 0;
  expect_error(b, "top_p");
  // max_new_tokens 0: an empty result, no step.
  b = ok;
  b.options.max_new_tokens = 0;
  auto g = r->generate({b});
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE((*g)[0].tokens.empty());
  EXPECT_EQ(r->last_stats().steps, 0);
  // A plan that is not the engine info's: the block table's shape names the tensor.
  LlmEngineInfo info = r->info();
  info.max_blocks_per_seq += 1;
  info.max_seq_len = info.max_blocks_per_seq * info.block_size;
  auto mismatched = LlmRunner::create(std::shared_ptr<const Engine>(&r->engine(), [](const Engine*) {}), info,
                                      f.model.ck.config(), nullptr);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.status().message().find("block_table"), std::string::npos) << mismatched.status().message();
}

#ifdef KILN_HAVE_CUDA
// A CUDA engine lowers each bucket on first use; its value shapes must come from static shape
// inference, since the lowering's fallback (a CPU reference run on random inputs) cannot run
// PagedAttention on made-up pool addresses. Checked without a GPU on the fp16 layer graph.
TEST(LlmRunner, CudaLayerGraphShapesAtEveryBucketWithoutAReferenceRun) {
  Fixture f = make_fixture(testing::tiny_llama_config(2), 19);
  cli::LlmBuildOptions o;
  o.dtype = "fp16";
  o.device = "gpu";
  o.max_batch = 4;
  o.max_seq_len = 64;
  o.max_num_tokens = 24;
  o.block_size = 8;
  auto in = cli::prepare_llm_build(f.model.ck, o);
  ASSERT_TRUE(in.ok()) << in.status().to_string();
  EXPECT_EQ(in->config.tuning_shapes, 6);  // 1, 2, 4, 8, 16 and 24
  EXPECT_EQ(in->info.cache_dtype, DataType::kFloat16);
  std::vector<Shape> opt;
  auto g = cuda_layer_graph(in->graph, in->config, &opt);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(opt.size(), 6u);
  EXPECT_EQ(opt[0], (Shape{4}));  // a full decode batch
  for (int64_t t : {1, 2, 4, 8, 16, 24}) {
    std::vector<Shape> shapes = opt;
    shapes[0] = shapes[1] = shapes[2] = {t};
    auto vs = cuda::infer_value_shapes_by_reference(*g, shapes);
    ASSERT_TRUE(vs.ok()) << "T " << t << ": " << vs.status().to_string();
    EXPECT_EQ(vs->shapes[static_cast<size_t>(g->outputs[0])], (Shape{4, 64})) << "T " << t;
  }
}
#endif

TEST(LlmEngineInfo, RoundTripAndErrors) {
  LlmEngineInfo i;
  i.device = "cuda";
  i.dtype = "fp16";
  i.architecture = "llama";
  i.num_layers = 2;
  i.num_kv_heads = 2;
  i.head_dim = 4;
  i.vocab_size = 64;
  i.block_size = 16;
  i.max_rows = 8;
  i.max_blocks_per_seq = 4;
  i.max_seq_len = 60;
  i.max_num_tokens = 32;
  i.cache_dtype = DataType::kFloat16;
  i.max_memory_bytes = 3ull << 30;
  i.eos_token_ids = {2, 7};
  i.tokenizer_files = {"tokenizer.json"};
  auto back = parse_engine_info(engine_info_json(i), "x");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(engine_info_json(*back), engine_info_json(i));
  EXPECT_EQ(back->cache_dtype, DataType::kFloat16);
  EXPECT_EQ(back->eos_token_ids, i.eos_token_ids);
  auto broken = [&](const std::string& field, const json& value) {
    json j = json::parse(engine_info_json(i));
    if (value.is_null())
      j.erase(field);
    else
      j[field] = value;
    auto r = parse_engine_info(j.dump(), "'kiln_llm.json'");
    EXPECT_FALSE(r.ok()) << field;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().message();
    }
  };
  broken("version", 2);
  broken("device", "tpu");
  broken("dtype", "fp8");
  broken("cache_dtype", "int8");
  broken("max_batch", 0);
  broken("max_blocks_per_seq", 3);  // 3 x 16 < 60
  broken("plan", "../model.plan");
  broken("tokenizer_files", json::array({"a/b"}));
  broken("block_size", nullptr);
  broken("quant", "int4");
  broken("quant", 8);
  EXPECT_FALSE(parse_engine_info("[1]", "x").ok());
  // FP8 engines: quant and quant_scales round trip; float engines write neither.
  EXPECT_EQ(engine_info_json(i).find("quant"), std::string::npos);
  i.quant = "fp8";
  i.quant_scales = "calibration: ids (8 tokens in 1 prefill steps, min-max amax / 448)";
  auto q = parse_engine_info(engine_info_json(i), "x");
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(q->quant, "fp8");
  EXPECT_EQ(q->quant_scales, i.quant_scales);
}

}  // namespace
}  // namespace kiln::llm
