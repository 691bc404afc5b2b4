// The decoder step graph (src/llm/decoder_graph.h) and the CPU generation loop (cpu_runner.h) on
// tiny random checkpoints written here: logits against an independent double-precision forward
// pass (naive_decoder.h), the KV cache against re-running the whole sequence, GQA against the
// same model with its kv heads repeated, RoPE against its formula, and generation's determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>

#include "backends/cpu/interpreter.h"
#include "ir/shape_inference.h"
#include "llm/checkpoint.h"
#include "llm/cpu_runner.h"
#include "llm/decoder_graph.h"
#include "llm/naive_decoder.h"
#include "llm/rope.h"

namespace kiln::llm {
namespace {

using nlohmann::json;
using testing::FloatWeight;
using testing::make_model;
using testing::Model;
using testing::NaiveDecoder;

constexpr double kTol = 1e-4;  // relative: max |a - b| / max |b| per row of logits

std::string llama31_config() {  // llama3 RoPE scaling whose three branches all occur (see RopeLlama3Branches)
  return json{{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 32},
              {"intermediate_size", 48}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
              {"num_key_value_heads", 2}, {"vocab_size", 70}, {"max_position_embeddings", 256},
              {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0},
              {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                                {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}}},
              {"tie_word_embeddings", false}, {"bos_token_id", 1}, {"eos_token_id", {2, 3}}}
      .dump();
}

// Llama 3's inv_freq written from transformers' _compute_llama3_parameters, independently of src/llm.
std::vector<double> llama3_inv_freq(double theta, int64_t hd, double factor, double lo, double hi, double orig) {
  std::vector<double> f;
  for (int64_t i = 0; i < hd / 2; ++i) {
    const double base = 1.0 / std::pow(theta, 2.0 * i / hd);
    const double wavelen = 2 * M_PI / base;
    const double scaled = wavelen > orig / lo ? base / factor : base;
    const double smooth = (orig / wavelen - lo) / (hi - lo);
    const bool medium = !(wavelen < orig / hi) && !(wavelen > orig / lo);
    f.push_back(medium ? (1 - smooth) * scaled / factor + smooth * scaled : scaled);
  }
  return f;
}

// Removes a directory when it goes.
struct DirGuard {
  std::string dir;
  ~DirGuard() { std::filesystem::remove_all(dir); }
};

std::unique_ptr<LlmCpuRunner> runner_of(const Model& m) {
  auto r = LlmCpuRunner::create(m.ck);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(*r) : nullptr;
}

double row_rel_diff(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::isnan(a[i]) || std::isnan(b[i]) ? (std::isnan(a[i]) && std::isnan(b[i]) ? 0.0 : INFINITY)
                                                          : std::fabs(double(a[i]) - b[i]);
    num = std::max(num, d);
    den = std::max(den, std::fabs(double(b[i])));
  }
  return den > 0 ? num / den : num;
}

// Logits of `ids` in one step from an empty cache: [S * vocab].
std::vector<float> full_logits(const LlmCpuRunner& r, const std::vector<int32_t>& ids) {
  KvCache cache = r.empty_cache();
  auto l = r.forward(ids, &cache);
  EXPECT_TRUE(l.ok()) << l.status().to_string();
  if (!l.ok()) return {};
  EXPECT_EQ(l->shape(), (Shape{1, static_cast<int64_t>(ids.size()), r.config().vocab_size}));
  return std::vector<float>(l->data<float>(), l->data<float>() + l->numel());
}

const std::vector<int32_t> kIds = {1, 17, 5, 33, 8, 2, 39, 11, 29};  // < every tiny vocabulary (Qwen2: 40)

// The graph's logits equal the naive double-precision forward pass at every position.
void expect_matches_naive(const Model& m, std::vector<double> inv_freq = {}) {
  auto r = runner_of(m);
  ASSERT_TRUE(r);
  const int64_t V = r->config().vocab_size;
  const std::vector<float> got = full_logits(*r, kIds);
  ASSERT_EQ(got.size(), kIds.size() * V);
  NaiveDecoder naive(r->config(), m.weights, std::move(inv_freq));
  const auto want = naive.logits(kIds);
  for (size_t s = 0; s < kIds.size(); ++s) {
    std::vector<float> w(want[s].begin(), want[s].end());
    EXPECT_LT(row_rel_diff(got.data() + s * V, w.data(), V), kTol) << "position " << s;
  }
}

TEST(LlmDecoderGraph, LlamaGqaMatchesNaiveForward) { expect_matches_naive(make_model("llama", testing::tiny_llama_config(), 1)); }

TEST(LlmDecoderGraph, Llama3RopeScalingMatchesNaiveForward) {
  Model m = make_model("llama31", llama31_config(), 2);
  expect_matches_naive(m, llama3_inv_freq(10000.0, 8, 8.0, 1.0, 4.0, 64.0));
}

TEST(LlmDecoderGraph, Qwen2BiasesTiedMatchesNaiveForward) { expect_matches_naive(make_model("qwen2", testing::tiny_qwen2_config(), 3)); }

TEST(LlmDecoderGraph, LlamaAttentionAndMlpBiasesMatchNaiveForward) {
  json c = json::parse(testing::tiny_llama_config());
  c["attention_bias"] = true;  // q/k/v and o_proj biases
  c["mlp_bias"] = true;        // gate/up/down biases
  Model m = make_model("biases", c.dump(), 19);
  ASSERT_TRUE(m.ck.find("model.layers.1.self_attn.o_proj.bias") && m.ck.find("model.layers.0.mlp.down_proj.bias"));
  expect_matches_naive(m);
}

TEST(LlmDecoderGraph, MistralMatchesNaiveForward) {
  json c = json::parse(testing::tiny_llama_config());
  c["architectures"] = {"MistralForCausalLM"};
  c["model_type"] = "mistral";
  c["num_key_value_heads"] = 1;
  c["sliding_window"] = 64;
  Model m = make_model("mistral", c.dump(), 20);
  expect_matches_naive(m);
  auto r = runner_of(m);
  EXPECT_EQ(r->max_length(), 64);  // the window bounds a request: windowed attention is not implemented
}

TEST(LlmDecoderGraph, Gpt2MatchesNaiveForward) { expect_matches_naive(make_model("gpt2", testing::tiny_gpt2_config(), 4)); }

TEST(LlmDecoderGraph, Gpt2UntiedLmHeadMatchesNaiveForward) {
  json c = json::parse(testing::tiny_gpt2_config());
  c["tie_word_embeddings"] = false;
  expect_matches_naive(make_model("gpt2u", c.dump(), 5));
}

TEST(LlmDecoderGraph, Bf16AndF16WeightsAreConvertedExactly) {
  // The F16 checkpoint's logits equal those of an F32 checkpoint holding the F16-rounded values.
  Model h = make_model("f16", testing::tiny_llama_config(), 6, "F16");
  std::vector<FloatWeight> rounded = h.weights;
  for (FloatWeight& w : rounded)
    for (float& v : w.values) v = fp16_to_float(float_to_fp16(v));
  const std::string d32 = testing::make_temp_dir("f16as32");
  DirGuard g32{d32};
  testing::write_checkpoint(d32, h.config_json, rounded, "F32");
  auto ck32 = Checkpoint::open(d32);
  ASSERT_TRUE(ck32.ok());
  auto r16 = runner_of(h);
  auto r32 = LlmCpuRunner::create(*ck32);
  ASSERT_TRUE(r16 && r32.ok());
  EXPECT_EQ(full_logits(*r16, kIds), full_logits(**r32, kIds));
  Model b = make_model("bf16", testing::tiny_qwen2_config(), 7, "BF16");
  for (FloatWeight& w : b.weights)
    for (float& v : w.values) v = bf16_to_float(float_to_bf16(v));
  expect_matches_naive(b);
}

// (a) Decoding with the KV cache — a 3-token prefill, a 4-token chunk after it (past > 0 and
// several new tokens: the causal mask's offset), then single tokens — gives the logits and the
// cache of running the whole sequence at once.
void expect_cache_consistent(const Model& m) {
  auto r = runner_of(m);
  ASSERT_TRUE(r);
  const int64_t V = r->config().vocab_size;
  const std::vector<float> full = full_logits(*r, kIds);
  KvCache cache = r->empty_cache();
  size_t pos = 0;
  for (size_t chunk : {3, 4, 1, 1}) {
    std::vector<int32_t> step(kIds.begin() + pos, kIds.begin() + pos + chunk);
    auto l = r->forward(step, &cache);
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    ASSERT_EQ(l->dim(1), static_cast<int64_t>(chunk));
    for (size_t i = 0; i < chunk; ++i)
      EXPECT_LT(row_rel_diff(l->data<float>() + i * V, full.data() + (pos + i) * V, V), kTol) << "position " << pos + i;
    pos += chunk;
  }
  EXPECT_EQ(cache.length, static_cast<int64_t>(kIds.size()));
  KvCache once = r->empty_cache();
  ASSERT_TRUE(r->forward(kIds, &once).ok());
  for (int64_t l = 0; l < r->config().num_layers; ++l) {
    ASSERT_EQ(cache.keys[l].shape(), (Shape{1, r->config().num_kv_heads, 9, r->config().head_dim}));
    ASSERT_EQ(cache.values[l].shape(), once.values[l].shape());
    EXPECT_LT(row_rel_diff(cache.keys[l].data<float>(), once.keys[l].data<float>(), once.keys[l].numel()), kTol);
    EXPECT_LT(row_rel_diff(cache.values[l].data<float>(), once.values[l].data<float>(), once.values[l].numel()), kTol);
  }
}

TEST(LlmKvCache, LlamaDecodeMatchesWholeSequence) { expect_cache_consistent(make_model("kvl", llama31_config(), 8)); }
TEST(LlmKvCache, Qwen2DecodeMatchesWholeSequence) { expect_cache_consistent(make_model("kvq", testing::tiny_qwen2_config(), 9)); }
TEST(LlmKvCache, Gpt2DecodeMatchesWholeSequence) { expect_cache_consistent(make_model("kvg", testing::tiny_gpt2_config(), 10)); }

// (b) GQA: a model with kv_heads < heads gives the logits of the same model with every kv head
// repeated heads/kv_heads times (transformers' repeat_kv: kv head j serves query heads
// j*g .. j*g+g-1), which is plain multi-head attention.
TEST(LlmDecoderGraph, GqaEqualsRepeatedKvHeads) {
  for (const std::string& cfg : {testing::tiny_llama_config(), testing::tiny_qwen2_config()}) {
    Model gqa = make_model("gqa", cfg, 11);
    const ModelConfig& c = gqa.ck.config();
    ASSERT_LT(c.num_kv_heads, c.num_heads);
    const int64_t g = c.num_heads / c.num_kv_heads, hd = c.head_dim, D = c.hidden_size;
    json mha_cfg = json::parse(cfg);
    mha_cfg["num_key_value_heads"] = c.num_heads;
    std::vector<FloatWeight> ws = gqa.weights;
    for (FloatWeight& w : ws) {
      const bool kv = w.name.find("k_proj") != std::string::npos || w.name.find("v_proj") != std::string::npos;
      if (!kv) continue;
      const int64_t cols = w.shape.size() == 2 ? D : 1;  // weight rows are [kv head][hd], bias the same
      std::vector<float> rep;
      for (int64_t j = 0; j < c.num_kv_heads; ++j)
        for (int64_t r = 0; r < g; ++r)
          rep.insert(rep.end(), w.values.begin() + j * hd * cols, w.values.begin() + (j + 1) * hd * cols);
      w.values = rep;
      w.shape[0] = c.num_heads * hd;
    }
    const std::string dir = testing::make_temp_dir("mha");
    DirGuard guard{dir};
    testing::write_checkpoint(dir, mha_cfg.dump(), ws);
    auto mha_ck = Checkpoint::open(dir);
    ASSERT_TRUE(mha_ck.ok()) << mha_ck.status().to_string();
    auto r1 = runner_of(gqa);
    auto r2 = LlmCpuRunner::create(*mha_ck);
    ASSERT_TRUE(r1 && r2.ok());
    const std::vector<float> a = full_logits(*r1, kIds), b = full_logits(**r2, kIds);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_LT(row_rel_diff(a.data(), b.data(), static_cast<int64_t>(a.size())), 1e-5) << cfg;
  }
}

// (c) RoPE: the graph's rotation against the formula at a few positions, for the default, linear
// and llama3 frequencies.
TEST(LlmRope, GraphMatchesFormula) {
  ModelConfig c;
  c.head_dim = 8;
  c.rope.theta = 10000.0;
  struct Case {
    RopeScaling scaling;
    std::vector<double> inv;
  };
  std::vector<double> plain, linear;
  for (int i = 0; i < 4; ++i) plain.push_back(std::pow(10000.0, -2.0 * i / 8));
  for (double f : plain) linear.push_back(f / 4.0);
  const std::vector<Case> cases = {{RopeScaling::kNone, plain},
                                   {RopeScaling::kLinear, linear},
                                   {RopeScaling::kLlama3, llama3_inv_freq(10000.0, 8, 8.0, 1.0, 4.0, 64.0)}};
  const std::vector<int64_t> positions = {0, 1, 2, 17, 63, 100, 1000};
  for (const Case& k : cases) {
    c.rope.scaling = k.scaling;
    c.rope.factor = k.scaling == RopeScaling::kLinear ? 4.0 : 8.0;
    c.rope.original_max_position_embeddings = 64;
    auto inv = rope_inv_freq(c.rope, c.head_dim);
    ASSERT_TRUE(inv.ok());
    for (int i = 0; i < 4; ++i) EXPECT_NEAR((*inv)[i], k.inv[i], 1e-7 * k.inv[i]) << "pair " << i;
    auto g = build_rope_graph(c);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const int64_t H = 2, S = static_cast<int64_t>(positions.size()), hd = 8;
    Tensor x(DataType::kFloat32, {1, H, S, hd}), p(DataType::kInt64, {1, S});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::sin(0.37 * i + 0.1);
    for (int64_t s = 0; s < S; ++s) p.data<int64_t>()[s] = positions[s];
    auto y = interpret(*g, {x, p});
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t j = 0; j < hd / 2; ++j) {
          const float* xr = x.data<float>() + (h * S + s) * hd;
          const float* yr = (*y)[0].data<float>() + (h * S + s) * hd;
          const double a = positions[s] * k.inv[j];
          // float32 angles (as transformers computes them) lose ~1e-7 · angle radians
          const double tol = 2e-6 + 2e-7 * a;
          EXPECT_NEAR(yr[j], xr[j] * std::cos(a) - xr[j + 4] * std::sin(a), tol) << "pos " << positions[s] << " pair " << j;
          EXPECT_NEAR(yr[j + 4], xr[j + 4] * std::cos(a) + xr[j] * std::sin(a), tol) << "pos " << positions[s] << " pair " << j;
        }
  }
}

TEST(LlmRope, Llama3Branches) {
  // theta 1e4, head_dim 8: wavelengths 2π·{1, 10, 100, 1000}; with L = 64, low 1, high 4 the first
  // (< 16) is kept, the second (in [16, 64]) interpolated, the last two (> 64) divided by 8.
  RopeConfig r;
  r.theta = 10000.0;
  r.scaling = RopeScaling::kLlama3;
  r.factor = 8.0;
  r.original_max_position_embeddings = 64;
  auto f = rope_inv_freq(r, 8);
  ASSERT_TRUE(f.ok());
  EXPECT_FLOAT_EQ((*f)[0], 1.0f);
  EXPECT_LT((*f)[1], 0.1f);
  EXPECT_GT((*f)[1], 0.1f / 8);
  EXPECT_FLOAT_EQ((*f)[2], 0.01f / 8);
  EXPECT_FLOAT_EQ((*f)[3], 0.001f / 8);
  EXPECT_FALSE(rope_inv_freq(r, 7).ok());
}

TEST(LlmDecoderGraph, LastPositionLogitsAreTheLastRow) {
  Model m = make_model("last", testing::tiny_llama_config(), 12);
  auto all = build_decoder_graph(m.ck.config(), m.ck);
  DecoderGraphOptions o;
  o.all_logits = false;
  auto last = build_decoder_graph(m.ck.config(), m.ck, o);
  ASSERT_TRUE(all.ok() && last.ok());
  const int64_t S = 5, V = m.ck.config().vocab_size, KV = m.ck.config().num_kv_heads, hd = m.ck.config().head_dim;
  std::vector<Tensor> in = {Tensor(DataType::kInt64, {1, S}), Tensor(DataType::kInt64, {1, S})};
  for (int64_t i = 0; i < S; ++i) in[0].data<int64_t>()[i] = kIds[i], in[1].data<int64_t>()[i] = i;
  for (int64_t l = 0; l < 2 * m.ck.config().num_layers; ++l) in.emplace_back(DataType::kFloat32, Shape{1, KV, 0, hd});
  auto a = interpret(*all, in), b = interpret(*last, in);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*b)[0].shape(), (Shape{1, 1, V}));
  EXPECT_LT(row_rel_diff((*b)[0].data<float>(), (*a)[0].data<float>() + (S - 1) * V, V), 1e-6);
  EXPECT_EQ(all->inputs.size(), 2 + 2 * static_cast<size_t>(m.ck.config().num_layers));
  EXPECT_EQ(all->value(all->outputs[1]).name, present_key_name(0));
  // The all-positions form derived from the last-only graph shares its weights and equals `all`.
  auto derived = with_all_logits(*last);
  ASSERT_TRUE(derived.ok()) << derived.status().to_string();
  EXPECT_EQ(derived->nodes.size() + 1, last->nodes.size());
  const ir::ValueId embed = derived->find_value("model.embed_tokens.weight");
  ASSERT_NE(embed, ir::kNoValue);
  EXPECT_EQ(derived->value(embed).constant.get(), last->value(embed).constant.get());
  auto c = interpret(*derived, in);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE((*c)[0].bit_equal((*a)[0]));
  EXPECT_FALSE(with_all_logits(*all).ok());
  // The runner's last-only forward gives the same row.
  auto r = runner_of(m);
  KvCache cache = r->empty_cache();
  auto one = r->forward(std::vector<int32_t>(kIds.begin(), kIds.begin() + S), &cache, /*all_logits=*/false);
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(one->bit_equal((*b)[0]));
}

// Static shape inference (what the builder's passes and the CUDA lowering start from) follows the
// symbolic batch / seq / past dims through the whole graph.
TEST(LlmDecoderGraph, ShapesInferSymbolically) {
  for (const std::string& cfg : {testing::tiny_llama_config(), testing::tiny_gpt2_config()}) {
    Model m = make_model("shapes", cfg, 18);
    auto g = build_decoder_graph(m.ck.config(), m.ck);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    ASSERT_TRUE(ir::infer_shapes(*g).ok());
    const ModelConfig& c = m.ck.config();
    const ir::Value& logits = g->value(g->outputs[0]);
    ASSERT_TRUE(logits.shape.has_value());
    EXPECT_EQ(ir::sym_shape_str(*logits.shape), "[batch,seq," + std::to_string(c.vocab_size) + "]") << cfg;
    const ir::Value& pk = g->value(g->outputs[1]);
    ASSERT_TRUE(pk.shape.has_value());
    ASSERT_EQ(pk.shape->size(), 4u);
    EXPECT_EQ((*pk.shape)[1].value, c.num_kv_heads);
    EXPECT_EQ((*pk.shape)[3].value, c.head_dim);
    // Concrete shapes: 2 cached + 3 new tokens, batch 2.
    std::map<std::string, Shape> concrete = {{kInputIdsName, {2, 3}}, {kPositionIdsName, {2, 3}}};
    for (int64_t l = 0; l < c.num_layers; ++l)
      concrete[past_key_name(l)] = concrete[past_value_name(l)] = {2, c.num_kv_heads, 2, c.head_dim};
    auto g2 = build_decoder_graph(c, m.ck);
    ASSERT_TRUE(g2.ok() && ir::infer_shapes(*g2, &concrete).ok());
    EXPECT_EQ(ir::sym_shape_str(*g2->value(g2->outputs[0]).shape), "[2,3," + std::to_string(c.vocab_size) + "]");
    EXPECT_EQ(ir::sym_shape_str(*g2->value(g2->outputs[1]).shape),
              "[2," + std::to_string(c.num_kv_heads) + ",5," + std::to_string(c.head_dim) + "]");
  }
}

TEST(LlmDecoderGraph, Gpt2AttentionVariantsAreRefused) {
  for (const char* field : {"scale_attn_by_inverse_layer_idx", "scale_attn_weights"}) {
    json c = json::parse(testing::tiny_gpt2_config());
    c[field] = std::string(field) == "scale_attn_weights" ? false : true;
    auto parsed = parse_model_config(c.dump(), "config.json");
    ASSERT_FALSE(parsed.ok()) << field;
    EXPECT_EQ(parsed.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(parsed.status().message().find(field), std::string::npos) << parsed.status().message();
  }
}

TEST(LlmDecoderGraph, UnsupportedActivationIsNamed) {
  json c = json::parse(testing::tiny_llama_config());
  c["hidden_act"] = "gelu_10";
  Model m = make_model("act", c.dump(), 13);
  auto g = build_decoder_graph(m.ck.config(), m.ck);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(g.status().message().find("gelu_10"), std::string::npos) << g.status().message();
}

// (d) Greedy generation is deterministic and picks, at every step, the argmax of the logits of
// the whole sequence so far run without the cache.
TEST(LlmGenerate, GreedyIsDeterministicAndFollowsFullLogits) {
  Model m = make_model("greedy", llama31_config(), 14);
  auto r = runner_of(m);
  ASSERT_TRUE(r);
  GenerationOptions o;
  o.max_new_tokens = 10;
  o.ignore_eos = true;
  const std::vector<int32_t> prompt = {1, 9, 4};
  std::vector<int32_t> streamed;
  auto a = r->generate(prompt, o, [&](int32_t t) { streamed.push_back(t); });
  auto b = r->generate(prompt, o);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string();
  EXPECT_EQ(a->tokens.size(), 10u);
  EXPECT_EQ(a->stop, StopReason::kMaxNewTokens);
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->tokens, streamed);
  std::vector<int32_t> seq = prompt;
  const int64_t V = r->config().vocab_size;
  for (int32_t t : a->tokens) {
    const std::vector<float> l = full_logits(*r, seq);
    const float* last = l.data() + (seq.size() - 1) * V;
    EXPECT_EQ(t, std::max_element(last, last + V) - last) << "after " << seq.size() << " tokens";
    seq.push_back(t);
  }
}

TEST(LlmGenerate, SamplingIsReproducibleWithASeed) {
  Model m = make_model("sample", testing::tiny_gpt2_config(), 15);
  auto r = runner_of(m);
  ASSERT_TRUE(r);
  GenerationOptions o;
  o.max_new_tokens = 16;
  o.ignore_eos = true;
  o.sampling.temperature = 1.5;
  o.sampling.top_k = 20;
  o.sampling.top_p = 0.95;
  o.sampling.seed = 1234;
  auto a = r->generate({3, 4, 5}, o), b = r->generate({3, 4, 5}, o);
  o.sampling.seed = 4321;
  auto c = r->generate({3, 4, 5}, o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status().to_string();
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_NE(a->tokens, c->tokens);  // 16 draws from ~20 tokens: equal by chance with p < 1e-10
}

TEST(LlmGenerate, StopsAtEosFromGenerationConfig) {
  Model probe = make_model("eosprobe", testing::tiny_llama_config(), 16);
  auto r0 = runner_of(probe);
  ASSERT_TRUE(r0);
  GenerationOptions o;
  o.max_new_tokens = 6;
  o.ignore_eos = true;
  auto free_run = r0->generate({1, 7}, o);
  ASSERT_TRUE(free_run.ok());
  // The same weights with the third greedy token declared eos in generation_config.json.
  const int32_t eos = free_run->tokens[2];
  const bool earlier = free_run->tokens[0] == eos || free_run->tokens[1] == eos;
  Model m = make_model("eos", testing::tiny_llama_config(), 16, "F32", json{{"eos_token_id", {63, eos}}}.dump());
  auto r = runner_of(m);
  ASSERT_TRUE(r);
  o.ignore_eos = false;
  auto g = r->generate({1, 7}, o);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->stop, StopReason::kEos);
  EXPECT_EQ(g->tokens.back(), eos);
  if (!earlier) EXPECT_EQ(g->tokens.size(), 3u);
}

TEST(LlmGenerate, BadRequestsAreErrors) {
  Model m = make_model("bad", testing::tiny_gpt2_config(), 17);  // n_positions 32, vocab 50
  auto r = runner_of(m);
  ASSERT_TRUE(r);
  GenerationOptions o;
  auto e1 = r->generate({}, o);
  EXPECT_EQ(e1.status().code(), StatusCode::kInvalidArgument);
  auto e2 = r->generate({1, 50}, o);
  ASSERT_FALSE(e2.ok());
  EXPECT_NE(e2.status().message().find("token id 50"), std::string::npos) << e2.status().message();
  auto e3 = r->generate(std::vector<int32_t>(33, 1), o);
  ASSERT_FALSE(e3.ok());
  EXPECT_NE(e3.status().message().find("33 tokens"), std::string::npos) << e3.status().message();
  o.sampling.top_p = 0;
  EXPECT_EQ(r->generate({1}, o).status().code(), StatusCode::kInvalidArgument);
  // Generation that reaches n_positions stops there instead of failing.
  GenerationOptions longer;
  longer.max_new_tokens = 100;
  longer.ignore_eos = true;
  auto g = r->generate(std::vector<int32_t>(30, 1), longer);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->stop, StopReason::kMaxLength);
  EXPECT_EQ(g->tokens.size(), 3u);  // positions 30 and 31 are run; the token after 31 is the last
}

}  // namespace
}  // namespace kiln::llm
