// config.json / generation_config.json parsing with transformers' defaults and Kiln's checks.
#include "llm/model_config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/stat.h>

namespace kiln::llm {

using nlohmann::json;

namespace {

struct KnownArchitecture {
  const char* cls;
  const char* model_type;
  Architecture arch;
};
constexpr KnownArchitecture kKnown[] = {
    {"GPT2LMHeadModel", "gpt2", Architecture::kGpt2},
    {"LlamaForCausalLM", "llama", Architecture::kLlama},
    {"MistralForCausalLM", "mistral", Architecture::kMistral},
    {"Qwen2ForCausalLM", "qwen2", Architecture::kQwen2},
};

// Field readers: absent or null -> the default; a value of the wrong type -> InvalidModel.
class Fields {
 public:
  Fields(const json& j, std::string where) : j_(j), where_(std::move(where)) {}
  bool has(const char* k) const { return j_.contains(k) && !j_[k].is_null(); }
  Status int_field(const char* k, int64_t def, int64_t* out) const {
    if (!has(k)) return *out = def, Status::Ok();
    const json& v = j_[k];
    if (!v.is_number_integer()) return invalid_model(where_ + ": '" + k + "' is " + v.dump() + ", expected an integer");
    *out = v.get<int64_t>();
    return Status::Ok();
  }
  // A size: positive and at most 2^31 (so products of two sizes stay far inside int64).
  Status positive(const char* k, int64_t def, int64_t* out) const {
    KILN_RETURN_IF_ERROR(int_field(k, def, out));
    if (*out <= 0) return invalid_model(where_ + ": '" + k + "' is " + std::to_string(*out) + ", expected a positive integer");
    if (*out > (int64_t{1} << 31)) return invalid_model(where_ + ": '" + k + "' is " + std::to_string(*out) + ", past Kiln's limit of 2^31");
    return Status::Ok();
  }
  Status number(const char* k, double def, double* out) const {
    if (!has(k)) return *out = def, Status::Ok();
    if (!j_[k].is_number()) return invalid_model(where_ + ": '" + k + "' is " + j_[k].dump() + ", expected a number");
    *out = j_[k].get<double>();
    return Status::Ok();
  }
  Status boolean(const char* k, bool def, bool* out) const {
    if (!has(k)) return *out = def, Status::Ok();
    if (!j_[k].is_boolean()) return invalid_model(where_ + ": '" + k + "' is " + j_[k].dump() + ", expected true or false");
    *out = j_[k].get<bool>();
    return Status::Ok();
  }
  Status string(const char* k, const char* def, std::string* out) const {
    if (!has(k)) return *out = def, Status::Ok();
    if (!j_[k].is_string()) return invalid_model(where_ + ": '" + k + "' is " + j_[k].dump() + ", expected a string");
    *out = j_[k].get<std::string>();
    return Status::Ok();
  }
  // An integer, a list of integers or null (token ids).
  Status ids(const char* k, std::vector<int64_t>* out) const {
    out->clear();
    if (!has(k)) return Status::Ok();
    const json& v = j_[k];
    auto bad = [&] { return invalid_model(where_ + ": '" + k + "' is " + v.dump() + ", expected a token id or a list of them"); };
    if (v.is_number_integer()) {
      if (v.get<int64_t>() < 0) return bad();
      out->push_back(v.get<int64_t>());
      return Status::Ok();
    }
    if (!v.is_array()) return bad();
    for (const json& e : v) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0) return bad();
      out->push_back(e.get<int64_t>());
    }
    return Status::Ok();
  }

 private:
  const json& j_;
  std::string where_;
};

StatusOr<json> parse_object(const std::string& text, const std::string& where) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_model(where + ": not valid JSON");
  if (!j.is_object()) return invalid_model(where + ": not a JSON object");
  return j;
}

Status parse_rope(const json& j, const std::string& where, RopeConfig* rope) {
  // transformers >= 4.56 may nest theta and scaling in "rope_parameters"; older configs have
  // rope_theta and rope_scaling at the top level.
  const json* scaling = nullptr;
  const json* theta_holder = &j;
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    scaling = &j["rope_parameters"];
    if (scaling->contains("rope_theta")) theta_holder = scaling;
  } else if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    scaling = &j["rope_scaling"];
  }
  KILN_RETURN_IF_ERROR(Fields(*theta_holder, where).number("rope_theta", 10000.0, &rope->theta));
  if (!(rope->theta > 0)) return invalid_model(where + ": rope_theta must be positive");
  if (!scaling) return Status::Ok();
  const std::string sw = where + ": rope_scaling";
  if (!scaling->is_object()) return invalid_model(sw + " is " + scaling->dump() + ", expected an object or null");
  Fields s(*scaling, sw);
  std::string type;
  KILN_RETURN_IF_ERROR(s.string("rope_type", "", &type));
  if (type.empty()) KILN_RETURN_IF_ERROR(s.string("type", "default", &type));
  auto need = [&](const char* k, double* out) -> Status {
    if (!s.has(k)) return invalid_model(sw + " of type '" + type + "' needs '" + k + "'");
    return s.number(k, 0, out);
  };
  if (type == "default") return Status::Ok();
  if (type == "linear" || type == "dynamic") {
    rope->scaling = type == "linear" ? RopeScaling::kLinear : RopeScaling::kDynamic;
    KILN_RETURN_IF_ERROR(need("factor", &rope->factor));
  } else if (type == "llama3") {
    rope->scaling = RopeScaling::kLlama3;
    KILN_RETURN_IF_ERROR(need("factor", &rope->factor));
    KILN_RETURN_IF_ERROR(need("low_freq_factor", &rope->low_freq_factor));
    KILN_RETURN_IF_ERROR(need("high_freq_factor", &rope->high_freq_factor));
    if (!s.has("original_max_position_embeddings"))
      return invalid_model(sw + " of type 'llama3' needs 'original_max_position_embeddings'");
    KILN_RETURN_IF_ERROR(s.positive("original_max_position_embeddings", 0, &rope->original_max_position_embeddings));
    if (!(rope->high_freq_factor > rope->low_freq_factor))
      return invalid_model(sw + ": high_freq_factor must exceed low_freq_factor");
  } else {
    return unsupported(sw + ": type '" + type + "' is not supported (default, linear, dynamic, llama3 are)");
  }
  if (!(rope->factor > 0)) return invalid_model(sw + ": factor must be positive");
  return Status::Ok();
}

Status parse_gpt2(const Fields& f, const std::string& where, ModelConfig* c) {
  KILN_RETURN_IF_ERROR(f.positive("n_embd", 768, &c->hidden_size));
  KILN_RETURN_IF_ERROR(f.positive("n_layer", 12, &c->num_layers));
  KILN_RETURN_IF_ERROR(f.positive("n_head", 12, &c->num_heads));
  KILN_RETURN_IF_ERROR(f.positive("n_inner", 4 * c->hidden_size, &c->intermediate_size));
  KILN_RETURN_IF_ERROR(f.positive("vocab_size", 50257, &c->vocab_size));
  KILN_RETURN_IF_ERROR(f.positive("n_positions", 1024, &c->max_position_embeddings));
  KILN_RETURN_IF_ERROR(f.number("layer_norm_epsilon", 1e-5, &c->norm_eps));
  KILN_RETURN_IF_ERROR(f.string("activation_function", "gelu_new", &c->hidden_act));
  KILN_RETURN_IF_ERROR(f.boolean("tie_word_embeddings", true, &c->tie_word_embeddings));
  c->num_kv_heads = c->num_heads;
  c->attention_bias = c->attention_out_bias = c->mlp_bias = true;
  // GPT2Attention's variants that change the scores: refused rather than computed as plain GPT-2
  // (reorder_and_upcast_attn only changes the precision of the same product and is accepted).
  bool scale_weights = true, by_layer = false;
  KILN_RETURN_IF_ERROR(f.boolean("scale_attn_weights", true, &scale_weights));
  KILN_RETURN_IF_ERROR(f.boolean("scale_attn_by_inverse_layer_idx", false, &by_layer));
  if (!scale_weights) return unsupported(where + ": 'scale_attn_weights' false (unscaled attention scores) is not supported");
  if (by_layer)
    return unsupported(where + ": 'scale_attn_by_inverse_layer_idx' true (scores divided by layer + 1) is not supported");
  return Status::Ok();
}

// Llama, Mistral and Qwen2 share field names; their defaults differ (transformers' configs).
Status parse_llama_family(const json& j, const Fields& f, const std::string& where, ModelConfig* c) {
  struct Defaults {
    int64_t vocab, hidden, inter, max_pos;
  };
  const Defaults d = c->architecture == Architecture::kQwen2     ? Defaults{151936, 4096, 22016, 32768}
                     : c->architecture == Architecture::kMistral ? Defaults{32000, 4096, 14336, 4096 * 32}
                                                                 : Defaults{32000, 4096, 11008, 2048};
  KILN_RETURN_IF_ERROR(f.positive("vocab_size", d.vocab, &c->vocab_size));
  KILN_RETURN_IF_ERROR(f.positive("hidden_size", d.hidden, &c->hidden_size));
  KILN_RETURN_IF_ERROR(f.positive("intermediate_size", d.inter, &c->intermediate_size));
  KILN_RETURN_IF_ERROR(f.positive("num_hidden_layers", 32, &c->num_layers));
  KILN_RETURN_IF_ERROR(f.positive("num_attention_heads", 32, &c->num_heads));
  const int64_t kv_default = c->architecture == Architecture::kMistral ? 8 : c->num_heads;
  KILN_RETURN_IF_ERROR(f.positive("num_key_value_heads", kv_default, &c->num_kv_heads));
  KILN_RETURN_IF_ERROR(f.positive("max_position_embeddings", d.max_pos, &c->max_position_embeddings));
  KILN_RETURN_IF_ERROR(f.number("rms_norm_eps", 1e-6, &c->norm_eps));
  KILN_RETURN_IF_ERROR(f.string("hidden_act", "silu", &c->hidden_act));
  KILN_RETURN_IF_ERROR(f.boolean("tie_word_embeddings", false, &c->tie_word_embeddings));
  if (f.has("head_dim")) KILN_RETURN_IF_ERROR(f.positive("head_dim", 0, &c->head_dim));
  KILN_RETURN_IF_ERROR(parse_rope(j, where, &c->rope));
  if (c->architecture == Architecture::kQwen2) {
    c->attention_bias = true;  // Qwen2Attention: q/k/v with bias, o_proj without
    bool use_sw = false;
    KILN_RETURN_IF_ERROR(f.boolean("use_sliding_window", false, &use_sw));
    if (use_sw) {
      int64_t w = 0;
      KILN_RETURN_IF_ERROR(f.positive("sliding_window", 4096, &w));
      c->sliding_window = w;
    }
  } else if (c->architecture == Architecture::kLlama) {
    KILN_RETURN_IF_ERROR(f.boolean("attention_bias", false, &c->attention_bias));
    c->attention_out_bias = c->attention_bias;
    KILN_RETURN_IF_ERROR(f.boolean("mlp_bias", false, &c->mlp_bias));
  } else if (f.has("sliding_window")) {  // Mistral: null turns it off
    int64_t w = 0;
    KILN_RETURN_IF_ERROR(f.positive("sliding_window", 0, &w));
    c->sliding_window = w;
  }
  return Status::Ok();
}

}  // namespace

const char* architecture_name(Architecture a) {
  switch (a) {
    case Architecture::kGpt2: return "gpt2";
    case Architecture::kLlama: return "llama";
    case Architecture::kMistral: return "mistral";
    case Architecture::kQwen2: return "qwen2";
  }
  return "?";
}

std::string supported_architectures() {
  std::string s;
  for (const auto& k : kKnown) s += std::string(s.empty() ? "" : ", ") + k.cls + " (" + k.model_type + ")";
  return s;
}

StatusOr<ModelConfig> parse_model_config(const std::string& text, const std::string& where) {
  KILN_ASSIGN_OR_RETURN(json j, parse_object(text, where));
  Fields f(j, where);
  ModelConfig c;
  KILN_RETURN_IF_ERROR(f.string("model_type", "", &c.model_type));
  if (f.has("architectures")) {
    const json& a = j["architectures"];
    if (!a.is_array() || a.empty() || !a[0].is_string())
      return invalid_model(where + ": 'architectures' is " + a.dump() + ", expected a list of class names");
    c.architecture_class = a[0].get<std::string>();
  }
  const KnownArchitecture* known = nullptr;
  for (const auto& k : kKnown) {
    // The class decides when given (LlamaModel or LlamaForSequenceClassification are no causal LM).
    if (!c.architecture_class.empty() ? c.architecture_class == k.cls : c.model_type == k.model_type) known = &k;
  }
  if (!known) {
    const std::string what = !c.architecture_class.empty() ? "architecture '" + c.architecture_class + "'"
                             : !c.model_type.empty()       ? "model_type '" + c.model_type + "'"
                                                           : std::string("a config without 'architectures' or 'model_type'");
    return unsupported(where + ": " + what + " is not supported; supported: " + supported_architectures());
  }
  if (!c.model_type.empty() && c.model_type != known->model_type)
    return invalid_model(where + ": architecture '" + known->cls + "' with model_type '" + c.model_type + "' (expected '" +
                         known->model_type + "')");
  c.architecture = known->arch;
  if (c.architecture == Architecture::kGpt2) KILN_RETURN_IF_ERROR(parse_gpt2(f, where, &c));
  else KILN_RETURN_IF_ERROR(parse_llama_family(j, f, where, &c));

  // The weight spec lists every layer's tensors; a layer count no model comes near is a broken file.
  if (c.num_layers > kMaxLayers)
    return invalid_model(where + ": " + std::to_string(c.num_layers) + " layers, past Kiln's limit of " + std::to_string(kMaxLayers));
  if (c.head_dim == 0) {
    if (c.hidden_size % c.num_heads != 0)
      return invalid_model(where + ": hidden size " + std::to_string(c.hidden_size) + " is not a multiple of the " +
                           std::to_string(c.num_heads) + " attention heads (and no head_dim is given)");
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.num_heads % c.num_kv_heads != 0)
    return invalid_model(where + ": " + std::to_string(c.num_heads) + " attention heads are not a multiple of the " +
                         std::to_string(c.num_kv_heads) + " key/value heads");
  if (c.architecture != Architecture::kGpt2 && c.head_dim % 2 != 0)
    return invalid_model(where + ": head_dim " + std::to_string(c.head_dim) + " is odd; RoPE rotates pairs");
  if (!(c.norm_eps > 0)) return invalid_model(where + ": the norm epsilon must be positive");
  std::string dtype;
  KILN_RETURN_IF_ERROR(f.string(f.has("torch_dtype") ? "torch_dtype" : "dtype", "", &dtype));
  if (dtype == "float32") c.torch_dtype = DataType::kFloat32;
  else if (dtype == "float16") c.torch_dtype = DataType::kFloat16;
  else if (dtype == "bfloat16") c.torch_dtype = DataType::kBFloat16;
  else if (!dtype.empty() && dtype != "auto")
    return unsupported(where + ": torch_dtype '" + dtype + "' is not supported (float32, float16, bfloat16 are)");
  KILN_RETURN_IF_ERROR(f.ids("bos_token_id", &c.bos_token_ids));
  KILN_RETURN_IF_ERROR(f.ids("eos_token_id", &c.eos_token_ids));
  return c;
}

StatusOr<GenerationConfig> parse_generation_config(const std::string& text, const std::string& where) {
  KILN_ASSIGN_OR_RETURN(json j, parse_object(text, where));
  Fields f(j, where);
  GenerationConfig g;
  KILN_RETURN_IF_ERROR(f.ids("bos_token_id", &g.bos_token_ids));
  KILN_RETURN_IF_ERROR(f.ids("eos_token_id", &g.eos_token_ids));
  KILN_RETURN_IF_ERROR(f.ids("pad_token_id", &g.pad_token_ids));
  auto opt_num = [&](const char* k, std::optional<double>* out) -> Status {
    if (!f.has(k)) return Status::Ok();
    double v = 0;
    KILN_RETURN_IF_ERROR(f.number(k, 0, &v));
    *out = v;
    return Status::Ok();
  };
  auto opt_int = [&](const char* k, std::optional<int64_t>* out) -> Status {
    if (!f.has(k)) return Status::Ok();
    int64_t v = 0;
    KILN_RETURN_IF_ERROR(f.int_field(k, 0, &v));
    *out = v;
    return Status::Ok();
  };
  if (f.has("do_sample")) {
    bool b = false;
    KILN_RETURN_IF_ERROR(f.boolean("do_sample", false, &b));
    g.do_sample = b;
  }
  KILN_RETURN_IF_ERROR(opt_num("temperature", &g.temperature));
  KILN_RETURN_IF_ERROR(opt_num("top_p", &g.top_p));
  KILN_RETURN_IF_ERROR(opt_num("repetition_penalty", &g.repetition_penalty));
  KILN_RETURN_IF_ERROR(opt_int("top_k", &g.top_k));
  KILN_RETURN_IF_ERROR(opt_int("max_length", &g.max_length));
  KILN_RETURN_IF_ERROR(opt_int("max_new_tokens", &g.max_new_tokens));
  return g;
}

StatusOr<std::string> read_text_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return not_found("'" + path + "' not found");
  if (!S_ISREG(st.st_mode)) return invalid_argument("'" + path + "' is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalid_argument("'" + path + "' cannot be read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

StatusOr<ModelConfig> read_model_config(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_model_config(text, "'" + path + "'");
}

StatusOr<GenerationConfig> read_generation_config(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_generation_config(text, "'" + path + "'");
}

}  // namespace kiln::llm
