// FP8 projections of the step graph (StepGraphOptions::fp8_x_scales, llm/fp8_calibration.h;
// decision 0059, addendum "FP8 projections"), on the CPU: tiny random checkpoints whose dims are
// multiples of 16, calibrated on token ids, built into CPU plans (build_from_graph) and run
// through Engine / ExecutionContext beside the float step graph. Measured: the cosine of every
// prefill row's logits to the float graph's, and the greedy tokens of a 12-token generation
// (how many leading tokens agree). Also: every projection is a QuantLinear and the embedding and
// lm_head are not; the calibration's amax is the data's (layer 0's q/k/v input computed by hand);
// the weight quantization; errors for bad scales, dims and calibration inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "builder/build_from_graph.h"
#include "core/numerics.h"
#include "kiln/runtime.h"
#include "llm/decoder_layers.h"
#include "llm/fp8_calibration.h"
#include "llm/random_checkpoint.h"
#include "llm/step_engine.h"
#include "llm/step_graph.h"

namespace kiln::llm {
namespace {

using nlohmann::json;
using testing::cosine;
using testing::make_model;
using testing::Model;
using testing::SeqEngine;

std::string llama16() { return testing::tiny_llama16_config(); }
std::string gpt2_16() { return testing::tiny_gpt2_16_config(); }
std::string qwen2_16() { return testing::tiny_qwen2_16_config(); }

const std::vector<int32_t> kCalib = {1, 9, 23, 4, 17, 33, 2, 40, 11, 7, 29, 5, 38, 13, 21, 3, 30, 8, 26, 15};

// The w_scale values of projection `name`'s QuantLinear node.
std::vector<float> w_scales(const ir::Graph& g, const std::string& name) {
  for (const ir::Node& n : g.nodes)
    if (!n.removed && n.name == name && n.op == ir::OpKind::kQuantLinear) {
      const auto& s = g.value(n.inputs[2]).constant;
      return std::vector<float>(s->data<float>(), s->data<float>() + s->numel());
    }
  return {};
}

void expect_fp8_close_to_float(const std::string& tag, const std::string& config, uint32_t seed, bool per_tensor = false) {
  const Model m = make_model(tag, config, seed);
  const ModelConfig& c = m.ck.config();
  auto cal = calibrate_fp8(m.ck, kCalib);
  ASSERT_TRUE(cal.ok()) << cal.status().to_string();
  EXPECT_EQ(cal->tokens, static_cast<int64_t>(kCalib.size()));
  SeqEngine f32(m, {}), f8(m, cal->x_scales, per_tensor);
  ASSERT_TRUE(f32.ready() && f8.ready());

  // Structure: every projection a QuantLinear of fp8 weights; the embedding and lm_head float.
  const std::vector<Projection> projections = decoder_projections(c);
  std::map<std::string, const ir::Node*> by_name;
  int quant = 0, matmul = 0;
  for (const ir::Node& n : f8.graph().nodes) {
    if (n.removed) continue;
    by_name[n.name] = &n;
    quant += n.op == ir::OpKind::kQuantLinear;
    matmul += n.op == ir::OpKind::kMatMul;
  }
  EXPECT_EQ(quant, static_cast<int>(projections.size()));
  EXPECT_EQ(matmul, 1);  // lm_head
  for (const Projection& p : projections) {
    ASSERT_TRUE(by_name.count(p.name)) << p.name;
    const ir::Node& n = *by_name[p.name];
    EXPECT_EQ(n.op, ir::OpKind::kQuantLinear) << p.name;
    const auto& w = f8.graph().value(n.inputs[1]).constant;
    ASSERT_TRUE(w) << p.name;
    EXPECT_EQ(w->dtype(), DataType::kFloat8E4M3FN) << p.name;
    EXPECT_EQ(w->shape(), (Shape{p.n, p.k})) << p.name;
    EXPECT_FLOAT_EQ(n.attr_float("x_scale", 0), cal->x_scales.at(p.name)) << p.name;
  }
  EXPECT_EQ(by_name.at("lm_head")->op, ir::OpKind::kMatMul);
  EXPECT_EQ(by_name.at("embed.tokens")->op, ir::OpKind::kGather);
  // Weight scales: per tensor, one value for each projection, shared by q/k/v and by gate/up (so
  // their fused layer keeps one scalar scale); per channel, the channels differ.
  for (const Projection& p : projections) {
    const std::vector<float> ws = w_scales(f8.graph(), p.name);
    ASSERT_EQ(ws.size(), static_cast<size_t>(p.n)) << p.name;
    const bool uniform = std::all_of(ws.begin(), ws.end(), [&](float v) { return v == ws[0]; });
    EXPECT_EQ(uniform, per_tensor) << p.name;
  }
  if (per_tensor && c.architecture != Architecture::kGpt2)
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const std::string L = "layers." + std::to_string(l);
      EXPECT_EQ(w_scales(f8.graph(), L + ".q_proj")[0], w_scales(f8.graph(), L + ".k_proj")[0]) << L;
      EXPECT_EQ(w_scales(f8.graph(), L + ".q_proj")[0], w_scales(f8.graph(), L + ".v_proj")[0]) << L;
      EXPECT_EQ(w_scales(f8.graph(), L + ".gate_proj")[0], w_scales(f8.graph(), L + ".up_proj")[0]) << L;
      EXPECT_NE(w_scales(f8.graph(), L + ".q_proj")[0], w_scales(f8.graph(), L + ".o_proj")[0]) << L;
    }
  // The plan keeps them in QuantLinear layers (projections of one input share one wide layer,
  // fuse_horizontal_gemm, and name the others in its origin).
  std::set<std::string> covered;
  for (const LayerInfo& l : f8.engine().layers())
    if (l.op == "QuantLinear") {
      covered.insert(l.name);
      covered.insert(l.origin.begin(), l.origin.end());
    }
  for (const auto& p : projections) EXPECT_TRUE(covered.count(p.name)) << p.name;

  // Prefill of 8 tokens: each row's logits within cosine 0.99 of the float graph's.
  const std::vector<int32_t> prompt = {3, 14, 15, 9, 26, 5, 35, 8};
  auto a = f32.step(prompt, 0);
  auto b = f8.step(prompt, 0);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << b.status().to_string();
  const int64_t V = c.vocab_size;
  double worst = 1;
  bool differ = false;
  for (int64_t r = 0; r < 8; ++r) {
    worst = std::min(worst, cosine(a->data<float>() + r * V, b->data<float>() + r * V, V));
    for (int64_t i = 0; i < V; ++i) differ |= a->data<float>()[r * V + i] != b->data<float>()[r * V + i];
  }
  EXPECT_GE(worst, 0.99) << tag;
  EXPECT_TRUE(differ) << "fp8 logits equal the float ones: the projections were not quantized";

  // Greedy: 12 tokens after a 5-token prompt from fresh engines; the leading tokens agree.
  SeqEngine g32(m, {}), g8(m, cal->x_scales, per_tensor);
  ASSERT_TRUE(g32.ready() && g8.ready());
  const std::vector<int32_t> p5 = {7, 1, 30, 12, 4};
  const std::vector<int32_t> t32 = g32.greedy(p5, 12), t8 = g8.greedy(p5, 12);
  ASSERT_EQ(t32.size(), 12u);
  ASSERT_EQ(t8.size(), 12u);
  size_t agree = 0;
  while (agree < t32.size() && t32[agree] == t8[agree]) ++agree;
  std::printf("[%s] fp8 vs float: min prefill cosine %.5f, greedy tokens agreeing %zu of 12\n", tag.c_str(), worst, agree);
  EXPECT_GE(agree, 4u) << tag;
}

TEST(LlmStepGraphFp8, LlamaCloseToFloat) { expect_fp8_close_to_float("fp8_llama", llama16(), 5); }
TEST(LlmStepGraphFp8, Gpt2CloseToFloat) { expect_fp8_close_to_float("fp8_gpt2", gpt2_16(), 6); }
TEST(LlmStepGraphFp8, Qwen2WithBiasesCloseToFloat) { expect_fp8_close_to_float("fp8_qwen2", qwen2_16(), 7); }
// Per-tensor weight scales (StepGraphOptions::fp8_per_tensor_weights, build-llm's default).
TEST(LlmStepGraphFp8, LlamaPerTensorWeightsCloseToFloat) { expect_fp8_close_to_float("fp8t_llama", llama16(), 5, true); }
TEST(LlmStepGraphFp8, Gpt2PerTensorWeightsCloseToFloat) { expect_fp8_close_to_float("fp8t_gpt2", gpt2_16(), 6, true); }
TEST(LlmStepGraphFp8, Qwen2PerTensorWeightsCloseToFloat) { expect_fp8_close_to_float("fp8t_qwen2", qwen2_16(), 7, true); }

// Layer 0's q/k/v read input_layernorm(embed[id]): RMSNorm by hand, max |.| over the calibration
// tokens, is the amax each of them gets (and x_scale = amax / 448); other data, other amax.
TEST(LlmStepGraphFp8, CalibrationTakesTheAmaxOfTheData) {
  const Model m = make_model("fp8_calib", llama16(), 11);
  const ModelConfig& c = m.ck.config();
  const int64_t D = c.hidden_size;
  auto weight = [&](const std::string& name) { return testing::find_weight(const_cast<Model&>(m).weights, name); };
  const testing::FloatWeight* embed = weight("model.embed_tokens.weight");
  const testing::FloatWeight* norm = weight("model.layers.0.input_layernorm.weight");
  ASSERT_TRUE(embed && norm);
  auto expected = [&](const std::vector<int32_t>& ids) {
    double amax = 0;
    for (int32_t id : ids) {
      const float* x = embed->values.data() + id * D;
      double ms = 0;
      for (int64_t i = 0; i < D; ++i) ms += double(x[i]) * x[i];
      const double inv = 1.0 / std::sqrt(ms / D + c.norm_eps);
      for (int64_t i = 0; i < D; ++i) amax = std::max(amax, std::fabs(x[i] * inv * norm->values[i]));
    }
    return amax;
  };
  for (const std::vector<int32_t>& ids : {std::vector<int32_t>{5}, std::vector<int32_t>{5, 60, 2, 77}, kCalib}) {
    Fp8CalibrationOptions o;
    o.max_seq_len = 3;  // several prefill steps
    auto cal = calibrate_fp8(m.ck, ids, o);
    ASSERT_TRUE(cal.ok()) << cal.status().to_string();
    EXPECT_EQ(cal->tokens, static_cast<int64_t>(ids.size()));
    EXPECT_EQ(cal->sequences, static_cast<int64_t>((ids.size() + 2) / 3));
    const double want = expected(ids);
    for (const char* p : {"layers.0.q_proj", "layers.0.k_proj", "layers.0.v_proj"}) {
      EXPECT_NEAR(cal->amax.at(p), want, 1e-5 * want) << p << " over " << ids.size() << " ids";
      EXPECT_FLOAT_EQ(cal->x_scales.at(p), static_cast<float>(cal->amax.at(p) / 448.0)) << p;
    }
    ASSERT_EQ(cal->x_scales.size(), decoder_projections(c).size());
    for (const auto& [name, a] : cal->amax) EXPECT_GT(a, 0) << name;
  }
  EXPECT_NE(expected({5}), expected({60}));  // the check above can tell data apart
}

TEST(LlmStepGraphFp8, WeightQuantizationPerOutputChannel) {
  // W [K 3, N 2] in x W layout: channel 0 = (1, -0.5, 0.25), channel 1 = (0, 0, 0) -> scale 1.
  Tensor w(DataType::kFloat32, {3, 2});
  const float v[] = {1.f, 0.f, -0.5f, 0.f, 0.3f, 0.f};
  std::copy(v, v + 6, w.data<float>());
  auto q = quantize_weight_fp8(w, "test");
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  ASSERT_EQ(q->w.shape(), (Shape{2, 3}));
  EXPECT_FLOAT_EQ(q->scale.data<float>()[0], 1.f / 448.f);
  EXPECT_FLOAT_EQ(q->scale.data<float>()[1], 1.f);
  const uint8_t* b = q->w.data<uint8_t>();
  EXPECT_EQ(fp8e4m3fn_to_float(b[0]), 448.f);                                         // the channel's amax
  EXPECT_EQ(fp8e4m3fn_to_float(b[1]), -224.f);                                        // exact
  EXPECT_EQ(b[2], double_to_fp8e4m3fn(0.3 * 448.0));                                  // 134.4 -> nearest E4M3
  EXPECT_EQ(fp8e4m3fn_to_float(b[2]), 128.f);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(fp8e4m3fn_to_float(b[3 + k]), 0.f);
  w.data<float>()[3] = NAN;
  auto bad = quantize_weight_fp8(w, "layers.3.up_proj");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("layers.3.up_proj"), std::string::npos) << bad.status().message();
}

TEST(LlmStepGraphFp8, WeightQuantizationPerTensor) {
  // The same W with one scale: the tensor's amax 1 (channel 1's zeros share it), or a group's
  // larger amax 2 given by the caller (then 1 -> 224, -0.5 -> -112).
  Tensor w(DataType::kFloat32, {3, 2});
  const float v[] = {1.f, 0.f, -0.5f, 0.f, 0.3f, 0.f};
  std::copy(v, v + 6, w.data<float>());
  EXPECT_DOUBLE_EQ(max_abs_weight(w), 1.0);
  auto q = quantize_weight_fp8(w, "test", max_abs_weight(w));
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_FLOAT_EQ(q->scale.data<float>()[0], 1.f / 448.f);
  EXPECT_FLOAT_EQ(q->scale.data<float>()[1], 1.f / 448.f);
  EXPECT_EQ(fp8e4m3fn_to_float(q->w.data<uint8_t>()[0]), 448.f);
  auto g = quantize_weight_fp8(w, "test", 2.0);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_FLOAT_EQ(g->scale.data<float>()[1], 2.f / 448.f);
  EXPECT_EQ(fp8e4m3fn_to_float(g->w.data<uint8_t>()[0]), 224.f);
  EXPECT_EQ(fp8e4m3fn_to_float(g->w.data<uint8_t>()[1]), -112.f);
  // A group amax below W's own is raised to it (the scale must cover W).
  auto low = quantize_weight_fp8(w, "test", 0.25);
  ASSERT_TRUE(low.ok());
  EXPECT_FLOAT_EQ(low->scale.data<float>()[0], 1.f / 448.f);
}

TEST(LlmStepGraphFp8, BadScalesAndDimsAreErrors) {
  const Model m = make_model("fp8_bad", llama16(), 12);
  std::map<std::string, float> s;
  for (const Projection& p : decoder_projections(m.ck.config())) s[p.name] = 0.01f;
  StepGraphOptions o;
  auto expect_error = [&](const std::string& needle) {
    auto g = build_step_graph(m.ck.config(), m.ck, o);
    ASSERT_FALSE(g.ok()) << needle;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(g.status().message().find(needle), std::string::npos) << g.status().message();
  };
  o.fp8_x_scales = s;
  o.fp8_x_scales.erase("layers.1.down_proj");
  expect_error("no x_scale for projection 'layers.1.down_proj'");
  o.fp8_x_scales = s;
  o.fp8_x_scales["layers.0.lm_head"] = 1.f;
  expect_error("'layers.0.lm_head', which is no projection");
  o.fp8_x_scales = s;
  o.fp8_x_scales["layers.0.k_proj"] = 0.f;
  expect_error("projection 'layers.0.k_proj'");
  o.fp8_x_scales = s;
  o.fp8_x_scales["layers.0.k_proj"] = NAN;
  expect_error("projection 'layers.0.k_proj'");
  o.fp8_x_scales = s;
  EXPECT_TRUE(build_step_graph(m.ck.config(), m.ck, o).ok());
  // The stock tiny Llama's k/v width 2 x 4 = 8 is no multiple of 16: k_proj is named.
  const Model odd = make_model("fp8_odd", testing::tiny_llama_config(1), 13);
  o.fp8_x_scales.clear();
  for (const Projection& p : decoder_projections(odd.ck.config())) o.fp8_x_scales[p.name] = 0.01f;
  auto g = build_step_graph(odd.ck.config(), odd.ck, o);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("'layers.0.k_proj' is [K 16, N 8]"), std::string::npos) << g.status().message();
}

TEST(LlmStepGraphFp8, CalibrationInputErrors) {
  const Model m = make_model("fp8_calerr", llama16(), 14);
  auto out_of_vocab = calibrate_fp8(m.ck, {1, 2, 96});
  ASSERT_FALSE(out_of_vocab.ok());
  EXPECT_NE(out_of_vocab.status().message().find("token 2 is id 96"), std::string::npos) << out_of_vocab.status().message();
  EXPECT_FALSE(calibrate_fp8(m.ck, {}).ok());
  for (const char* bad : {"", "1,,2", "1,x", "-3", "1, 2,", "99999999999"}) {
    auto ids = parse_calibration_ids(bad);
    EXPECT_FALSE(ids.ok()) << "'" << bad << "'";
    if (!ids.ok()) EXPECT_EQ(ids.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  auto ok = parse_calibration_ids(" 1, 22 ,333,0");
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(*ok, (std::vector<int32_t>{1, 22, 333, 0}));
  auto missing = calibration_ids_from_text_file(m.ck, m.dir + "/no_such.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no_such.txt"), std::string::npos);
  testing::write_file(m.dir + "/empty.txt", "");
  auto empty = calibration_ids_from_text_file(m.ck, m.dir + "/empty.txt");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos) << empty.status().message();
  testing::write_file(m.dir + "/calib.txt", "Some text.");
  auto no_tok = calibration_ids_from_text_file(m.ck, m.dir + "/calib.txt");  // the checkpoint has no tokenizer
  ASSERT_FALSE(no_tok.ok());
  EXPECT_NE(no_tok.status().message().find("pass token ids"), std::string::npos) << no_tok.status().message();
}

}  // namespace
}  // namespace kiln::llm
