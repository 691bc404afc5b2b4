// Tiny FP8 checkpoints for the tests of src/llm/fp8_checkpoint.h (decision 0086): a random float
// Llama-family checkpoint (random_checkpoint.h) quantized here as ModelOpt or llm-compressor
// would export it — each projection X.weight [out, in] as F8_E4M3 codes E4M3FN(W / s) with
// per-tensor s = amax / 448 (or per output channel), X.weight_scale = s, X.input_scale given —
// with config.json's quantization_config (or ModelOpt's hf_quant_config.json) declaring it.
#pragma once

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/numerics.h"
#include "llm/decoder_layers.h"
#include "llm/fp8_calibration.h"
#include "llm/random_checkpoint.h"

namespace kiln::llm::testing {

struct Fp8Export {
  // "modelopt" (config.json quantization_config), "modelopt-hf" (hf_quant_config.json only),
  // "compressed-tensors" or "autofp8".
  std::string format = "modelopt";
  bool per_channel = false;               // compressed-tensors strategy "channel": weight_scale [out, 1]
  std::set<std::string> float_modules;    // projections left float (listed in the ignore list)
  std::string dtype = "F32";              // the float tensors' dtype
  bool kv_scales = false;                 // also write k_scale (0.5) / v_scale (0.25) tensors (ModelOpt's names)
};

// One quantized projection as written: its codes and scales (for the tests' expectations).
struct Fp8Written {
  std::string codes;             // [out, in] E4M3FN bytes
  std::vector<float> w_scale;    // 1 (per tensor) or out values
  float x_scale = 0;
};

inline nlohmann::json fp8_quantization_config(const Fp8Export& x) {
  using nlohmann::json;
  json ignore = json::array({"lm_head"});
  for (const std::string& m : x.float_modules) ignore.push_back(m);
  if (x.format == "compressed-tensors") {
    json args = {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"dynamic", false}, {"group_size", nullptr},
                 {"strategy", x.per_channel ? "channel" : "tensor"}, {"observer", "minmax"}};
    json in = args;
    in["strategy"] = "tensor";
    return {{"quant_method", "compressed-tensors"},
            {"format", "float-quantized"},
            {"quantization_status", "compressed"},
            {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", args}, {"input_activations", in},
                                            {"output_activations", nullptr}}}}},
            {"ignore", ignore},
            {"kv_cache_scheme", nullptr}};
  }
  if (x.format == "autofp8") return {{"quant_method", "fp8"}, {"activation_scheme", "static"}, {"ignored_layers", ignore}};
  return {{"quant_method", "modelopt"}, {"quant_algo", "FP8"}, {"kv_cache_quant_algo", nullptr}, {"ignore", ignore}};
}

// Input scales per checkpoint module: calibrate_fp8's x_scale of `float_ck` times a factor per
// projection kind, so the q/k/v and gate/up groups carry different scales (their maximum is what
// Kiln uses): q 1, k 1.25, v 1.1, o 1, gate 1, up 1.5, down 1.
inline std::map<std::string, float> fp8_input_scales(const Checkpoint& float_ck) {
  const std::vector<int32_t> ids = {1, 9, 23, 4, 17, 33, 2, 40, 11, 7, 29, 5, 38, 13, 21, 3, 30, 8, 26, 15};
  auto cal = calibrate_fp8(float_ck, ids);
  EXPECT_TRUE(cal.ok()) << cal.status().to_string();
  std::map<std::string, float> out;
  if (!cal.ok()) return out;
  const std::map<std::string, float> factor = {{"q_proj", 1.f},    {"k_proj", 1.25f}, {"v_proj", 1.1f}, {"o_proj", 1.f},
                                               {"gate_proj", 1.f}, {"up_proj", 1.5f}, {"down_proj", 1.f}};
  for (const Projection& p : decoder_projections(float_ck.config()))
    out[p.module] = cal->x_scales.at(p.name) * factor.at(p.name.substr(p.name.rfind('.') + 1));
  return out;
}

// The checkpoint's tensors with every projection of `input_scales` quantized; `written` gets what
// was written per module.
inline std::vector<StTensor> fp8_tensors(const std::vector<FloatWeight>& weights, const std::map<std::string, float>& input_scales,
                                         const Fp8Export& x, std::map<std::string, Fp8Written>* written = nullptr) {
  std::vector<StTensor> out;
  auto f32 = [](const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
    return StTensor{name, "F32", std::move(shape), std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4)};
  };
  for (const FloatWeight& w : weights) {
    const std::string module = ends_with(w.name, ".weight") ? w.name.substr(0, w.name.size() - 7) : "";
    auto in = input_scales.find(module);
    if (in == input_scales.end() || x.float_modules.count(module)) {
      out.push_back(encode(w, x.dtype));
      continue;
    }
    const int64_t N = w.shape[0], K = w.shape[1];
    Fp8Written q;
    q.x_scale = in->second;
    std::vector<double> amax(static_cast<size_t>(N), 0.0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) amax[n] = std::max(amax[n], static_cast<double>(std::fabs(w.values[n * K + k])));
    if (!x.per_channel) {
      const double m = *std::max_element(amax.begin(), amax.end());
      amax.assign(1, m);
    }
    for (double a : amax) q.w_scale.push_back(static_cast<float>(a / 448.0));
    q.codes.resize(static_cast<size_t>(N * K));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const float s = q.w_scale[x.per_channel ? n : 0];
        q.codes[n * K + k] = static_cast<char>(double_to_fp8e4m3fn(static_cast<double>(w.values[n * K + k]) / s));
      }
    out.push_back({w.name, "F8_E4M3", w.shape, q.codes});
    if (x.per_channel)
      out.push_back(f32(module + ".weight_scale", {N, 1}, q.w_scale));
    else
      out.push_back(f32(module + ".weight_scale", x.format == "compressed-tensors" ? std::vector<int64_t>{1} : std::vector<int64_t>{},
                        q.w_scale));
    out.push_back(f32(module + ".input_scale", {}, {q.x_scale}));
    if (x.kv_scales && ends_with(module, ".k_proj")) out.push_back(f32(module + ".k_scale", {}, {0.5f}));
    if (x.kv_scales && ends_with(module, ".v_proj")) out.push_back(f32(module + ".v_scale", {}, {0.25f}));
    if (written) (*written)[module] = std::move(q);
  }
  return out;
}

// Writes the FP8 checkpoint into `dir`: config.json (with quantization_config unless the format is
// "modelopt-hf", which writes hf_quant_config.json instead) and model.safetensors.
inline void write_fp8_checkpoint(const std::string& dir, const std::string& config_json, const std::vector<StTensor>& tensors,
                                 const Fp8Export& x) {
  std::filesystem::create_directories(dir);
  nlohmann::json c = nlohmann::json::parse(config_json);
  if (x.format == "modelopt-hf") {
    nlohmann::json ex = nlohmann::json::array({"lm_head"});
    for (const std::string& m : x.float_modules) ex.push_back(m);
    write_file(dir + "/hf_quant_config.json",
               nlohmann::json{{"producer", {{"name", "modelopt"}, {"version", "0.19.0"}}},
                              {"quantization", {{"quant_algo", "FP8"}, {"kv_cache_quant_algo", "FP8"}, {"exclude_modules", ex}}}}
                   .dump());
  } else {
    c["quantization_config"] = fp8_quantization_config(x);
  }
  write_file(dir + "/config.json", c.dump());
  write_file(dir + "/model.safetensors", st_file(tensors));
}

}  // namespace kiln::llm::testing
