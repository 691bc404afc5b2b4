// FP8 checkpoints: the quantization declarations and the scale tensors (see fp8_checkpoint.h).
#include "llm/fp8_checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/numerics.h"
#include "llm/model_config.h"

namespace kiln::llm {

using nlohmann::json;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// A string field, "" when absent or null; InvalidModel when present with another type.
Status string_field(const json& j, const char* key, const std::string& where, std::string* out) {
  out->clear();
  if (!j.contains(key) || j[key].is_null()) return Status::Ok();
  if (!j[key].is_string()) return invalid_model(where + ": '" + key + "' is " + j[key].dump() + ", expected a string");
  *out = j[key].get<std::string>();
  return Status::Ok();
}

Status string_list(const json& j, const char* key, const std::string& where, std::vector<std::string>* out) {
  if (!j.contains(key) || j[key].is_null()) return Status::Ok();
  const json& v = j[key];
  if (!v.is_array()) return invalid_model(where + ": '" + key + "' is " + v.dump() + ", expected a list of module names");
  for (const json& s : v) {
    if (!s.is_string()) return invalid_model(where + ": '" + key + "' holds " + s.dump() + ", expected module names");
    out->push_back(s.get<std::string>());
  }
  return Status::Ok();
}

// ModelOpt: quant_algo FP8 (any case; ModelOpt has written lowercase), from an object holding
// quant_algo / kv_cache_quant_algo and `ignore_key` (config.json: "ignore"; hf_quant_config.json:
// "exclude_modules").
StatusOr<Fp8CheckpointQuant> modelopt(const json& q, const std::string& where, const char* ignore_key) {
  std::string algo, kv;
  KILN_RETURN_IF_ERROR(string_field(q, "quant_algo", where, &algo));
  KILN_RETURN_IF_ERROR(string_field(q, "kv_cache_quant_algo", where, &kv));
  if (algo.empty()) return invalid_model(where + ": ModelOpt quantization without 'quant_algo'");
  if (upper(algo) != "FP8")
    return unsupported(where + ": ModelOpt quant_algo '" + algo +
                       "' is not read (FP8 — per-tensor E4M3 weights and static activation scales — is; "
                       "FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, NVFP4, W4A8_AWQ and the others are not)");
  Fp8CheckpointQuant r;
  r.format = Fp8CheckpointFormat::kModelOpt;
  r.source = where;
  r.kv_cache = kv;
  KILN_RETURN_IF_ERROR(string_list(q, ignore_key, where, &r.ignore));
  return r;
}

// One compressed-tensors quantization args object ("weights" / "input_activations") that must be
// 8-bit float, symmetric and static with one of `strategies`; returns its strategy.
StatusOr<std::string> ct_args(const json& a, const std::string& where, const std::vector<std::string>& strategies) {
  if (!a.is_object()) return invalid_model(where + " is " + a.dump() + ", expected an object");
  std::string type, strategy;
  KILN_RETURN_IF_ERROR(string_field(a, "type", where, &type));
  KILN_RETURN_IF_ERROR(string_field(a, "strategy", where, &strategy));
  const json nb = a.contains("num_bits") ? a["num_bits"] : json();
  if (!nb.is_number_integer() || nb.get<int64_t>() != 8 || type != "float")
    return unsupported(where + ": num_bits " + nb.dump() + ", type '" + type +
                       "' is not read (FP8 checkpoints are num_bits 8, type 'float')");
  if (a.contains("dynamic") && !a["dynamic"].is_null() && a["dynamic"] != false)
    return unsupported(where + ": dynamic " + a["dynamic"].dump() +
                       " (scales computed at run time, no input_scale) is not supported; Kiln reads static scales");
  if (a.contains("symmetric") && !a["symmetric"].is_null() && a["symmetric"] != true)
    return unsupported(where + ": asymmetric scales (zero points) are not supported");
  for (const char* k : {"group_size", "block_structure"})
    if (a.contains(k) && !a[k].is_null()) return unsupported(where + ": '" + k + "' " + a[k].dump() + " (block-wise scales) is not supported");
  if (std::find(strategies.begin(), strategies.end(), strategy) == strategies.end()) {
    std::string list;
    for (const std::string& s : strategies) list += (list.empty() ? "'" : ", '") + s + "'";
    return unsupported(where + ": strategy '" + strategy + "' is not supported (" + list + " is)");
  }
  return strategy;
}

StatusOr<Fp8CheckpointQuant> compressed_tensors(const json& q, const std::string& where) {
  std::string format;
  KILN_RETURN_IF_ERROR(string_field(q, "format", where, &format));
  if (!format.empty() && format != "float-quantized" && format != "naive-quantized")
    return unsupported(where + ": compressed-tensors format '" + format +
                       "' is not read (float-quantized and naive-quantized FP8 checkpoints are)");
  if (!q.contains("config_groups") || !q["config_groups"].is_object() || q["config_groups"].empty())
    return invalid_model(where + ": compressed-tensors quantization without a 'config_groups' object");
  Fp8CheckpointQuant r;
  r.format = Fp8CheckpointFormat::kCompressedTensors;
  r.source = where;
  std::string strategy;
  for (auto it = q["config_groups"].begin(); it != q["config_groups"].end(); ++it) {
    const std::string gw = where + ": config_groups." + it.key();
    const json& g = it.value();
    if (!g.is_object()) return invalid_model(gw + " is not an object");
    if (!g.contains("weights") || g["weights"].is_null()) return invalid_model(gw + " has no 'weights'");
    KILN_ASSIGN_OR_RETURN(std::string ws, ct_args(g["weights"], gw + ".weights", {"tensor", "channel"}));
    if (!g.contains("input_activations") || g["input_activations"].is_null())
      return unsupported(gw + ": no input_activations (weight-only FP8) is not supported; QuantLinear needs a static "
                              "input_scale");
    KILN_RETURN_IF_ERROR(ct_args(g["input_activations"], gw + ".input_activations", {"tensor"}).status());
    if (g.contains("output_activations") && !g["output_activations"].is_null())
      return unsupported(gw + ": output_activations quantization is not supported");
    if (!strategy.empty() && ws != strategy)
      return unsupported(where + ": config groups with weight strategies '" + strategy + "' and '" + ws +
                         "' are not supported (one strategy for the model is)");
    strategy = ws;
  }
  r.per_channel_weights = strategy == "channel";
  if (q.contains("kv_cache_scheme") && !q["kv_cache_scheme"].is_null()) r.kv_cache = q["kv_cache_scheme"].dump();
  KILN_RETURN_IF_ERROR(string_list(q, "ignore", where, &r.ignore));
  return r;
}

StatusOr<Fp8CheckpointQuant> auto_fp8(const json& q, const std::string& where) {
  std::string scheme;
  KILN_RETURN_IF_ERROR(string_field(q, "activation_scheme", where, &scheme));
  if (q.contains("weight_block_size") && !q["weight_block_size"].is_null())
    return unsupported(where + ": quant_method 'fp8' with weight_block_size " + q["weight_block_size"].dump() +
                       " (block-wise FP8, DeepSeek's) is not supported; per-tensor FP8 is");
  if (scheme != "static")
    return unsupported(where + ": quant_method 'fp8' with activation_scheme '" + scheme +
                       "' is not supported (static activation scales are read)");
  Fp8CheckpointQuant r;
  r.format = Fp8CheckpointFormat::kAutoFp8;
  r.source = where;
  KILN_RETURN_IF_ERROR(string_list(q, "ignored_layers", where, &r.ignore));
  return r;
}

StatusOr<json> object_of(const std::string& text, const std::string& where) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_model(where + ": not a JSON object");
  return j;
}

// The scalar / vector value count of a scale shape.
int64_t elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string where_tensor(const SafetensorsTensor& t) { return "tensor '" + t.name + "' in '" + t.file->path() + "'"; }

// A scale tensor's values as float32: dtype F32 / F16 / BF16, shape one of `shapes`, finite and > 0.
StatusOr<std::vector<float>> scale_values(const SafetensorsTensor& t, const std::vector<Shape>& shapes,
                                          const std::string& shapes_text) {
  if (t.dtype != DataType::kFloat32 && t.dtype != DataType::kFloat16 && t.dtype != DataType::kBFloat16)
    return invalid_model(where_tensor(t) + " has dtype " + safetensors_dtype_name(t.dtype) + "; scales are F32, F16 or BF16");
  if (std::find(shapes.begin(), shapes.end(), t.shape) == shapes.end())
    return invalid_model(where_tensor(t) + " has shape " + shape_str(t.shape) + ", expected " + shapes_text);
  std::vector<float> v(static_cast<size_t>(elements(t.shape)));
  const Tensor raw = t.to_tensor();
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>(load_as_double(t.dtype, raw.raw(), static_cast<int64_t>(i)));
    if (!std::isfinite(v[i]) || v[i] <= 0)
      return invalid_model(where_tensor(t) + " holds " + std::to_string(v[i]) + " at " + std::to_string(i) +
                           "; scales must be finite and > 0");
  }
  return v;
}

}  // namespace

const char* fp8_checkpoint_format_name(Fp8CheckpointFormat f) {
  switch (f) {
    case Fp8CheckpointFormat::kModelOpt: return "modelopt";
    case Fp8CheckpointFormat::kCompressedTensors: return "compressed-tensors";
    case Fp8CheckpointFormat::kAutoFp8: return "fp8";
  }
  return "";
}

std::string Fp8CheckpointQuant::describe() const {
  return std::string(fp8_checkpoint_format_name(format)) + ", per-" + (per_channel_weights ? "channel" : "tensor") +
         " weight scales, static per-tensor input scales (" + source + ")";
}

StatusOr<std::optional<Fp8CheckpointQuant>> parse_fp8_quantization(const std::string& config_json,
                                                                   const std::string& config_where,
                                                                   const std::string& hf_quant_json,
                                                                   const std::string& hf_quant_where) {
  std::optional<Fp8CheckpointQuant> from_config, from_hf;
  KILN_ASSIGN_OR_RETURN(json c, object_of(config_json, config_where));
  if (c.contains("quantization_config") && !c["quantization_config"].is_null()) {
    const std::string where = config_where + " quantization_config";
    const json& q = c["quantization_config"];
    if (!q.is_object()) return invalid_model(where + " is " + q.dump() + ", expected an object");
    std::string method;
    KILN_RETURN_IF_ERROR(string_field(q, "quant_method", where, &method));
    if (method == "modelopt") {
      if (q.contains("quantization") && q["quantization"].is_object()) {
        KILN_ASSIGN_OR_RETURN(from_config, modelopt(q["quantization"], config_where, "exclude_modules"));
      } else {
        KILN_ASSIGN_OR_RETURN(from_config, modelopt(q, config_where, "ignore"));
      }
    } else if (method == "compressed-tensors") {
      KILN_ASSIGN_OR_RETURN(from_config, compressed_tensors(q, config_where));
    } else if (method == "fp8") {
      KILN_ASSIGN_OR_RETURN(from_config, auto_fp8(q, config_where));
    } else {
      return unsupported(where + ": quant_method '" + method +
                         "' is not read; FP8 checkpoints of ModelOpt ('modelopt', quant_algo FP8), "
                         "compressed-tensors (FP8 weights, static per-tensor activations) and AutoFP8 ('fp8', "
                         "static) are");
    }
  }
  if (!hf_quant_json.empty()) {
    KILN_ASSIGN_OR_RETURN(json h, object_of(hf_quant_json, hf_quant_where));
    if (!h.contains("quantization") || !h["quantization"].is_object())
      return invalid_model(hf_quant_where + ": no 'quantization' object");
    KILN_ASSIGN_OR_RETURN(from_hf, modelopt(h["quantization"], hf_quant_where, "exclude_modules"));
  }
  if (from_config && from_hf && from_config->format != Fp8CheckpointFormat::kModelOpt)
    return invalid_model(config_where + " declares " + fp8_checkpoint_format_name(from_config->format) + " and " +
                         hf_quant_where + " ModelOpt quantization; expected one declaration");
  if (from_config) return from_config;  // config.json's wins (the two agree on FP8 when both are ModelOpt's)
  return from_hf;
}

StatusOr<std::optional<Fp8CheckpointQuant>> read_fp8_quantization(const std::string& dir) {
  const std::string config = dir + "/config.json", hf = dir + "/hf_quant_config.json";
  KILN_ASSIGN_OR_RETURN(std::string c, read_text_file(config));
  std::string h;
  struct stat st {};
  if (::stat(hf.c_str(), &st) == 0) {
    KILN_ASSIGN_OR_RETURN(h, read_text_file(hf));
    if (h.empty()) return invalid_model("'" + hf + "' is empty");
  }
  return parse_fp8_quantization(c, "'" + config + "'", h, "'" + hf + "'");
}

bool is_kv_cache_scale(const std::string& name) {
  if (name.rfind("model.layers.", 0) != 0) return false;
  for (const char* s : {".self_attn.k_scale", ".self_attn.v_scale", ".self_attn.kv_scale", ".self_attn.k_proj.k_scale",
                        ".self_attn.v_proj.v_scale"})
    if (ends_with(name, s)) return true;
  return false;
}

StatusOr<std::vector<std::pair<float, float>>> read_kv_cache_scales(
    const std::map<std::string, SafetensorsTensor>& tensors, int64_t num_layers) {
  std::vector<std::pair<float, float>> out;
  int64_t with = 0;
  std::string first_missing;
  for (int64_t l = 0; l < num_layers; ++l) {
    const std::string a = "model.layers." + std::to_string(l) + ".self_attn.";
    float kv[2] = {0, 0};
    bool found[2] = {false, false};
    for (int which = 0; which < 2; ++which) {
      const char* x = which == 0 ? "k" : "v";
      for (const std::string& name : {a + x + "_scale", a + x + "_proj." + x + "_scale", a + "kv_scale"}) {
        auto it = tensors.find(name);
        if (it == tensors.end()) continue;
        KILN_ASSIGN_OR_RETURN(std::vector<float> v,
                              scale_values(it->second, {Shape{}, Shape{1}}, "[] or [1] (a per-layer KV-cache scale)"));
        kv[which] = v[0];
        found[which] = true;
        break;
      }
    }
    if (found[0] != found[1])
      return invalid_model("layer " + std::to_string(l) + " carries an FP8 KV-cache scale for " +
                           (found[0] ? "K but not V" : "V but not K") + " (" + a + (found[0] ? "v_scale" : "k_scale") +
                           " or its other names)");
    if (!found[0]) {
      if (first_missing.empty()) first_missing = a + "k_scale";
      out.emplace_back(1.f, 1.f);
      continue;
    }
    ++with;
    out.emplace_back(kv[0], kv[1]);
  }
  if (with == 0) return std::vector<std::pair<float, float>>{};
  if (with != num_layers)
    return invalid_model(std::to_string(with) + " of " + std::to_string(num_layers) +
                         " layers carry FP8 KV-cache scales; '" + first_missing + "' (or its other names) is missing");
  return out;
}

std::string fp8_scale_module(const std::string& name) {
  for (const char* s : {".weight_scale", ".input_scale"})
    if (ends_with(name, s)) return name.substr(0, name.size() - std::string(s).size());
  return "";
}

StatusOr<Fp8Linear> read_fp8_linear(const std::string& module, const std::map<std::string, SafetensorsTensor>& tensors,
                                    const Fp8CheckpointQuant& q) {
  auto it = tensors.find(module + ".weight");
  if (it == tensors.end()) return invalid_model("FP8 weight '" + module + ".weight' is missing");
  const SafetensorsTensor& w = it->second;
  if (w.dtype != DataType::kFloat8E4M3FN || w.shape.size() != 2)
    return invalid_model(where_tensor(w) + " is " + safetensors_dtype_name(w.dtype) + " " + shape_str(w.shape) +
                         ", expected a 2-D F8_E4M3 weight [out, in]");
  const int64_t N = w.shape[0];
  auto find = [&](const std::string& what) -> StatusOr<const SafetensorsTensor*> {
    auto s = tensors.find(module + "." + what);
    if (s == tensors.end())
      return invalid_model(where_tensor(w) + " is F8_E4M3 (" + fp8_checkpoint_format_name(q.format) +
                           " checkpoint) but its " + what + " '" + module + "." + what + "' is missing");
    return &s->second;
  };
  KILN_ASSIGN_OR_RETURN(const SafetensorsTensor* ws, find("weight_scale"));
  KILN_ASSIGN_OR_RETURN(const SafetensorsTensor* xs, find("input_scale"));
  const std::vector<Shape> scalar = {Shape{}, Shape{1}};
  const std::vector<Shape> column = {Shape{N, 1}, Shape{N}};
  KILN_ASSIGN_OR_RETURN(std::vector<float> wv, q.per_channel_weights ? scale_values(*ws, column, "[" + std::to_string(N) + ",1] (per channel)")
                                                                    : scale_values(*ws, scalar, "[] or [1] (per tensor)"));
  KILN_ASSIGN_OR_RETURN(std::vector<float> xv, scale_values(*xs, scalar, "[] or [1] (a static per-tensor input scale)"));
  Fp8Linear r;
  r.w = w.to_tensor();
  r.w_scale = Tensor(DataType::kFloat32, {N});
  float* s = r.w_scale.data<float>();
  for (int64_t n = 0; n < N; ++n) s[n] = wv.size() == 1 ? wv[0] : wv[static_cast<size_t>(n)];
  r.per_tensor = std::all_of(s, s + N, [&](float v) { return v == s[0]; });
  r.x_scale = xv[0];
  return r;
}

StatusOr<Tensor> dequantize_fp8_linear(const Fp8Linear& l, const std::string& what) {
  const int64_t N = l.w.dim(0), K = l.w.dim(1);
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::allocate(DataType::kFloat32, {N, K}, what));
  const uint8_t* src = l.w.data<uint8_t>();
  const float* scale = l.w_scale.data<float>();
  float* dst = out.data<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) dst[n * K + k] = fp8e4m3fn_to_float(src[n * K + k]) * scale[n];
  return out;
}

Tensor requantize_fp8_e4m3(const Tensor& w, float from, float to) {
  if (from == to) return w;
  Tensor out(DataType::kFloat8E4M3FN, w.shape());
  const uint8_t* src = w.data<uint8_t>();
  uint8_t* dst = out.data<uint8_t>();
  const double ratio = static_cast<double>(from) / static_cast<double>(to);
  for (int64_t i = 0; i < w.numel(); ++i)
    dst[i] = double_to_fp8e4m3fn(static_cast<double>(fp8e4m3fn_to_float(src[i])) * ratio, /*saturate=*/true);
  return out;
}

int share_fp8_input(const std::vector<Fp8Linear*>& group, bool one_weight_scale) {
  float x_scale = 0, w_max = 0;
  bool per_tensor = true;
  for (const Fp8Linear* l : group) {
    x_scale = std::max(x_scale, l->x_scale);
    per_tensor &= l->per_tensor;
    if (l->w_scale.numel() > 0) w_max = std::max(w_max, l->w_scale.data<float>()[0]);
  }
  int requantized = 0;
  for (Fp8Linear* l : group) {
    l->x_scale = x_scale;
    if (!one_weight_scale || !per_tensor || l->w_scale.numel() == 0) continue;
    const float s = l->w_scale.data<float>()[0];
    if (s == w_max) continue;
    l->w = requantize_fp8_e4m3(l->w, s, w_max);
    Tensor scale(DataType::kFloat32, {l->w_scale.numel()});
    std::fill(scale.data<float>(), scale.data<float>() + scale.numel(), w_max);
    l->w_scale = std::move(scale);
    ++requantized;
  }
  return requantized;
}

}  // namespace kiln::llm
