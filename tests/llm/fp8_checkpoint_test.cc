// FP8 checkpoints (llm/fp8_checkpoint.h, StepGraphOptions::checkpoint_fp8; decision 0086), on the
// CPU: tiny random float checkpoints quantized here as ModelOpt (config.json or
// hf_quant_config.json), compressed-tensors (per-tensor and per-channel weight scales) and AutoFP8
// export them (fp8_test_checkpoint.h), opened, built into step graphs and CPU plans, and run
// beside the float checkpoint. Checked: every projection a QuantLinear whose W bytes are the
// checkpoint's (or, in per-tensor q/k/v and gate/up groups, those requantized to the group's
// largest weight scale), w_scale and x_scale as the rules say, ignored modules float; the logits'
// cosine to the float checkpoint's and the greedy tokens; the dequantized float reading; the
// requantization itself; every malformed declaration and scale tensor as an error naming it.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <set>

#include "core/numerics.h"
#include "llm/decoder_graph.h"
#include "llm/fp8_checkpoint.h"
#include "llm/fp8_test_checkpoint.h"
#include "llm/step_engine.h"

namespace kiln::llm {
namespace {

using nlohmann::json;
using testing::Fp8Export;
using testing::Fp8Written;
using testing::SeqEngine;
using testing::StTensor;

// A float checkpoint and its FP8 export in DIR/fp8 (removed with the Model).
struct Fp8Model {
  testing::Model f;
  std::string dir;
  std::map<std::string, Fp8Written> written;  // module -> codes and scales as written
  std::vector<StTensor> tensors;               // the FP8 checkpoint's tensors
  Checkpoint ck;
};

Fp8Model make_fp8(const std::string& tag, const std::string& config, uint32_t seed, const Fp8Export& x) {
  Fp8Model m{testing::make_model(tag, config, seed), "", {}, {}, {}};
  m.dir = m.f.dir + "/fp8";
  m.tensors = testing::fp8_tensors(m.f.weights, testing::fp8_input_scales(m.f.ck), x, &m.written);
  testing::write_fp8_checkpoint(m.dir, config, m.tensors, x);
  auto ck = Checkpoint::open(m.dir);
  EXPECT_TRUE(ck.ok()) << ck.status().to_string();
  if (ck.ok()) m.ck = std::move(*ck);
  return m;
}

// q/k/v and gate/up read one input; the other projections are groups of their own.
std::string group_of(const std::string& module) {
  for (const char* m : {".self_attn.q_proj", ".self_attn.k_proj", ".self_attn.v_proj"})
    if (testing::ends_with(module, m)) return module.substr(0, module.size() - 7) + "qkv";
  for (const char* m : {".mlp.gate_proj", ".mlp.up_proj"})
    if (testing::ends_with(module, m)) return module.substr(0, module.rfind('.')) + ".gate_up";
  return module;
}

const ir::Node* node(const ir::Graph& g, const std::string& name) {
  for (const ir::Node& n : g.nodes)
    if (!n.removed && n.name == name) return &n;
  return nullptr;
}

// `one_scale`: StepGraphOptions::fp8_per_tensor_weights (build-llm's default): per-tensor q/k/v and
// gate/up weights requantized to their group's largest scale; otherwise kept as stored.
void expect_checkpoint_fp8(const std::string& tag, const std::string& config, uint32_t seed, const Fp8Export& x,
                           Fp8CheckpointFormat format, bool one_scale) {
  const Fp8Model m = make_fp8(tag, config, seed, x);
  ASSERT_TRUE(m.ck.fp8_quantization().has_value());
  EXPECT_EQ(m.ck.fp8_quantization()->format, format);
  EXPECT_EQ(m.ck.fp8_quantization()->per_channel_weights, x.per_channel);
  const ModelConfig& c = m.ck.config();
  StepGraphOptions o;
  o.fp8_per_tensor_weights = one_scale;
  SeqEngine f32(m.f.ck, {}), f8(m.ck, o);
  ASSERT_TRUE(f32.ready() && f8.ready());
  const ir::Graph& g = f8.graph();

  // Per group: the largest input scale, and (per tensor) the largest weight scale.
  std::map<std::string, float> x_max, w_max;
  for (const auto& [module, q] : m.written) {
    x_max[group_of(module)] = std::max(x_max[group_of(module)], q.x_scale);
    w_max[group_of(module)] = std::max(w_max[group_of(module)], q.w_scale[0]);
  }
  int quant = 0, requantized = 0;
  for (const Projection& p : decoder_projections(c)) {
    const ir::Node* n = node(g, p.name);
    ASSERT_NE(n, nullptr) << p.name;
    if (x.float_modules.count(p.module)) {
      EXPECT_EQ(n->op, ir::OpKind::kMatMul) << p.name << " is ignored: float";
      continue;
    }
    ASSERT_EQ(n->op, ir::OpKind::kQuantLinear) << p.name;
    ++quant;
    const Fp8Written& q = m.written.at(p.module);
    const std::string grp = group_of(p.module);
    EXPECT_FLOAT_EQ(n->attr_float("x_scale", 0), x_max.at(grp)) << p.name;
    const auto& w = g.value(n->inputs[1]).constant;
    const auto& s = g.value(n->inputs[2]).constant;
    ASSERT_TRUE(w && s) << p.name;
    ASSERT_EQ(w->dtype(), DataType::kFloat8E4M3FN) << p.name;
    ASSERT_EQ(w->shape(), (Shape{p.n, p.k})) << p.name;
    ASSERT_EQ(s->shape(), (Shape{p.n})) << p.name;
    const std::string bytes(reinterpret_cast<const char*>(w->raw()), static_cast<size_t>(w->numel()));
    if (x.per_channel || !one_scale) {  // as stored, with the stored scale(s)
      EXPECT_EQ(bytes, q.codes) << p.name;
      for (int64_t i = 0; i < p.n; ++i) EXPECT_EQ(s->data<float>()[i], q.w_scale[x.per_channel ? i : 0]) << p.name << " " << i;
      continue;
    }
    const float to = w_max.at(grp), from = q.w_scale[0];
    for (int64_t i = 0; i < p.n; ++i) EXPECT_EQ(s->data<float>()[i], to) << p.name;
    if (from == to) {
      EXPECT_EQ(bytes, q.codes) << p.name << ": the group's largest scale keeps the checkpoint's bytes";
      continue;
    }
    ++requantized;
    std::string want = q.codes;
    for (char& b : want)
      b = static_cast<char>(double_to_fp8e4m3fn(double(fp8e4m3fn_to_float(static_cast<uint8_t>(b))) * from / to));
    EXPECT_EQ(bytes, want) << p.name << ": requantized from " << from << " to " << to;
  }
  EXPECT_EQ(quant, static_cast<int>(m.written.size()));
  if (!x.per_channel && one_scale) EXPECT_GE(requantized, 3 * c.num_layers) << "q/k/v and gate/up scales differ in the test data";
  EXPECT_EQ(node(g, "lm_head")->op, ir::OpKind::kMatMul);
  EXPECT_EQ(node(g, "embed.tokens")->op, ir::OpKind::kGather);
  // The plan keeps them in QuantLinear layers (q/k/v and gate/up fused: one x_scale each).
  std::set<std::string> covered;
  for (const LayerInfo& l : f8.engine().layers())
    if (l.op == "QuantLinear") {
      covered.insert(l.name);
      covered.insert(l.origin.begin(), l.origin.end());
    }
  for (const Projection& p : decoder_projections(c))
    if (!x.float_modules.count(p.module)) EXPECT_TRUE(covered.count(p.name)) << p.name;

  // Prefill of 8 tokens: every row's logits within cosine 0.99 of the float checkpoint's; so are
  // the dequantized float graph's (checkpoint_fp8 = false: no QuantLinear).
  StepGraphOptions dq;
  dq.checkpoint_fp8 = false;
  SeqEngine deq(m.ck, dq);
  ASSERT_TRUE(deq.ready());
  for (const ir::Node& n : deq.graph().nodes) EXPECT_NE(n.op, ir::OpKind::kQuantLinear) << n.name;
  const std::vector<int32_t> prompt = {3, 14, 15, 9, 26, 5, 35, 8};
  auto a = f32.step(prompt, 0), b = f8.step(prompt, 0), d = deq.step(prompt, 0);
  ASSERT_TRUE(a.ok() && b.ok() && d.ok());
  const int64_t V = c.vocab_size;
  double worst = 1, worst_dq = 1;
  for (int64_t r = 0; r < 8; ++r) {
    worst = std::min(worst, testing::cosine(a->data<float>() + r * V, b->data<float>() + r * V, V));
    worst_dq = std::min(worst_dq, testing::cosine(a->data<float>() + r * V, d->data<float>() + r * V, V));
  }
  EXPECT_GE(worst, 0.99) << tag;
  EXPECT_GE(worst_dq, 0.99) << tag;

  // Greedy: 12 tokens after a 5-token prompt from fresh engines. A tiny random model's logits
  // have near ties, so a free-running comparison diverges at the first flip; the FP8 engine is
  // also fed the float engine's tokens (teacher forcing) and its argmax compared at each of them.
  SeqEngine g32(m.f.ck, {}), g8(m.ck, o), forced(m.ck, o);
  ASSERT_TRUE(g32.ready() && g8.ready() && forced.ready());
  const std::vector<int32_t> p5 = {7, 1, 30, 12, 4};
  const std::vector<int32_t> t32 = g32.greedy(p5, 12), t8 = g8.greedy(p5, 12);
  ASSERT_EQ(t32.size(), 12u);
  ASSERT_EQ(t8.size(), 12u);
  size_t leading = 0, same = 0;
  while (leading < t32.size() && t32[leading] == t8[leading]) ++leading;
  auto l = forced.step(p5, 0);
  for (size_t i = 0; l.ok() && i < t32.size(); ++i) {
    const float* row = l->data<float>() + (i == 0 ? static_cast<int64_t>(p5.size()) - 1 : 0) * V;
    same += std::max_element(row, row + V) - row == t32[i];
    l = forced.step({t32[i]}, static_cast<int64_t>(p5.size() + i));
  }
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  std::printf("[%s%s] fp8 checkpoint vs float: min prefill cosine %.5f (dequantized %.5f); greedy: %zu of 12 leading "
              "tokens agree, %zu of 12 teacher-forced; %d weights requantized\n",
              tag.c_str(), one_scale ? " one scale" : "", worst, worst_dq, leading, same, requantized);
  EXPECT_GE(same, 9u) << tag;
}

// The KV-cache scales a checkpoint carries (read_kv_cache_scales): every layer's K and V scale, under
// ModelOpt's names or vLLM's; none is an empty list; a layer without them, or a bad value, is an
// error naming it.
TEST(LlmFp8Checkpoint, KvCacheScales) {
  Fp8Export x;
  x.kv_scales = true;
  const Fp8Model m = make_fp8("ckfp8_kv", testing::tiny_llama16_config(), 6, x);
  const int64_t L = m.ck.config().num_layers;
  auto s = read_kv_cache_scales(m.ck.tensors(), L);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_EQ(static_cast<int64_t>(s->size()), L);
  for (const auto& [k, v] : *s) {
    EXPECT_EQ(k, 0.5f);
    EXPECT_EQ(v, 0.25f);
  }
  // vLLM's names (self_attn.k_scale / v_scale) for layer 0 win over ModelOpt's.
  std::map<std::string, SafetensorsTensor> t = m.ck.tensors();
  const SafetensorsTensor k0 = t.at("model.layers.0.self_attn.k_proj.k_scale");
  t["model.layers.0.self_attn.k_scale"] = t.at("model.layers.0.self_attn.v_proj.v_scale");
  t["model.layers.0.self_attn.v_scale"] = k0;
  s = read_kv_cache_scales(t, L);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ((*s)[0], (std::pair<float, float>{0.25f, 0.5f}));
  // A layer without its V scale; a checkpoint where one layer has none.
  t = m.ck.tensors();
  t.erase("model.layers.1.self_attn.v_proj.v_scale");
  s = read_kv_cache_scales(t, L);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("layer 1 carries an FP8 KV-cache scale for K but not V"), std::string::npos)
      << s.status().message();
  t.erase("model.layers.1.self_attn.k_proj.k_scale");
  s = read_kv_cache_scales(t, L);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("model.layers.1.self_attn.k_scale"), std::string::npos) << s.status().message();
  // No KV scales at all: an empty list (the float checkpoint's tensors).
  s = read_kv_cache_scales(m.f.ck.tensors(), L);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->empty());
}

TEST(LlmFp8Checkpoint, ModelOptLlama) {
  Fp8Export x;
  x.kv_scales = true;  // read only for an FP8 KV cache (KvCacheScales)
  expect_checkpoint_fp8("ckfp8_mo", testing::tiny_llama16_config(), 5, x, Fp8CheckpointFormat::kModelOpt, true);
  expect_checkpoint_fp8("ckfp8_mo", testing::tiny_llama16_config(), 5, x, Fp8CheckpointFormat::kModelOpt, false);
}
TEST(LlmFp8Checkpoint, ModelOptHfQuantConfigQwen2WithBiases) {
  Fp8Export x;
  x.format = "modelopt-hf";
  x.dtype = "BF16";
  expect_checkpoint_fp8("ckfp8_mohf", testing::tiny_qwen2_16_config(), 7, x, Fp8CheckpointFormat::kModelOpt, true);
  expect_checkpoint_fp8("ckfp8_mohf", testing::tiny_qwen2_16_config(), 7, x, Fp8CheckpointFormat::kModelOpt, false);
}
TEST(LlmFp8Checkpoint, CompressedTensorsPerChannelWithIgnoredModule) {
  Fp8Export x;
  x.format = "compressed-tensors";
  x.per_channel = true;
  x.float_modules = {"model.layers.1.mlp.down_proj"};
  expect_checkpoint_fp8("ckfp8_ctc", testing::tiny_llama16_config(), 8, x, Fp8CheckpointFormat::kCompressedTensors, true);
  expect_checkpoint_fp8("ckfp8_ctc", testing::tiny_llama16_config(), 8, x, Fp8CheckpointFormat::kCompressedTensors, false);
}
TEST(LlmFp8Checkpoint, CompressedTensorsPerTensor) {
  Fp8Export x;
  x.format = "compressed-tensors";
  x.dtype = "F16";
  expect_checkpoint_fp8("ckfp8_ctt", testing::tiny_llama16_config(), 12, x, Fp8CheckpointFormat::kCompressedTensors, true);
  expect_checkpoint_fp8("ckfp8_ctt", testing::tiny_llama16_config(), 12, x, Fp8CheckpointFormat::kCompressedTensors, false);
}
TEST(LlmFp8Checkpoint, AutoFp8Static) {
  Fp8Export x;
  x.format = "autofp8";
  expect_checkpoint_fp8("ckfp8_afp8", testing::tiny_llama16_config(), 11, x, Fp8CheckpointFormat::kAutoFp8, true);
  expect_checkpoint_fp8("ckfp8_afp8", testing::tiny_llama16_config(), 11, x, Fp8CheckpointFormat::kAutoFp8, false);
}

// E4M3FN(value · from / to), round to nearest even: 448 · 2/3 = 298.7 -> 288; 2 · 17/32 = 1.0625,
// halfway between 1 and 1.125 -> 1 (even); 2.25 · 17/32 = 1.195 -> 1.25; signs and zero kept.
TEST(LlmFp8Checkpoint, RequantizeToALargerScale) {
  auto codes = [](std::vector<float> v) {
    Tensor t(DataType::kFloat8E4M3FN, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data<uint8_t>()[i] = double_to_fp8e4m3fn(v[i]);
    return t;
  };
  auto values = [](const Tensor& t) {
    std::vector<float> v;
    for (int64_t i = 0; i < t.numel(); ++i) v.push_back(fp8e4m3fn_to_float(t.data<uint8_t>()[i]));
    return v;
  };
  EXPECT_EQ(values(requantize_fp8_e4m3(codes({448, -448, 1.125f, 0}), 1.f, 1.5f)), (std::vector<float>{288, -288, 0.75f, 0}));
  EXPECT_EQ(values(requantize_fp8_e4m3(codes({2, 2.25f, -2}), 17.f, 32.f)), (std::vector<float>{1, 1.25f, -1}));
  const Tensor same = codes({1, 2, 3});
  EXPECT_EQ(requantize_fp8_e4m3(same, 0.5f, 0.5f).raw(), same.raw());  // unchanged, not copied

  // A q/k/v group of per-tensor scales 1, 2, 1.5: one x_scale (the largest) and one weight scale
  // (2): k keeps its codes, q and v are requantized. A per-channel group keeps its weights.
  auto layer = [&](float w_scale, float x_scale, int64_t n) {
    Fp8Linear l;
    l.w = codes({448, 1.125f, -2});
    l.w = l.w.reshaped({1, 3});
    l.w_scale = Tensor(DataType::kFloat32, {n});
    for (int64_t i = 0; i < n; ++i) l.w_scale.data<float>()[i] = w_scale;
    l.x_scale = x_scale;
    l.per_tensor = true;
    return l;
  };
  Fp8Linear q = layer(1, 0.1f, 1), k = layer(2, 0.3f, 1), v = layer(1.5f, 0.2f, 1);
  const void* k_bytes = k.w.raw();
  Fp8Linear q0 = layer(1, 0.1f, 1), k0 = layer(2, 0.3f, 1);
  EXPECT_EQ(share_fp8_input({&q0, &k0}, /*one_weight_scale=*/false), 0);  // one x_scale only
  EXPECT_FLOAT_EQ(q0.x_scale, 0.3f);
  EXPECT_FLOAT_EQ(q0.w_scale.data<float>()[0], 1.f);
  EXPECT_EQ(share_fp8_input({&q, &k, &v}, true), 2);
  for (const Fp8Linear* l : {&q, &k, &v}) {
    EXPECT_FLOAT_EQ(l->x_scale, 0.3f);
    EXPECT_FLOAT_EQ(l->w_scale.data<float>()[0], 2.f);
  }
  EXPECT_EQ(k.w.raw(), k_bytes);
  EXPECT_EQ(values(q.w), (std::vector<float>{224, 0.5625f, -1}));
  EXPECT_EQ(values(v.w), (std::vector<float>{320, 0.875f, -1.5f}));  // ties 336 -> 320, 0.84375 -> 0.875 (even)
  Fp8Linear g = layer(1, 0.1f, 1), u = layer(2, 0.3f, 1);
  g.per_tensor = false;
  EXPECT_EQ(share_fp8_input({&g, &u}, true), 0);
  EXPECT_FLOAT_EQ(g.x_scale, 0.3f);
  EXPECT_FLOAT_EQ(g.w_scale.data<float>()[0], 1.f);
}

// The declarations read, from config.json text and hf_quant_config.json text.
TEST(LlmFp8Checkpoint, DeclarationsParsed) {
  const json base = json::parse(testing::tiny_llama16_config());
  auto parse = [&](const json& qc, const std::string& hf = "") {
    json c = base;
    if (!qc.is_null()) c["quantization_config"] = qc;
    return parse_fp8_quantization(c.dump(), "'d/config.json'", hf, "'d/hf_quant_config.json'");
  };
  auto none = parse(nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto mo = parse({{"quant_method", "modelopt"}, {"quant_algo", "fp8"}, {"kv_cache_quant_algo", "FP8"}, {"ignore", {"lm_head"}}});
  ASSERT_TRUE(mo.ok()) << mo.status().to_string();
  ASSERT_TRUE(mo->has_value());
  EXPECT_EQ((*mo)->format, Fp8CheckpointFormat::kModelOpt);
  EXPECT_FALSE((*mo)->per_channel_weights);
  EXPECT_EQ((*mo)->kv_cache, "FP8");
  EXPECT_EQ((*mo)->ignore, (std::vector<std::string>{"lm_head"}));
  EXPECT_EQ((*mo)->describe(), "modelopt, per-tensor weight scales, static per-tensor input scales ('d/config.json')");
  auto nested = parse({{"quant_method", "modelopt"}, {"quantization", {{"quant_algo", "FP8"}, {"exclude_modules", {"lm_head"}}}}});
  ASSERT_TRUE(nested.ok() && nested->has_value()) << nested.status().to_string();
  const std::string hf = json{{"quantization", {{"quant_algo", "FP8"}, {"kv_cache_quant_algo", nullptr}}}}.dump();
  auto only_hf = parse(nullptr, hf);
  ASSERT_TRUE(only_hf.ok() && only_hf->has_value()) << only_hf.status().to_string();
  EXPECT_EQ((*only_hf)->source, "'d/hf_quant_config.json'");
  auto both = parse({{"quant_method", "modelopt"}, {"quant_algo", "FP8"}}, hf);
  ASSERT_TRUE(both.ok() && both->has_value());
  EXPECT_EQ((*both)->source, "'d/config.json'");
  Fp8Export ct;
  ct.format = "compressed-tensors";
  ct.per_channel = true;
  auto ctc = parse(testing::fp8_quantization_config(ct));
  ASSERT_TRUE(ctc.ok() && ctc->has_value()) << ctc.status().to_string();
  EXPECT_EQ((*ctc)->format, Fp8CheckpointFormat::kCompressedTensors);
  EXPECT_TRUE((*ctc)->per_channel_weights);
  auto afp8 = parse({{"quant_method", "fp8"}, {"activation_scheme", "static"}});
  ASSERT_TRUE(afp8.ok() && afp8->has_value());
  EXPECT_EQ((*afp8)->format, Fp8CheckpointFormat::kAutoFp8);
}

// Every other quantization is Unsupported naming the file and what it found; malformed fields
// InvalidModel.
TEST(LlmFp8Checkpoint, OtherDeclarationsAreRefusedByName) {
  const json base = json::parse(testing::tiny_llama16_config());
  auto expect = [&](const json& qc, StatusCode code, std::vector<std::string> needles, const std::string& hf = "") {
    json c = base;
    if (!qc.is_null()) c["quantization_config"] = qc;
    auto r = parse_fp8_quantization(c.dump(), "'d/config.json'", hf, "'d/hf_quant_config.json'");
    ASSERT_FALSE(r.ok()) << qc.dump();
    EXPECT_EQ(r.status().code(), code) << r.status().to_string();
    needles.push_back(hf.empty() ? "'d/config.json'" : "'d/hf_quant_config.json'");
    for (const std::string& n : needles) EXPECT_NE(r.status().message().find(n), std::string::npos) << n << " in " << r.status().message();
  };
  const StatusCode U = StatusCode::kUnsupported, M = StatusCode::kInvalidModel;
  expect({{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}}, U, {"quant_algo 'NVFP4'"});
  expect({{"quant_method", "modelopt"}, {"quant_algo", "FP8_PER_CHANNEL_PER_TOKEN"}}, U, {"'FP8_PER_CHANNEL_PER_TOKEN'"});
  expect({{"quant_method", "modelopt"}}, M, {"without 'quant_algo'"});
  expect(nullptr, U, {"quant_algo 'W4A8_AWQ'"}, json{{"quantization", {{"quant_algo", "W4A8_AWQ"}}}}.dump());
  expect({{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}}, U,
         {"weight_block_size [128,128]", "block-wise"});
  expect({{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}}, U, {"activation_scheme 'dynamic'"});
  expect({{"quant_method", "awq"}, {"bits", 4}}, U, {"quant_method 'awq'"});
  expect({{"quant_method", "gptq"}}, U, {"quant_method 'gptq'"});
  expect("fp8", M, {"expected an object"});
  Fp8Export x;
  x.format = "compressed-tensors";
  const json ct = testing::fp8_quantization_config(x);
  auto with = [&](const std::string& path, const json& v) {
    json q = ct;
    q[json::json_pointer(path)] = v;
    return q;
  };
  expect(with("/config_groups/group_0/input_activations/dynamic", true), U, {"input_activations", "dynamic true"});
  expect(with("/config_groups/group_0/input_activations", nullptr), U, {"weight-only"});
  expect(with("/config_groups/group_0/input_activations/strategy", "token"), U, {"strategy 'token'"});
  expect(with("/config_groups/group_0/weights/strategy", "block"), U, {"weights: strategy 'block'"});
  expect(with("/config_groups/group_0/weights/group_size", 128), U, {"'group_size' 128"});
  expect(with("/config_groups/group_0/weights/type", "int"), U, {"type 'int'"});
  expect(with("/config_groups/group_0/weights/num_bits", 4), U, {"num_bits 4"});
  expect(with("/config_groups/group_0/weights/symmetric", false), U, {"asymmetric"});
  expect(with("/format", "pack-quantized"), U, {"format 'pack-quantized'"});
  expect(with("/config_groups", json::object()), M, {"config_groups"});
  expect(with("/ignore", "lm_head"), M, {"'ignore'"});
  expect(ct, M, {"one declaration"}, json{{"quantization", {{"quant_algo", "FP8"}}}}.dump());
}

// Scale tensors: each problem an error naming the tensor and the file, at Checkpoint::open.
TEST(LlmFp8Checkpoint, BadScaleTensorsAreErrorsNamingThem) {
  const Fp8Model m = make_fp8("ckfp8_bad", testing::tiny_llama16_config(), 12, Fp8Export{});
  const std::string dir = m.f.dir + "/bad", file = dir + "/model.safetensors";
  const std::string config = testing::slurp(m.dir + "/config.json");
  auto expect = [&](std::vector<StTensor> ts, StatusCode code, std::vector<std::string> needles, const std::string& cfg = "") {
    std::filesystem::create_directories(dir);
    testing::write_file(dir + "/config.json", cfg.empty() ? config : cfg);
    testing::write_file(file, testing::st_file(ts));
    auto ck = Checkpoint::open(dir);
    ASSERT_FALSE(ck.ok()) << needles[0];
    EXPECT_EQ(ck.status().code(), code) << ck.status().to_string();
    for (const std::string& n : needles) EXPECT_NE(ck.status().message().find(n), std::string::npos) << n << " in " << ck.status().message();
  };
  auto edit = [&](const std::string& name, std::function<void(StTensor&)> f) {
    std::vector<StTensor> ts = m.tensors;
    for (StTensor& t : ts)
      if (t.name == name) f(t);
    return ts;
  };
  auto without = [&](const std::string& name) {
    std::vector<StTensor> ts;
    for (const StTensor& t : m.tensors)
      if (t.name != name) ts.push_back(t);
    return ts;
  };
  auto value = [](float v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  const std::string ws = "model.layers.0.self_attn.k_proj.weight_scale", xs = "model.layers.1.mlp.up_proj.input_scale";
  const StatusCode M = StatusCode::kInvalidModel, U = StatusCode::kUnsupported;
  expect(without(ws), M, {"'" + ws + "' is missing", "tensor 'model.layers.0.self_attn.k_proj.weight' in '" + file + "'"});
  expect(without(xs), M, {"'" + xs + "' is missing"});
  expect(edit(ws, [&](StTensor& t) { t.shape = {2}; t.bytes = value(1) + value(1); }), M,
         {"tensor '" + ws + "' in '" + file + "'", "shape [2]", "per tensor"});
  expect(edit(ws, [&](StTensor& t) { t.bytes = value(NAN); }), M, {"tensor '" + ws + "'", "finite and > 0"});
  expect(edit(ws, [&](StTensor& t) { t.bytes = value(0); }), M, {"tensor '" + ws + "'", "finite and > 0"});
  expect(edit(xs, [&](StTensor& t) { t.bytes = value(-0.5f); }), M, {"tensor '" + xs + "'", "finite and > 0"});
  expect(edit(xs, [&](StTensor& t) { t.bytes = value(INFINITY); }), M, {"tensor '" + xs + "'", "finite and > 0"});
  expect(edit(ws, [&](StTensor& t) { t.dtype = "I32"; }), M, {"tensor '" + ws + "'", "dtype I32"});
  expect(edit("model.layers.0.self_attn.q_proj.weight", [&](StTensor& t) { t.dtype = "F8_E5M2"; }), U,
         {"model.layers.0.self_attn.q_proj.weight", "F8_E5M2"});
  // A scale beside a float weight, an F8 embedding, a declaration without FP8 weights.
  std::vector<StTensor> extra = m.tensors;
  extra.push_back({"model.embed_tokens.input_scale", "F32", {}, value(1)});
  expect(extra, M, {"unexpected tensor 'model.embed_tokens.input_scale'"});
  expect(edit("model.embed_tokens.weight", [&](StTensor& t) {
           t.dtype = "F8_E4M3";
           t.bytes.resize(t.bytes.size() / 4);
         }),
         U, {"model.embed_tokens.weight", "F8_E4M3 weights of linear layers only"});
  expect(testing::fp8_tensors(m.f.weights, {}, Fp8Export{}), M, {"no linear layer's weight is F8_E4M3"});
  // Per-channel declared, per-tensor scales written; FP8 weights without any declaration.
  Fp8Export ch;
  ch.format = "compressed-tensors";
  ch.per_channel = true;
  json cc = json::parse(testing::tiny_llama16_config());
  cc["quantization_config"] = testing::fp8_quantization_config(ch);
  expect(m.tensors, M, {"weight_scale' in '" + file + "'", "[64,1] (per channel)"}, cc.dump());
  expect(m.tensors, U, {"F8_E4M3", "FP8 checkpoints", "declares none"}, testing::tiny_llama16_config());
  // GPT-2: refused by architecture.
  json g = json::parse(testing::tiny_gpt2_16_config());
  g["quantization_config"] = testing::fp8_quantization_config(Fp8Export{});
  expect(testing::spec_tensors(*parse_model_config(g.dump(), "c"), "", "F32"), U, {"Llama family"}, g.dump());
}

// The step graph: 8-bit alignment for the checkpoint's FP8 projections (checkpoint_fp8 = false
// reads them as float instead), no calibrated scales beside the checkpoint's; the decoder graph
// (LlmCpuRunner's) and calibration read an FP8 checkpoint dequantized.
TEST(LlmFp8Checkpoint, StepGraphRulesAndFloatReaders) {
  const Fp8Model odd = make_fp8("ckfp8_odd", testing::tiny_llama_config(1), 13, Fp8Export{});  // k/v 8 wide
  StepGraphOptions o;
  auto g = build_step_graph(odd.ck.config(), odd.ck, o);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("'layers.0.k_proj' (FP8 in checkpoint"), std::string::npos) << g.status().message();
  o.checkpoint_fp8 = false;
  EXPECT_TRUE(build_step_graph(odd.ck.config(), odd.ck, o).ok());

  const Fp8Model m = make_fp8("ckfp8_rules", testing::tiny_llama16_config(), 14, Fp8Export{});
  StepGraphOptions with_scales;
  for (const Projection& p : decoder_projections(m.ck.config())) with_scales.fp8_x_scales[p.name] = 0.01f;
  auto both = build_step_graph(m.ck.config(), m.ck, with_scales);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("carries its own FP8 scales"), std::string::npos) << both.status().message();
  with_scales.checkpoint_fp8 = false;  // calibrated scales over the dequantized weights
  EXPECT_TRUE(build_step_graph(m.ck.config(), m.ck, with_scales).ok());
  auto cal = calibrate_fp8(m.ck, {1, 2, 3, 4});
  EXPECT_TRUE(cal.ok()) << cal.status().to_string();
  auto dg = build_decoder_graph(m.ck.config(), m.ck, {});
  ASSERT_TRUE(dg.ok()) << dg.status().to_string();
  for (const ir::Node& n : dg->nodes) EXPECT_NE(n.op, ir::OpKind::kQuantLinear) << n.name;
}

}  // namespace
}  // namespace kiln::llm
