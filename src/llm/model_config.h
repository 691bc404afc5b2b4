// The model description of a Hugging Face checkpoint: config.json (architecture and sizes, in each
// architecture's own field names — GPT-2's n_embd/n_layer/..., the Llama family's hidden_size/
// num_hidden_layers/...) and generation_config.json (special token ids, sampling defaults).
// Field meanings follow transformers' GPT2Config, LlamaConfig, MistralConfig, Qwen2Config and
// GenerationConfig; defaults are those classes' defaults where a field is absent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln::llm {

enum class Architecture : uint8_t {
  kGpt2,     // GPT2LMHeadModel / gpt2: learned positions, LayerNorm, GELU (tanh), fused QKV Conv1D
  kLlama,    // LlamaForCausalLM / llama: RMSNorm, RoPE, GQA, SwiGLU (Llama 2, 3, 3.1, 3.2)
  kMistral,  // MistralForCausalLM / mistral: Llama's layers, optional sliding-window attention
  kQwen2,    // Qwen2ForCausalLM / qwen2: Llama's layers with q/k/v biases
};
inline constexpr int64_t kMaxLayers = 4096;  // largest num_layers accepted (real models: <= 126)

const char* architecture_name(Architecture a);  // "gpt2", "llama", "mistral", "qwen2"
// "GPT2LMHeadModel (gpt2), LlamaForCausalLM (llama), ..." for error messages.
std::string supported_architectures();

// RoPE frequency scaling (transformers' modeling_rope_utils). kNone: inv_freq = theta^(-2i/d).
enum class RopeScaling : uint8_t { kNone, kLinear, kDynamic, kLlama3 };

struct RopeConfig {
  double theta = 10000.0;  // rope_theta (base)
  RopeScaling scaling = RopeScaling::kNone;
  double factor = 1.0;                 // linear / dynamic / llama3
  double low_freq_factor = 1.0;        // llama3 only
  double high_freq_factor = 4.0;       // llama3 only
  int64_t original_max_position_embeddings = 0;  // llama3 only (8192 for Llama 3.1)
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::string architecture_class;  // architectures[0] as written ("LlamaForCausalLM"), may be empty
  std::string model_type;          // as written ("llama")
  int64_t hidden_size = 0;         // d_model (GPT-2 n_embd)
  int64_t num_layers = 0;          // GPT-2 n_layer
  int64_t num_heads = 0;           // query heads (GPT-2 n_head)
  int64_t num_kv_heads = 0;        // key/value heads (GQA; == num_heads for GPT-2 and MHA)
  int64_t head_dim = 0;            // per head; hidden_size / num_heads unless config.json says
  int64_t intermediate_size = 0;   // MLP width (GPT-2 n_inner, default 4 × n_embd)
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;  // GPT-2 n_positions
  double norm_eps = 1e-5;          // rms_norm_eps (Llama family) / layer_norm_epsilon (GPT-2)
  std::string hidden_act;          // "gelu_new" (GPT-2), "silu" (Llama family)
  RopeConfig rope;                 // unused by GPT-2
  bool tie_word_embeddings = false;  // lm_head shares embed_tokens / wte
  bool attention_bias = false;     // q/k/v (and o, Llama's attention_bias) projections carry biases
  bool attention_out_bias = false; // o_proj has a bias (Llama attention_bias; false for Qwen2)
  bool mlp_bias = false;           // gate/up/down carry biases (Llama mlp_bias)
  std::optional<int64_t> sliding_window;  // Mistral / Qwen2 (when use_sliding_window), tokens
  DataType torch_dtype = DataType::kUndefined;  // torch_dtype / dtype: the weights' intended dtype
  std::vector<int64_t> bos_token_ids, eos_token_ids;  // from config.json (generation config wins)
};

struct GenerationConfig {
  std::vector<int64_t> bos_token_ids;  // usually one; a JSON list is kept as a list
  std::vector<int64_t> eos_token_ids;  // any of them stops generation (Llama 3.1: 3 ids)
  std::vector<int64_t> pad_token_ids;
  std::optional<bool> do_sample;
  std::optional<double> temperature, top_p, repetition_penalty;
  std::optional<int64_t> top_k, max_length, max_new_tokens;
};

// Parses config.json's text. `where` names the file in errors. Unknown architectures are
// Unsupported listing the supported ones; missing or invalid sizes (non-positive, heads not
// dividing hidden size without head_dim, query heads not a multiple of kv heads) and unknown
// rope_scaling types are InvalidModel / Unsupported naming the field.
StatusOr<ModelConfig> parse_model_config(const std::string& json_text, const std::string& where);
StatusOr<ModelConfig> read_model_config(const std::string& path);

// Parses generation_config.json; token ids may be an integer, a list of integers or null.
StatusOr<GenerationConfig> parse_generation_config(const std::string& json_text, const std::string& where);
StatusOr<GenerationConfig> read_generation_config(const std::string& path);

// Reads a whole small text file (config, index, tokenizer); NotFound / InvalidArgument naming it.
StatusOr<std::string> read_text_file(const std::string& path);

}  // namespace kiln::llm
