// FP8 checkpoints (issue 13 item 3; docs/decisions/0086-fp8-checkpoint-scales.md): Hugging Face
// safetensors checkpoints whose linear layers are stored in E4M3FN with their scales, as NVIDIA
// ModelOpt, llm-compressor (compressed-tensors) and AutoFP8 export them. Each quantized nn.Linear
// X holds X.weight F8_E4M3 [out, in], X.weight_scale (one value, or one per output channel) and
// X.input_scale (one value: the static activation scale), with W = fp8 · weight_scale and
// x_q = E4M3(x / input_scale) — exactly Kiln's QuantLinear (ops.def: W [N, K], w_scale [N],
// x_scale). Declarations read (the first one found):
//   config.json "quantization_config":
//     {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo"?, "ignore"?}
//       (or the same fields under "quantization", as hf_quant_config.json nests them)
//     {"quant_method": "compressed-tensors", "format"?: "float-quantized" | "naive-quantized",
//      "config_groups": {G: {"weights": {"num_bits": 8, "type": "float",
//                                        "strategy": "tensor" | "channel", "dynamic": false},
//                            "input_activations": {"num_bits": 8, "type": "float",
//                                                  "strategy": "tensor", "dynamic": false}}},
//      "ignore"?, "kv_cache_scheme"?}
//     {"quant_method": "fp8", "activation_scheme": "static"} (AutoFP8; no weight_block_size)
//   hf_quant_config.json (ModelOpt's older export): {"quantization": {"quant_algo": "FP8",
//     "kv_cache_quant_algo"?, "exclude_modules"?}}; when both files declare, they must agree.
// Which modules are quantized is read from the weights' dtypes (F8_E4M3 or float), not matched
// against the ignore / exclude lists (which may hold regexes or globs); FP8 KV-cache scales
// (self_attn.{k,v,kv}_scale, self_attn.{k,v}_proj.{k,v}_scale) are read by read_kv_cache_scales
// for an FP8 KV cache (kiln build-llm --kv-cache fp8) and ignored otherwise.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"
#include "llm/safetensors.h"

namespace kiln::llm {

enum class Fp8CheckpointFormat : uint8_t {
  kModelOpt,           // quant_method "modelopt" / hf_quant_config.json, quant_algo FP8
  kCompressedTensors,  // quant_method "compressed-tensors", float 8-bit weights and static activations
  kAutoFp8,            // quant_method "fp8", activation_scheme "static"
};
const char* fp8_checkpoint_format_name(Fp8CheckpointFormat f);  // "modelopt", "compressed-tensors", "fp8"

struct Fp8CheckpointQuant {
  Fp8CheckpointFormat format = Fp8CheckpointFormat::kModelOpt;
  // Weight scales: one per output channel (compressed-tensors strategy "channel": weight_scale
  // [out, 1]) or one per tensor (every other format: weight_scale [] or [1]).
  bool per_channel_weights = false;
  std::string source;              // the file that declared it (config.json or hf_quant_config.json)
  std::string kv_cache;            // the declared KV-cache quantization, "" if none (not applied)
  std::vector<std::string> ignore; // modules the declaration leaves unquantized, as written
  // "modelopt, per-tensor weight scales (DIR/config.json)": what kiln_llm.json's quant_scales says.
  std::string describe() const;
};

// The FP8 quantization declared by config.json's text (`config_where` names it) and
// hf_quant_config.json's ("" when the file is absent). nullopt for a float checkpoint (no
// quantization_config, or null). Unsupported, naming the file and what it found, for any other
// quantization: another quant_method (AWQ, GPTQ, bitsandbytes, fbgemm_fp8, ...), another ModelOpt
// quant_algo (NVFP4, FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, W4A8_AWQ, ...), block-wise FP8
// (weight_block_size, DeepSeek's), dynamic or absent activation scales (per token, "dynamic":
// true, weight-only), integer or non-8-bit types, group / block strategies, asymmetric scales.
// InvalidModel for malformed fields (wrong JSON types, empty config_groups, disagreeing files).
StatusOr<std::optional<Fp8CheckpointQuant>> parse_fp8_quantization(const std::string& config_json,
                                                                   const std::string& config_where,
                                                                   const std::string& hf_quant_json,
                                                                   const std::string& hf_quant_where);
// The same for a model directory: DIR/config.json and DIR/hf_quant_config.json when present.
StatusOr<std::optional<Fp8CheckpointQuant>> read_fp8_quantization(const std::string& dir);

// An FP8 KV cache's scale tensor: model.layers.N.self_attn.{k_scale, v_scale, kv_scale}
// (compressed-tensors / vLLM, kv_scale: older exports, one scale for both) or
// .self_attn.k_proj.k_scale / .v_proj.v_scale (ModelOpt).
bool is_kv_cache_scale(const std::string& name);
// The FP8 KV-cache scales `tensors` carry, per layer (K scale, V scale): the cache stores
// E4M3(x / scale) of the keys after RoPE and of the values (vLLM's and TensorRT-LLM's
// kv_cache_scaling_factor; Kiln's PagedAttention k_scale / v_scale, decision 0088). Per layer the
// first present of self_attn.k_scale, self_attn.k_proj.k_scale, self_attn.kv_scale (and the same
// for V), each [] or [1] in F32, F16 or BF16, finite and > 0. Empty when no layer carries any;
// InvalidModel naming the tensor and file for a bad one, and naming the layer when only some
// layers (or only K or only V of a layer) carry them.
StatusOr<std::vector<std::pair<float, float>>> read_kv_cache_scales(
    const std::map<std::string, SafetensorsTensor>& tensors, int64_t num_layers);
// "X.weight_scale" / "X.input_scale" -> "X"; "" for other names.
std::string fp8_scale_module(const std::string& name);

// One FP8 linear layer as QuantLinear takes it.
struct Fp8Linear {
  Tensor w;                 // [N, K] float8e4m3fn: the file's bytes (or requantized ones)
  Tensor w_scale;           // [N] float32: weight_scale broadcast (per tensor) or its column
  float x_scale = 0;        // input_scale
  bool per_tensor = true;   // every w_scale entry is one value
};
// Reads the FP8 linear module `module` from `tensors`: module.weight F8_E4M3 [out, in],
// module.weight_scale [] or [1] (per tensor) or [out, 1] / [out] (per channel, as `q` declares),
// module.input_scale [] or [1], the scales F32, F16 or BF16 with every value finite and > 0.
// InvalidModel naming the tensor and its file (a missing scale: its name and the weight's file)
// otherwise. The weight wraps the file's mapping (no copy); checkpoint checks call this too.
StatusOr<Fp8Linear> read_fp8_linear(const std::string& module, const std::map<std::string, SafetensorsTensor>& tensors,
                                    const Fp8CheckpointQuant& q);
// W = fp8 · w_scale[n], float32 [N, K] (the nn.Linear layout); `what` names it in an allocation error.
StatusOr<Tensor> dequantize_fp8_linear(const Fp8Linear& l, const std::string& what);

// w [N, K] float8e4m3fn stored with scale `from`, re-expressed with scale `to` >= from:
// E4M3FN(value(w) · from / to), core double_to_fp8e4m3fn (round to nearest even, saturating).
// Codes are unchanged when from == to. TensorRT-LLM and vLLM do the same to fuse Q/K/V.
Tensor requantize_fp8_e4m3(const Tensor& w, float from, float to);
// The layers of one group read one input (q/k/v; gate/up), which QuantLinear's fused layer
// quantizes once: every member gets the group's largest x_scale. With `one_weight_scale`, when
// all members have per-tensor weight scales that differ, each weight is also requantized to the
// largest (requantize_fp8_e4m3) so the fused layer keeps one scalar weight scale (cuBLASLt's fused
// FP8 GEMM on Hopper, decision 0085); otherwise (and for per-channel members) the weights and
// scales stay as stored. Returns how many weights were requantized.
int share_fp8_input(const std::vector<Fp8Linear*>& group, bool one_weight_scale);

}  // namespace kiln::llm
