// Test helpers for src/llm: temporary directories, safetensors files written byte by byte (so
// tests can break them on purpose), and small Hugging Face checkpoints.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "llm/model_config.h"
#include "llm/weight_spec.h"

namespace kiln::llm::testing {

inline std::string make_temp_dir(const std::string& tag) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("kiln_llm_" + tag + "_XXXXXX")).string();
  char* p = mkdtemp(tmpl.data());
  return p ? std::string(p) : std::string();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file's bytes ("" when it cannot be read).
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One run of a tool of the build directory in its own process (std::system).
struct CliRun {
  int rc = -1;  // exit status; -1 when it did not exit normally
  std::string out, err;
};

#ifdef KILN_BINARY_DIR
// `binary` (a file name under KILN_BINARY_DIR) with `args`; stdout and stderr go through files in
// `tmp`.
inline CliRun run_tool(const std::string& binary, const std::string& args, const std::string& tmp) {
  const std::string cmd = std::string(KILN_BINARY_DIR) + "/" + binary + " " + args + " >" + tmp + "/stdout 2>" + tmp + "/stderr";
  CliRun r;
  const int status = std::system(cmd.c_str());
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(tmp + "/stdout");
  r.err = slurp(tmp + "/stderr");
  return r;
}
#endif

// A byte-level tokenizer.json: ids 0..255 are the bytes (GPT-2's byte -> character table), no merges.
inline std::string byte_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  unsigned extra = 0;
  for (unsigned b = 0; b < 256; ++b) {
    const bool direct = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const char32_t cp = direct ? b : 256 + extra++;
    std::string s;
    if (cp < 0x80)
      s.push_back(static_cast<char>(cp));
    else
      s += {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    vocab[s] = b;
  }
  using nlohmann::json;
  return json{{"version", "1.0"},
              {"added_tokens", json::array()},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
              {"post_processor", nullptr},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}, {"dropout", nullptr}, {"unk_token", nullptr}}}}
      .dump();
}

struct StTensor {
  std::string name;
  std::string dtype;  // "F32", "BF16", ...
  std::vector<int64_t> shape;
  std::string bytes;  // raw data
};

inline size_t st_elem_bytes(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "I64" || dtype == "F64") return 8;
  return 1;
}

// A tensor of `dtype` and `shape` whose bytes count up from `seed` (so tensors differ).
inline StTensor st_tensor(const std::string& name, const std::string& dtype, std::vector<int64_t> shape, uint8_t seed = 1) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::string bytes(static_cast<size_t>(n) * st_elem_bytes(dtype), '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(seed + i);
  return {name, dtype, std::move(shape), std::move(bytes)};
}

// The header JSON safetensors' writer produces: tensors packed in order, no holes.
inline nlohmann::json st_header(const std::vector<StTensor>& ts, const std::map<std::string, std::string>& metadata = {}) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t off = 0;
  for (const auto& t : ts) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  return h;
}

// 8-byte little-endian length, the header padded with spaces to a multiple of 8, the data.
inline std::string st_bytes(const std::string& header_text, const std::string& data) {
  std::string h = header_text;
  while (h.size() % 8) h.push_back(' ');
  std::string out(8, '\0');
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + h + data;
}

inline std::string st_file(const std::vector<StTensor>& ts, const std::map<std::string, std::string>& metadata = {}) {
  std::string data;
  for (const auto& t : ts) data += t.bytes;
  return st_bytes(st_header(ts, metadata).dump(), data);
}

// Every weight of `config`'s spec as a tensor of `dtype` (lm_head only when required).
inline std::vector<StTensor> spec_tensors(const ModelConfig& config, const std::string& prefix, const std::string& dtype = "F16") {
  std::vector<StTensor> out;
  uint8_t seed = 1;
  for (const ExpectedWeight& w : expected_weights(config, prefix))
    if (w.required) out.push_back(st_tensor(w.name, dtype, w.shape, seed++));
  return out;
}

// config.json texts of tiny models of each architecture.
inline std::string tiny_llama_config(int layers = 2, bool tied = false) {
  return nlohmann::json{{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 16},
                        {"intermediate_size", 40}, {"num_hidden_layers", layers}, {"num_attention_heads", 4},
                        {"num_key_value_heads", 2}, {"vocab_size", 64}, {"max_position_embeddings", 128},
                        {"rms_norm_eps", 1e-5}, {"rope_theta", 500000.0}, {"tie_word_embeddings", tied},
                        {"torch_dtype", "float16"}, {"bos_token_id", 1}, {"eos_token_id", 2}}
      .dump();
}

inline std::string tiny_gpt2_config(int layers = 2) {
  return nlohmann::json{{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"n_embd", 16}, {"n_layer", layers},
                        {"n_head", 2}, {"n_inner", nullptr}, {"vocab_size", 50}, {"n_positions", 32},
                        {"layer_norm_epsilon", 1e-5}, {"activation_function", "gelu_new"}}
      .dump();
}

inline std::string tiny_qwen2_config() {
  return nlohmann::json{{"architectures", {"Qwen2ForCausalLM"}}, {"model_type", "qwen2"}, {"hidden_size", 16},
                        {"intermediate_size", 24}, {"num_hidden_layers", 1}, {"num_attention_heads", 4},
                        {"num_key_value_heads", 1}, {"vocab_size", 40}, {"max_position_embeddings", 64},
                        {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0}, {"tie_word_embeddings", true},
                        {"use_sliding_window", false}, {"sliding_window", 32}, {"torch_dtype", "bfloat16"}}
      .dump();
}

// Tiny models whose projection dims are multiples of 16 (FP8 QuantLinear's alignment): Llama with
// GQA (head_dim 16, k/v 32 wide), GPT-2, Qwen2 with q/k/v biases.
inline std::string tiny_llama16_config() {
  nlohmann::json c = nlohmann::json::parse(tiny_llama_config(2));
  c["hidden_size"] = 64;
  c["intermediate_size"] = 128;
  c["num_attention_heads"] = 4;
  c["num_key_value_heads"] = 2;
  c["vocab_size"] = 96;
  return c.dump();
}
inline std::string tiny_gpt2_16_config() {
  nlohmann::json c = nlohmann::json::parse(tiny_gpt2_config(2));
  c["n_embd"] = 64;  // n_inner 4 x 64
  c["n_head"] = 4;
  c["vocab_size"] = 80;
  c["n_positions"] = 64;
  return c.dump();
}
inline std::string tiny_qwen2_16_config() {
  nlohmann::json c = nlohmann::json::parse(tiny_qwen2_config());
  c["hidden_size"] = 64;
  c["intermediate_size"] = 96;
  c["num_attention_heads"] = 4;
  c["num_key_value_heads"] = 2;
  c["num_hidden_layers"] = 2;
  c["vocab_size"] = 80;
  return c.dump();
}

}  // namespace kiln::llm::testing
