// kiln_llm_inspect: opens a Hugging Face checkpoint directory with src/llm (config, generation
// config, safetensors shards checked against the architecture's weight spec, tokenizer) and prints
// what it found; with --json, one JSON object (scripts/llm_checkpoints_hf.py compares it with
// transformers' own state dict).
//
//   kiln_llm_inspect CKPT_DIR [--json] [--sums]
//
// --sums adds each tensor's sum and sum of |x| over its values (float64). Exit status 0 when the
// checkpoint opens, 1 with the error otherwise, 2 on a usage error.
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/numerics.h"
#include "llm/checkpoint.h"
#include "llm/tokenizer.h"

namespace {

const char* rope_name(kiln::llm::RopeScaling s) {
  switch (s) {
    case kiln::llm::RopeScaling::kNone: return "none";
    case kiln::llm::RopeScaling::kLinear: return "linear";
    case kiln::llm::RopeScaling::kDynamic: return "dynamic";
    case kiln::llm::RopeScaling::kLlama3: return "llama3";
  }
  return "?";
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  bool as_json = false, sums = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") as_json = true;
    else if (a == "--sums") sums = true;
    else if (dir.empty()) dir = a;
    else dir.clear(), i = argc;
  }
  if (dir.empty()) {
    std::cerr << "usage: kiln_llm_inspect CKPT_DIR [--json] [--sums]\n";
    return 2;
  }
  auto ck = kiln::llm::Checkpoint::open(dir);
  if (!ck.ok()) {
    std::cerr << "kiln_llm_inspect: " << ck.status().to_string() << "\n";
    return 1;
  }
  const kiln::llm::ModelConfig& c = ck->config();
  nlohmann::json j;
  j["architecture"] = kiln::llm::architecture_name(c.architecture);
  j["config"] = {{"hidden_size", c.hidden_size}, {"num_layers", c.num_layers}, {"num_heads", c.num_heads},
                 {"num_kv_heads", c.num_kv_heads}, {"head_dim", c.head_dim}, {"intermediate_size", c.intermediate_size},
                 {"vocab_size", c.vocab_size}, {"max_position_embeddings", c.max_position_embeddings}, {"norm_eps", c.norm_eps},
                 {"rope_theta", c.rope.theta}, {"rope_scaling", rope_name(c.rope.scaling)}, {"rope_factor", c.rope.factor},
                 {"tie_word_embeddings", c.tie_word_embeddings}, {"attention_bias", c.attention_bias},
                 {"torch_dtype", kiln::dtype_name(c.torch_dtype)}};
  j["eos_token_ids"] = ck->eos_token_ids();
  j["bos_token_ids"] = ck->bos_token_ids();
  j["files"] = ck->files();
  j["weight_prefix"] = ck->weight_prefix();
  uint64_t total = 0;
  nlohmann::json tensors = nlohmann::json::array();
  for (const auto& [name, t] : ck->tensors()) {
    total += t.nbytes;
    nlohmann::json e = {{"name", name}, {"dtype", kiln::llm::safetensors_dtype_name(t.dtype)}, {"shape", t.shape},
                        {"file", t.file->path()}, {"bytes", t.nbytes}};
    if (sums) {
      const kiln::Tensor v = t.to_tensor();  // aligned view or copy
      double s = 0, a = 0;
      const int64_t n = kiln::shape_numel(t.shape);
      for (int64_t i = 0; i < n; ++i) {
        const double x = kiln::load_as_double(t.dtype, v.raw(), i);
        s += x, a += std::fabs(x);
      }
      e["sum"] = s;
      e["abs_sum"] = a;
    }
    tensors.push_back(std::move(e));
  }
  j["tensors"] = std::move(tensors);
  j["total_bytes"] = total;
  auto tok = kiln::llm::load_tokenizer(dir);
  if (tok.ok()) j["tokenizer"] = {{"kind", (*tok)->kind()}, {"vocab_size", (*tok)->vocab_size()}};
  else j["tokenizer"] = {{"error", tok.status().to_string()}};
  if (as_json) {
    std::cout << j.dump(1) << "\n";
    return 0;
  }
  std::cout << dir << ": " << j["architecture"].get<std::string>() << ", " << c.num_layers << " layers, hidden " << c.hidden_size
            << ", heads " << c.num_heads << "/" << c.num_kv_heads << " (q/kv) x " << c.head_dim << ", MLP " << c.intermediate_size
            << ", vocab " << c.vocab_size << ", rope " << rope_name(c.rope.scaling) << " theta " << c.rope.theta
            << (c.tie_word_embeddings ? ", tied embeddings" : "") << "\n"
            << "  " << ck->tensors().size() << " tensors, " << total << " bytes in " << ck->files().size() << " file(s)\n"
            << "  tokenizer: " << j["tokenizer"].dump() << "\n";
  return 0;
}
