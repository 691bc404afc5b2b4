// config.json / generation_config.json parsing per architecture, and whole checkpoint
// directories (single file and sharded) checked against the weight spec.
#include "llm/checkpoint.h"

#include <gtest/gtest.h>

#include "llm/llm_test_util.h"

namespace kiln::llm {
namespace {

using nlohmann::json;
using testing::spec_tensors;
using testing::st_file;
using testing::st_tensor;
using testing::StTensor;

ModelConfig parse_ok(const std::string& text) {
  auto c = parse_model_config(text, "config.json");
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? *c : ModelConfig{};
}

void expect_config_error(const std::string& text, StatusCode code, const std::string& fragment) {
  auto c = parse_model_config(text, "config.json");
  ASSERT_FALSE(c.ok()) << text;
  EXPECT_EQ(c.status().code(), code) << c.status().to_string();
  EXPECT_NE(c.status().message().find(fragment), std::string::npos) << c.status().message();
}

TEST(LlmConfig, Gpt2WithDefaults) {
  const ModelConfig c = parse_ok(R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 768, "n_head": 12,
      "n_layer": 12, "n_inner": null, "n_positions": 1024, "vocab_size": 50257, "layer_norm_epsilon": 1e-05})");
  EXPECT_EQ(c.architecture, Architecture::kGpt2);
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.intermediate_size, 4 * 768);  // n_inner null
  EXPECT_EQ(c.num_kv_heads, 12);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.max_position_embeddings, 1024);
  EXPECT_TRUE(c.tie_word_embeddings);  // PretrainedConfig's default
  EXPECT_EQ(c.hidden_act, "gelu_new");
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
}

TEST(LlmConfig, Llama31WithLlama3RopeScaling) {
  // Llama-3.1-8B's config.json fields.
  const ModelConfig c = parse_ok(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
      "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
      "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
      "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192, "rope_type": "llama3"},
      "tie_word_embeddings": false, "torch_dtype": "bfloat16", "bos_token_id": 128000,
      "eos_token_id": [128001, 128008, 128009], "attention_bias": false, "mlp_bias": false})");
  EXPECT_EQ(c.architecture, Architecture::kLlama);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_DOUBLE_EQ(c.rope.theta, 500000.0);
  EXPECT_EQ(c.rope.scaling, RopeScaling::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.torch_dtype, DataType::kBFloat16);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
}

TEST(LlmConfig, Llama32TiedWithHeadDimAndLegacyRopeTypeKey) {
  const ModelConfig c = parse_ok(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 2048, "intermediate_size": 8192,
      "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256,
      "rope_scaling": {"type": "linear", "factor": 2.0}, "tie_word_embeddings": true})");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rope.scaling, RopeScaling::kLinear);
  EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0);  // LlamaConfig's default
}

TEST(LlmConfig, MistralAndQwen2) {
  const ModelConfig m = parse_ok(R"({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
      "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
      "vocab_size": 32000, "sliding_window": 4096, "rope_theta": 10000.0})");
  EXPECT_EQ(m.architecture, Architecture::kMistral);
  ASSERT_TRUE(m.sliding_window.has_value());
  EXPECT_EQ(*m.sliding_window, 4096);
  EXPECT_FALSE(m.attention_bias);
  const ModelConfig nosw = parse_ok(R"({"model_type": "mistral", "sliding_window": null})");
  EXPECT_FALSE(nosw.sliding_window.has_value());
  EXPECT_EQ(nosw.num_kv_heads, 8);  // MistralConfig's default

  const ModelConfig q = parse_ok(testing::tiny_qwen2_config());
  EXPECT_EQ(q.architecture, Architecture::kQwen2);
  EXPECT_TRUE(q.attention_bias);
  EXPECT_FALSE(q.attention_out_bias);
  EXPECT_TRUE(q.tie_word_embeddings);
  EXPECT_FALSE(q.sliding_window.has_value());  // use_sliding_window false
  EXPECT_EQ(q.torch_dtype, DataType::kBFloat16);
}

TEST(LlmConfig, Errors) {
  expect_config_error(R"({"architectures": ["BertForMaskedLM"], "model_type": "bert"})", StatusCode::kUnsupported,
                      "'BertForMaskedLM' is not supported; supported: GPT2LMHeadModel (gpt2), LlamaForCausalLM (llama)");
  expect_config_error(R"({"model_type": "falcon"})", StatusCode::kUnsupported, "model_type 'falcon'");
  expect_config_error(R"({"architectures": ["LlamaModel"], "model_type": "llama"})", StatusCode::kUnsupported, "LlamaModel");
  expect_config_error(R"({})", StatusCode::kUnsupported, "without 'architectures' or 'model_type'");
  expect_config_error(R"({"architectures": ["LlamaForCausalLM"], "model_type": "qwen2"})", StatusCode::kInvalidModel, "model_type 'qwen2'");
  expect_config_error(R"({"model_type": "llama", "num_attention_heads": 12, "num_key_value_heads": 5, "hidden_size": 768})",
                      StatusCode::kInvalidModel, "not a multiple of the 5 key/value heads");
  expect_config_error(R"({"model_type": "llama", "num_attention_heads": 5, "hidden_size": 768})", StatusCode::kInvalidModel,
                      "not a multiple of the 5 attention heads");
  expect_config_error(R"({"model_type": "llama", "hidden_size": -4})", StatusCode::kInvalidModel, "'hidden_size' is -4");
  expect_config_error(R"({"model_type": "llama", "hidden_size": "big"})", StatusCode::kInvalidModel, "'hidden_size'");
  expect_config_error(R"({"model_type": "llama", "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})", StatusCode::kUnsupported,
                      "type 'yarn' is not supported");
  expect_config_error(R"({"model_type": "llama", "rope_scaling": {"rope_type": "llama3", "factor": 8.0}})", StatusCode::kInvalidModel,
                      "needs 'low_freq_factor'");
  expect_config_error(R"({"model_type": "llama", "torch_dtype": "float64"})", StatusCode::kUnsupported, "float64");
  expect_config_error("not json", StatusCode::kInvalidModel, "not valid JSON");
  expect_config_error(R"({"model_type": "llama", "num_hidden_layers": 1000000})", StatusCode::kInvalidModel, "limit of 4096");
  expect_config_error(R"({"model_type": "llama", "vocab_size": 9000000000000})", StatusCode::kInvalidModel, "limit of 2^31");
}

TEST(LlmConfig, GenerationConfig) {
  auto g = parse_generation_config(R"({"bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "pad_token_id": null,
      "do_sample": true, "temperature": 0.6, "top_p": 0.9, "top_k": 50, "max_new_tokens": 64})", "generation_config.json");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->bos_token_ids, std::vector<int64_t>{128000});
  EXPECT_EQ(g->eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_TRUE(g->pad_token_ids.empty());
  EXPECT_EQ(g->do_sample, true);
  EXPECT_DOUBLE_EQ(*g->temperature, 0.6);
  EXPECT_EQ(*g->top_k, 50);
  EXPECT_EQ(*g->max_new_tokens, 64);
  EXPECT_FALSE(g->repetition_penalty.has_value());
  auto bad = parse_generation_config(R"({"eos_token_id": ["x"]})", "generation_config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("eos_token_id"), std::string::npos);
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_temp_dir("ckpt"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& bytes) { testing::write_file(dir_ + "/" + name, bytes); }
  Status open_status() {
    auto c = Checkpoint::open(dir_);
    return c.ok() ? Status::Ok() : c.status();
  }
  void expect_error(StatusCode code, std::vector<std::string> fragments) {
    const Status s = open_status();
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), code) << s.to_string();
    for (const auto& f : fragments) EXPECT_NE(s.message().find(f), std::string::npos) << s.message();
  }
  std::string dir_;
};

TEST_F(CheckpointTest, LlamaSingleFileWithGenerationConfig) {
  write("config.json", testing::tiny_llama_config());
  write("generation_config.json", R"({"bos_token_id": 1, "eos_token_id": [2, 3]})");
  const ModelConfig cfg = parse_ok(testing::tiny_llama_config());
  auto ts = spec_tensors(cfg, "");
  ts.push_back(st_tensor("model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {2}));  // tolerated buffer
  write("model.safetensors", st_file(ts));
  auto c = Checkpoint::open(dir_ + "/");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->config().num_layers, 2);
  EXPECT_EQ(c->eos_token_ids(), (std::vector<int64_t>{2, 3}));  // generation config wins
  EXPECT_EQ(c->bos_token_ids(), std::vector<int64_t>{1});
  const SafetensorsTensor* q = c->find("model.layers.1.self_attn.q_proj.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->shape, (Shape{16, 16}));
  EXPECT_EQ(c->find("model.layers.1.self_attn.k_proj.weight")->shape, (Shape{8, 16}));  // 2 kv heads x 4
  EXPECT_EQ(c->find("lm_head.weight")->shape, (Shape{64, 16}));
  EXPECT_EQ(c->files().size(), 1u);
}

TEST_F(CheckpointTest, LlamaSpecErrorsNameFileAndTensor) {
  write("config.json", testing::tiny_llama_config());
  const ModelConfig cfg = parse_ok(testing::tiny_llama_config());
  auto ts = spec_tensors(cfg, "");
  auto without = [&](const std::string& name) {
    std::vector<StTensor> out;
    for (const auto& t : ts)
      if (t.name != name) out.push_back(t);
    return out;
  };
  write("model.safetensors", st_file(without("model.layers.1.mlp.down_proj.weight")));
  expect_error(StatusCode::kInvalidModel, {"weight 'model.layers.1.mlp.down_proj.weight' [16,40] is missing", dir_});

  write("model.safetensors", st_file(without("lm_head.weight")));  // untied: required
  expect_error(StatusCode::kInvalidModel, {"'lm_head.weight'", "missing"});

  auto wrong = ts;
  for (auto& t : wrong)
    if (t.name == "model.layers.0.self_attn.v_proj.weight") t = st_tensor(t.name, "F16", {16, 16});
  write("model.safetensors", st_file(wrong));
  expect_error(StatusCode::kInvalidModel, {"tensor 'model.layers.0.self_attn.v_proj.weight' in '" + dir_ + "/model.safetensors'",
                                           "shape [16,16]", "implies [8,16]"});

  auto extra = ts;
  extra.push_back(st_tensor("model.layers.2.input_layernorm.weight", "F16", {16}));
  write("model.safetensors", st_file(extra));
  expect_error(StatusCode::kInvalidModel, {"unexpected tensor 'model.layers.2.input_layernorm.weight'", "2 layers"});

  auto ints = ts;
  ints[0] = st_tensor(ints[0].name, "I32", {64, 16});
  write("model.safetensors", st_file(ints));
  expect_error(StatusCode::kUnsupported, {"'model.embed_tokens.weight'", "I32"});

  auto fp8 = ts;
  fp8[0] = st_tensor(fp8[0].name, "F8_E4M3", {64, 16});
  write("model.safetensors", st_file(fp8));
  expect_error(StatusCode::kUnsupported, {"F8_E4M3", "FP8 checkpoints"});
}

TEST_F(CheckpointTest, Gpt2PrefixedTiedWithBuffers) {
  write("config.json", testing::tiny_gpt2_config());
  const ModelConfig cfg = parse_ok(testing::tiny_gpt2_config());
  auto ts = spec_tensors(cfg, "transformer.", "F32");
  ts.push_back(st_tensor("transformer.h.0.attn.bias", "F32", {1, 1, 32, 32}));  // causal-mask buffer
  write("model.safetensors", st_file(ts));
  auto c = Checkpoint::open(dir_);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->weight_prefix(), "transformer.");
  EXPECT_EQ(c->find("transformer.h.1.attn.c_attn.weight")->shape, (Shape{16, 48}));  // Conv1D [in, out]
  EXPECT_EQ(c->find("transformer.h.1.mlp.c_fc.weight")->shape, (Shape{16, 64}));
  EXPECT_EQ(c->find("lm_head.weight"), nullptr);  // tied, not stored

  // Unprefixed names (GPT2Model's state dict) work too; a half-prefixed set does not.
  auto plain = spec_tensors(cfg, "", "F32");
  write("model.safetensors", st_file(plain));
  EXPECT_TRUE(open_status().ok()) << open_status().to_string();
  plain[3].name = "transformer." + plain[3].name;
  write("model.safetensors", st_file(plain));
  expect_error(StatusCode::kInvalidModel, {"missing"});
}

TEST_F(CheckpointTest, Qwen2NeedsQkvBiases) {
  write("config.json", testing::tiny_qwen2_config());
  const ModelConfig cfg = parse_ok(testing::tiny_qwen2_config());
  auto ts = spec_tensors(cfg, "", "BF16");
  bool has_bias = false;
  for (const auto& t : ts) has_bias |= t.name == "model.layers.0.self_attn.k_proj.bias";
  EXPECT_TRUE(has_bias);
  write("model.safetensors", st_file(ts));
  EXPECT_TRUE(open_status().ok()) << open_status().to_string();
  std::vector<StTensor> missing;
  for (const auto& t : ts)
    if (t.name != "model.layers.0.self_attn.q_proj.bias") missing.push_back(t);
  write("model.safetensors", st_file(missing));
  expect_error(StatusCode::kInvalidModel, {"'model.layers.0.self_attn.q_proj.bias' [16] is missing"});
  // Tied: an lm_head that is present anyway must have the right shape.
  auto with_head = ts;
  with_head.push_back(st_tensor("lm_head.weight", "BF16", {40, 8}));
  write("model.safetensors", st_file(with_head));
  expect_error(StatusCode::kInvalidModel, {"'lm_head.weight'", "implies [40,16]"});
}

class ShardedTest : public CheckpointTest {
 protected:
  // The tiny Llama's weights over two shards and an index listing them.
  void SetUp() override {
    CheckpointTest::SetUp();
    write("config.json", testing::tiny_llama_config());
    const auto ts = spec_tensors(parse_ok(testing::tiny_llama_config()), "");
    for (size_t i = 0; i < ts.size(); ++i) (i < ts.size() / 2 ? a_ : b_).push_back(ts[i]);
    for (const auto& t : a_) map_[t.name] = kA;
    for (const auto& t : b_) map_[t.name] = kB;
  }
  void write_all() {
    write(kA, st_file(a_));
    write(kB, st_file(b_));
    write("model.safetensors.index.json", json{{"metadata", {{"total_size", 1234}}}, {"weight_map", map_}}.dump());
  }
  static constexpr const char* kA = "model-00001-of-00002.safetensors";
  static constexpr const char* kB = "model-00002-of-00002.safetensors";
  std::vector<StTensor> a_, b_;
  std::map<std::string, std::string> map_;
};

TEST_F(ShardedTest, ReadsBothShards) {
  write_all();
  auto c = Checkpoint::open(dir_);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->files().size(), 2u);
  EXPECT_EQ(c->tensors().size(), a_.size() + b_.size());
  const SafetensorsTensor* t = c->find(b_.back().name);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->file->path(), dir_ + "/" + kB);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(t->data), t->nbytes), b_.back().bytes);
}

TEST_F(ShardedTest, MissingShard) {
  write_all();
  std::filesystem::remove(dir_ + "/" + kB);
  expect_error(StatusCode::kNotFound, {"model.safetensors.index.json", std::string("shard '") + kB + "'"});
}

TEST_F(ShardedTest, IndexAndShardsDisagree) {
  map_[a_[0].name] = kB;  // index places a tensor in the other shard
  write_all();
  expect_error(StatusCode::kInvalidModel, {"'" + a_[0].name + "'", "places it in"});

  map_[a_[0].name] = kA;
  map_["model.extra.weight"] = kA;  // index lists a tensor no shard holds
  write_all();
  expect_error(StatusCode::kInvalidModel, {"'model.extra.weight'", "does not hold it"});

  map_.erase("model.extra.weight");
  map_.erase(a_[1].name);  // a shard holds a tensor the index does not list
  write_all();
  expect_error(StatusCode::kInvalidModel, {"'" + a_[1].name + "'", "is not listed"});
}

TEST_F(ShardedTest, TensorInTwoShardsAndBadIndex) {
  b_.push_back(a_[0]);
  write_all();
  // The index names one home for the name; the other shard holding it is the error.
  expect_error(StatusCode::kInvalidModel, {"'" + a_[0].name + "'"});

  map_["x"] = "../escape.safetensors";
  write_all();
  expect_error(StatusCode::kInvalidModel, {"not a file name in the model directory"});
  write("model.safetensors.index.json", R"({"metadata": {}})");
  expect_error(StatusCode::kInvalidModel, {"no 'weight_map'"});
}

TEST_F(CheckpointTest, MissingPieces) {
  expect_error(StatusCode::kNotFound, {"no config.json"});
  write("config.json", testing::tiny_llama_config());
  write("pytorch_model.bin", "x");
  expect_error(StatusCode::kNotFound, {"neither model.safetensors", "pytorch_model.bin is not read"});
  auto missing = Checkpoint::open(dir_ + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  write("config.json", R"({"architectures": ["T5ForConditionalGeneration"]})");
  expect_error(StatusCode::kUnsupported, {"T5ForConditionalGeneration", "Qwen2ForCausalLM (qwen2)"});
}

}  // namespace
}  // namespace kiln::llm
