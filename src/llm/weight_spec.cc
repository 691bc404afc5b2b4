// Per-architecture weight lists and the check of a checkpoint against them.
#include "llm/weight_spec.h"

#include <set>

namespace kiln::llm {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void gpt2_weights(const ModelConfig& c, const std::string& p, std::vector<ExpectedWeight>* w) {
  const int64_t D = c.hidden_size, I = c.intermediate_size;
  auto add = [&](const std::string& n, Shape s) { w->push_back({p + n, std::move(s), true}); };
  add("wte.weight", {c.vocab_size, D});
  add("wpe.weight", {c.max_position_embeddings, D});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    add(h + "ln_1.weight", {D});
    add(h + "ln_1.bias", {D});
    add(h + "attn.c_attn.weight", {D, 3 * D});
    add(h + "attn.c_attn.bias", {3 * D});
    add(h + "attn.c_proj.weight", {D, D});
    add(h + "attn.c_proj.bias", {D});
    add(h + "ln_2.weight", {D});
    add(h + "ln_2.bias", {D});
    add(h + "mlp.c_fc.weight", {D, I});
    add(h + "mlp.c_fc.bias", {I});
    add(h + "mlp.c_proj.weight", {I, D});
    add(h + "mlp.c_proj.bias", {D});
  }
  add("ln_f.weight", {D});
  add("ln_f.bias", {D});
  // GPT2LMHeadModel's lm_head is outside `transformer.`; save_pretrained drops it when tied.
  w->push_back({"lm_head.weight", {c.vocab_size, D}, !c.tie_word_embeddings});
}

void llama_weights(const ModelConfig& c, std::vector<ExpectedWeight>* w) {
  const int64_t D = c.hidden_size, I = c.intermediate_size;
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  auto add = [&](const std::string& n, Shape s) { w->push_back({n, std::move(s), true}); };
  add("model.embed_tokens.weight", {c.vocab_size, D});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string L = "model.layers." + std::to_string(l) + ".";
    add(L + "input_layernorm.weight", {D});
    add(L + "self_attn.q_proj.weight", {q, D});
    add(L + "self_attn.k_proj.weight", {kv, D});
    add(L + "self_attn.v_proj.weight", {kv, D});
    add(L + "self_attn.o_proj.weight", {D, q});
    if (c.attention_bias) {
      add(L + "self_attn.q_proj.bias", {q});
      add(L + "self_attn.k_proj.bias", {kv});
      add(L + "self_attn.v_proj.bias", {kv});
    }
    if (c.attention_out_bias) add(L + "self_attn.o_proj.bias", {D});
    add(L + "post_attention_layernorm.weight", {D});
    add(L + "mlp.gate_proj.weight", {I, D});
    add(L + "mlp.up_proj.weight", {I, D});
    add(L + "mlp.down_proj.weight", {D, I});
    if (c.mlp_bias) {
      add(L + "mlp.gate_proj.bias", {I});
      add(L + "mlp.up_proj.bias", {I});
      add(L + "mlp.down_proj.bias", {D});
    }
  }
  add("model.norm.weight", {D});
  w->push_back({"lm_head.weight", {c.vocab_size, D}, !c.tie_word_embeddings});
}

std::string where_tensor(const SafetensorsTensor& t) { return "tensor '" + t.name + "' in '" + t.file->path() + "'"; }

}  // namespace

std::vector<ExpectedWeight> expected_weights(const ModelConfig& config, const std::string& prefix) {
  std::vector<ExpectedWeight> w;
  if (config.architecture == Architecture::kGpt2) gpt2_weights(config, prefix, &w);
  else llama_weights(config, &w);
  return w;
}

bool is_ignored_buffer(const ModelConfig& config, const std::string& name) {
  if (config.architecture == Architecture::kGpt2) return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias");
  return ends_with(name, ".self_attn.rotary_emb.inv_freq");
}

Status check_weights(const ModelConfig& config, const std::string& prefix,
                     const std::map<std::string, SafetensorsTensor>& tensors, const std::string& where,
                     const Fp8CheckpointQuant* fp8) {
  const std::string arch = std::string(architecture_name(config.architecture)) + " checkpoint " + where;
  if (fp8 && config.architecture == Architecture::kGpt2)
    return unsupported(arch + ": " + fp8->source + " declares " + fp8_checkpoint_format_name(fp8->format) +
                       " FP8 quantization; FP8 checkpoints are read for the Llama family (llama, mistral, qwen2)");
  std::set<std::string> expected, fp8_modules;
  for (const ExpectedWeight& e : expected_weights(config, prefix)) {
    expected.insert(e.name);
    auto it = tensors.find(e.name);
    if (it == tensors.end()) {
      if (!e.required) continue;
      return invalid_model(arch + ": weight '" + e.name + "' " + shape_str(e.shape) + " is missing");
    }
    const SafetensorsTensor& t = it->second;
    const bool linear = ends_with(e.name, "_proj.weight") || e.name == "lm_head.weight";
    if (t.dtype == DataType::kFloat8E4M3FN && fp8 && linear) {
      const std::string module = e.name.substr(0, e.name.size() - std::string(".weight").size());
      if (Status s = read_fp8_linear(module, tensors, *fp8).status(); !s.ok()) return Status(s.code(), arch + ": " + s.message());
      fp8_modules.insert(module);
    } else if (t.dtype == DataType::kFloat8E4M3FN || t.dtype == DataType::kFloat8E5M2) {
      return unsupported(arch + ": " + where_tensor(t) + " is " + safetensors_dtype_name(t.dtype) +
                         (fp8 ? std::string("; FP8 checkpoints are read with F8_E4M3 weights of linear layers only")
                              : std::string("; FP8 checkpoints are read with their declared scales (config.json "
                                            "quantization_config or hf_quant_config.json: ModelOpt, compressed-tensors, "
                                            "AutoFP8), and this one declares none")));
    } else if (t.dtype != DataType::kFloat32 && t.dtype != DataType::kFloat16 && t.dtype != DataType::kBFloat16) {
      return unsupported(arch + ": " + where_tensor(t) + " has dtype " + safetensors_dtype_name(t.dtype) +
                         "; weights must be F32, F16 or BF16");
    }
    if (t.shape != e.shape)
      return invalid_model(arch + ": " + where_tensor(t) + " has shape " + shape_str(t.shape) + ", the config implies " +
                           shape_str(e.shape));
  }
  if (fp8 && fp8_modules.empty())
    return invalid_model(arch + ": " + fp8->source + " declares " + fp8_checkpoint_format_name(fp8->format) +
                         " FP8 quantization but no linear layer's weight is F8_E4M3");
  for (const auto& [name, t] : tensors) {
    if (expected.count(name) || is_ignored_buffer(config, name)) continue;
    if (fp8 && (is_kv_cache_scale(name) || fp8_modules.count(fp8_scale_module(name)))) continue;
    return invalid_model(arch + ": unexpected " + where_tensor(t) + " (not a weight of " + architecture_name(config.architecture) +
                         " with " + std::to_string(config.num_layers) + " layers" +
                         (config.architecture == Architecture::kGpt2 ? ", names prefixed '" + prefix + "'" : std::string()) +
                         (fp8 ? ", nor a scale of one of its F8_E4M3 linear layers" : "") + ")");
  }
  return Status::Ok();
}

}  // namespace kiln::llm
