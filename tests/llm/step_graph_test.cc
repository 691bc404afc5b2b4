// The packed-token step graph over a paged KV cache (src/llm/step_graph.h) built into a CPU plan
// (build_from_graph) and run through the Engine / ExecutionContext API with a host pool the test
// owns: two sequences interleaved (prefill of A; A's decode token packed with B's prefill chunk;
// decode steps of both) give every requested token's logits equal to the decoder graph's
// (LlmCpuRunner over each whole sequence), for GPT-2, Llama with GQA and Qwen2; padding T with
// -1 tokens changes nothing; bad options are errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "builder/build_from_graph.h"
#include "kiln/runtime.h"
#include "llm/cpu_runner.h"
#include "llm/fp8_calibration.h"
#include "llm/random_checkpoint.h"
#include "llm/step_graph.h"

namespace kiln::llm {
namespace {

using testing::make_model;
using testing::Model;

constexpr double kTol = 1e-4;  // relative: max |a - b| / max |b| per row of logits

// One packed token of a step: its sequence (index into the test's sequences; -1 = padding) and
// position in it.
struct StepToken {
  int seq;
  int64_t pos;
};

class PagedModel {
 public:
  static constexpr int64_t kRows = 4, kMaxBlocks = 3, kBlockSize = 4, kNumBlocks = 8, kMaxTokens = 16;

  // Sequence s lives in block_table row kSeqRow[s].
  static constexpr int32_t kSeqRow[2] = {0, 2};

  explicit PagedModel(const Model& m, const std::string& cache_dtype = "float32",
                      std::vector<std::pair<float, float>> kv_scales = {}) {
    const ModelConfig& c = m.ck.config();
    StepGraphOptions o;
    o.max_rows = kRows;
    o.max_blocks_per_seq = kMaxBlocks;
    o.block_size = kBlockSize;
    o.cache_dtype = cache_dtype;
    o.kv_scales = std::move(kv_scales);
    auto g = build_step_graph(c, m.ck, o);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    if (!g.ok()) return;
    BuilderConfig config;
    config.target = TargetDevice::kCpu;
    OptimizationProfile p;
    for (const char* name : {kStepInputIdsName, kStepPositionIdsName, kStepTokenSeqName})
      EXPECT_TRUE(p.set_dimensions(name, {1}, {4}, {kMaxTokens}).ok());
    config.profiles = {p};
    auto plan = build_from_graph(*g, config);
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    if (!plan.ok()) return;
    auto e = Runtime::deserialize_engine(*plan);
    EXPECT_TRUE(e.ok()) << e.status().to_string();
    if (!e.ok()) return;
    engine_ = *e;
    ctx_ = engine_->create_execution_context();
    const size_t elem = cache_dtype == "float32" ? 4 : cache_dtype == "fp8e4m3fn" ? 1 : 2;
    pools_.assign(static_cast<size_t>(c.num_layers),
                  std::vector<uint8_t>(static_cast<size_t>(kNumBlocks * kv_block_elements(c, kBlockSize)) * elem, 0));
    // Blocks scattered over the pool: A at rows 0 (blocks 5 1 7), B at row 2 (blocks 2 6 0).
    table_ = {5, 1, 7, 0, 0, 0, 2, 6, 0, 0, 0, 0};
  }

  bool ready() const { return ctx_ != nullptr; }

  // Runs one step; returns logits [R, vocab] for the tokens at `logit_rows`.
  StatusOr<Tensor> step(const std::vector<std::vector<int32_t>>& seqs, const std::vector<StepToken>& toks,
                        const std::vector<int64_t>& logit_rows) {
    const int64_t t = static_cast<int64_t>(toks.size());
    Tensor ids(DataType::kInt64, {t}), pos(DataType::kInt64, {t}), seq(DataType::kInt32, {t}),
        table(DataType::kInt32, {kRows, kMaxBlocks}), pools(DataType::kInt64, {static_cast<int64_t>(pools_.size()), 2}),
        rows(DataType::kInt64, {kRows});
    for (int64_t i = 0; i < t; ++i) {
      const StepToken& k = toks[i];
      ids.data<int64_t>()[i] = k.seq < 0 ? 0 : seqs[k.seq][k.pos];
      pos.data<int64_t>()[i] = k.seq < 0 ? 0 : k.pos;
      seq.data<int32_t>()[i] = k.seq < 0 ? -1 : kSeqRow[k.seq];
    }
    std::copy(table_.begin(), table_.end(), table.data<int32_t>());
    for (size_t l = 0; l < pools_.size(); ++l) {
      pools.data<int64_t>()[2 * l] = static_cast<int64_t>(reinterpret_cast<intptr_t>(pools_[l].data()));
      pools.data<int64_t>()[2 * l + 1] = kNumBlocks;
    }
    for (int64_t r = 0; r < kRows; ++r) rows.data<int64_t>()[r] = r < static_cast<int64_t>(logit_rows.size()) ? logit_rows[r] : 0;
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

  const std::vector<std::vector<uint8_t>>& pools() const { return pools_; }

 private:
  std::shared_ptr<Engine> engine_;
  std::unique_ptr<ExecutionContext> ctx_;
  std::vector<std::vector<uint8_t>> pools_;  // one per layer
  std::vector<int32_t> table_;
};

double row_rel_diff(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num = std::max(num, std::isnan(a[i]) ? INFINITY : std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num / den;
}

// The decoder graph's logits of every position of `ids`: [S * vocab].
std::vector<float> reference_logits(const Model& m, const std::vector<int32_t>& ids) {
  auto r = LlmCpuRunner::create(m.ck);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return {};
  KvCache cache = (*r)->empty_cache();
  auto l = (*r)->forward(ids, &cache);
  EXPECT_TRUE(l.ok()) << l.status().to_string();
  return l.ok() ? std::vector<float>(l->data<float>(), l->data<float>() + l->numel()) : std::vector<float>{};
}

void expect_interleaved_matches_decoder(const Model& m, double tol = kTol, const std::string& cache_dtype = "float32",
                                        std::vector<std::pair<float, float>> kv_scales = {}) {
  const std::vector<std::vector<int32_t>> seqs = {{1, 17, 5, 33, 8, 2, 39, 11, 29}, {3, 30, 12, 7, 21, 36, 4}};
  const int64_t V = m.ck.config().vocab_size;
  const std::vector<std::vector<float>> ref = {reference_logits(m, seqs[0]), reference_logits(m, seqs[1])};
  ASSERT_FALSE(ref[0].empty() || ref[1].empty());
  PagedModel pm(m, cache_dtype, std::move(kv_scales));
  ASSERT_TRUE(pm.ready());
  struct Step {
    std::vector<StepToken> toks;
    std::vector<int64_t> logit_rows;  // indices into toks
  };
  const std::vector<Step> steps = {
      {{{0, 0}, {0, 1}, {0, 2}, {0, 3}}, {3, 0, 1, 2}},                           // A's prefill
      {{{1, 0}, {1, 1}, {0, 4}, {1, 2}}, {2, 3, 0, 1}},                           // B's chunk + A's decode
      {{{1, 3}, {0, 5}}, {0, 1}},                                                 // decode both
      {{{0, 6}, {1, 4}, {-1, 0}, {-1, 0}, {-1, 0}}, {0, 1}},                       // padded to 5
      {{{1, 5}, {0, 7}, {1, 6}, {0, 8}}, {0, 1, 2, 3}},                           // B's last two, A's last two
  };
  for (size_t si = 0; si < steps.size(); ++si) {
    const Step& s = steps[si];
    auto logits = pm.step(seqs, s.toks, s.logit_rows);
    ASSERT_TRUE(logits.ok()) << "step " << si << ": " << logits.status().to_string();
    ASSERT_EQ(logits->shape(), (Shape{PagedModel::kRows, V}));
    for (size_t r = 0; r < s.logit_rows.size(); ++r) {
      const StepToken& k = s.toks[s.logit_rows[r]];
      EXPECT_LT(row_rel_diff(logits->data<float>() + r * V, ref[k.seq].data() + k.pos * V, V), tol)
          << "step " << si << ", row " << r << ": sequence " << k.seq << " position " << k.pos;
    }
  }
}

TEST(LlmStepGraph, Gpt2InterleavedMatchesDecoderGraph) {
  expect_interleaved_matches_decoder(make_model("step_gpt2", testing::tiny_gpt2_config(), 4));
}
TEST(LlmStepGraph, LlamaGqaInterleavedMatchesDecoderGraph) {
  expect_interleaved_matches_decoder(make_model("step_llama", testing::tiny_llama_config(), 1));
}
TEST(LlmStepGraph, Qwen2InterleavedMatchesDecoderGraph) {
  expect_interleaved_matches_decoder(make_model("step_qwen2", testing::tiny_qwen2_config(), 3));
}
// A bfloat16 pool rounds every cached K/V (2^-9 relative): logits move by about that, no more.
TEST(LlmStepGraph, Bfloat16PoolStaysCloseToDecoderGraph) {
  expect_interleaved_matches_decoder(make_model("step_bf16", testing::tiny_llama_config(), 1), 3e-2, "bfloat16");
}

// An FP8 E4M3 pool with per-layer K/V scales calibrated on other tokens (amax / 448 of each
// layer's keys after RoPE and values, fp8_calibration.h): 3 mantissa bits move the logits by a few
// percent of their range, no more.
TEST(LlmStepGraph, Float8PoolWithCalibratedScalesStaysCloseToDecoderGraph) {
  const Model m = make_model("step_fp8kv", testing::tiny_llama_config(), 1);
  auto cal = calibrate_fp8(m.ck, {2, 19, 7, 33, 12, 25, 4, 30, 9, 14, 27, 6});
  ASSERT_TRUE(cal.ok()) << cal.status().to_string();
  ASSERT_EQ(cal->kv_scales.size(), static_cast<size_t>(m.ck.config().num_layers));
  for (size_t l = 0; l < cal->kv_scales.size(); ++l) {
    EXPECT_GT(cal->kv_amax[l].first, 0);
    EXPECT_GT(cal->kv_amax[l].second, 0);
    EXPECT_FLOAT_EQ(cal->kv_scales[l].first, static_cast<float>(cal->kv_amax[l].first / 448.0));
    EXPECT_FLOAT_EQ(cal->kv_scales[l].second, static_cast<float>(cal->kv_amax[l].second / 448.0));
  }
  expect_interleaved_matches_decoder(m, 0.12, "fp8e4m3fn", cal->kv_scales);
  // Scales of the wrong count are refused.
  StepGraphOptions o;
  o.cache_dtype = "fp8e4m3fn";
  o.kv_scales = {{1.f, 1.f}};
  auto g = build_step_graph(m.ck.config(), m.ck, o);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("kv_scales"), std::string::npos) << g.status().to_string();
}

// The same step padded with -1 tokens (T 3 -> 8, padding first and between) gives the same logits
// and leaves the pool as the unpadded step did.
TEST(LlmStepGraph, PaddingTokensChangeNothing) {
  const Model m = make_model("step_pad", testing::tiny_llama_config(), 7);
  const std::vector<std::vector<int32_t>> seqs = {{1, 17, 5, 33, 8}, {3, 30, 12, 7}};
  PagedModel plain(m), padded(m);
  ASSERT_TRUE(plain.ready() && padded.ready());
  auto a = plain.step(seqs, {{0, 0}, {0, 1}, {1, 0}}, {1, 2});
  auto b = padded.step(seqs, {{-1, 0}, {0, 0}, {-1, 0}, {0, 1}, {1, 0}, {-1, 0}, {-1, 0}, {-1, 0}}, {3, 4});
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << b.status().to_string();
  const int64_t V = m.ck.config().vocab_size;
  for (int64_t r = 0; r < 2; ++r) EXPECT_LT(row_rel_diff(b->data<float>() + r * V, a->data<float>() + r * V, V), 1e-6);
  // The pools hold the same slots, with the same K/V up to float rounding (the GEMMs of T = 3 and
  // T = 8 may sum in another order); the padding tokens wrote nothing.
  for (size_t l = 0; l < plain.pools().size(); ++l) {
    const auto* x = reinterpret_cast<const float*>(plain.pools()[l].data());
    const auto* y = reinterpret_cast<const float*>(padded.pools()[l].data());
    double max_diff = 0, max_abs = 0;
    size_t written = 0;
    for (size_t i = 0; i < plain.pools()[l].size() / 4; ++i) {
      EXPECT_EQ(x[i] == 0.f, y[i] == 0.f) << "layer " << l << " element " << i;
      written += x[i] != 0.f;
      max_diff = std::max(max_diff, std::fabs(double(x[i]) - y[i]));
      max_abs = std::max(max_abs, std::fabs(double(x[i])));
    }
    EXPECT_EQ(written, static_cast<size_t>(3 * kv_block_elements(m.ck.config(), 1))) << "3 tokens' K and V";
    EXPECT_LE(max_diff, 1e-6 * max_abs) << "layer " << l;
  }
  // And the next decode step reads that cache alike.
  auto c = plain.step(seqs, {{0, 2}, {1, 1}}, {0, 1});
  auto d = padded.step(seqs, {{1, 1}, {-1, 0}, {0, 2}}, {2, 0});
  ASSERT_TRUE(c.ok() && d.ok());
  for (int64_t r = 0; r < 2; ++r) EXPECT_LT(row_rel_diff(d->data<float>() + r * V, c->data<float>() + r * V, V), 1e-6);
}

TEST(LlmStepGraph, BadOptionsAreErrors) {
  const Model m = make_model("step_opts", testing::tiny_gpt2_config(), 4);
  StepGraphOptions o;
  o.max_rows = 0;
  auto g = build_step_graph(m.ck.config(), m.ck, o);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("max_rows 0"), std::string::npos) << g.status().to_string();
  o = {};
  o.cache_dtype = "float64";
  g = build_step_graph(m.ck.config(), m.ck, o);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("cache_dtype 'float64'"), std::string::npos) << g.status().to_string();
}

// The graph's interface, as the runner and the CUDA kernel rely on it.
TEST(LlmStepGraph, InputsOutputsAndOneNodePerLayer) {
  const Model m = make_model("step_io", testing::tiny_llama_config(3), 1);
  StepGraphOptions o;
  o.max_rows = 5;
  o.max_blocks_per_seq = 6;
  o.block_size = 16;
  o.cache_dtype = "float16";
  auto g = build_step_graph(m.ck.config(), m.ck, o);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  std::vector<std::string> names;
  for (ir::ValueId v : g->inputs) names.push_back(g->value(v).name);
  EXPECT_EQ(names, (std::vector<std::string>{kStepInputIdsName, kStepPositionIdsName, kStepTokenSeqName,
                                             kStepBlockTableName, kStepKvPoolsName, kStepLogitRowsName}));
  EXPECT_EQ(ir::sym_shape_str(*g->value(g->inputs[3]).shape), "[5,6]");
  EXPECT_EQ(ir::sym_shape_str(*g->value(g->inputs[4]).shape), "[3,2]");
  ASSERT_EQ(g->outputs.size(), 2u);
  EXPECT_EQ(g->value(g->outputs[0]).name, kStepLogitsName);
  EXPECT_EQ(g->value(g->outputs[1]).name, kStepNextTokensName);
  EXPECT_EQ(g->value(g->outputs[1]).dtype, DataType::kInt64);
  EXPECT_EQ(ir::sym_shape_str(*g->value(g->outputs[1]).shape), "[5]");
  std::vector<int64_t> layers;
  for (const ir::Node& n : g->nodes) {
    if (n.op != ir::OpKind::kPagedAttention) continue;
    layers.push_back(n.attr_int("layer", -1));
    EXPECT_EQ(n.attr_int("block_size", 0), 16);
    EXPECT_EQ(n.attr_string("cache_dtype", ""), "float16");
  }
  EXPECT_EQ(layers, (std::vector<int64_t>{0, 1, 2}));
}

// What a CUDA fp16 plan of the step graph lowers (the builder's own pipeline, no GPU needed): one
// PagedAttention per layer, its integer inputs still the graph's int64 / int32 inputs, the Rope
// layers of Q and K inside it (passes::fuse_rope_attention: input 7 inv_freq, no Rope layer left;
// the CPU plans of the tests above run the same fused form against the decoder graph's Rope layers).
TEST(LlmStepGraph, CudaLayerGraphKeepsOnePagedAttentionPerLayer) {
  const Model m = make_model("step_cuda", testing::tiny_llama_config(3), 1);
  StepGraphOptions o;
  o.max_rows = 2;
  o.max_blocks_per_seq = 4;
  o.block_size = 8;
  o.cache_dtype = "float16";
  auto g = build_step_graph(m.ck.config(), m.ck, o);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  BuilderConfig c;
  c.target = TargetDevice::kCuda;
  c.fp16 = true;
  OptimizationProfile p;
  for (const char* name : {kStepInputIdsName, kStepPositionIdsName, kStepTokenSeqName})
    ASSERT_TRUE(p.set_dimensions(name, {1}, {8}, {64}).ok());
  c.profiles = {p};
  auto laid = cuda_layer_graph(*g, c, nullptr);
  ASSERT_TRUE(laid.ok()) << laid.status().to_string();
  std::vector<int64_t> layers;
  for (const ir::Node& n : laid->nodes) {
    EXPECT_TRUE(n.removed || n.op != ir::OpKind::kRope) << n.name << ": a Rope layer was not fused";
    if (n.removed || n.op != ir::OpKind::kPagedAttention) continue;
    layers.push_back(n.attr_int("layer", -1));
    ASSERT_EQ(n.inputs.size(), 8u) << n.name;
    EXPECT_EQ(laid->value(n.inputs[7]).dtype, DataType::kFloat32) << n.name;
    const char* names[] = {kStepPositionIdsName, kStepTokenSeqName, kStepBlockTableName, kStepKvPoolsName};
    for (int i = 0; i < 4; ++i) EXPECT_EQ(laid->value(n.inputs[3 + i]).name, names[i]) << n.name;
    EXPECT_EQ(laid->value(n.inputs[4]).dtype, DataType::kInt32);
    EXPECT_EQ(laid->value(n.inputs[6]).dtype, DataType::kInt64);
  }
  EXPECT_EQ(layers, (std::vector<int64_t>{0, 1, 2}));
}

}  // namespace
}  // namespace kiln::llm
