// The tensors each architecture's checkpoint must hold, their shapes from the config, and the
// check of a checkpoint's tensors against them. Names and layouts are transformers' (the
// modeling_gpt2 / modeling_llama / modeling_mistral / modeling_qwen2 state dicts):
//   GPT-2  [transformer.]wte [V,D], wpe [P,D], h.N.ln_1.{weight,bias} [D],
//          h.N.attn.c_attn.{weight [D,3D], bias [3D]} (Conv1D: weight is [in, out]),
//          h.N.attn.c_proj [D,D]+[D], h.N.ln_2 [D], h.N.mlp.c_fc [D,I]+[I], h.N.mlp.c_proj [I,D]+[D],
//          ln_f [D]; lm_head.weight [V,D] optional when tied (the default).
//   Llama/Mistral/Qwen2  model.embed_tokens [V,D], model.layers.N.input_layernorm [D],
//          self_attn.q_proj [H·hd, D], k_proj/v_proj [KV·hd, D], o_proj [D, H·hd] (nn.Linear:
//          weight is [out, in]) with q/k/v biases for Qwen2 (and Llama's attention_bias, which
//          adds o_proj's), post_attention_layernorm [D], mlp.gate_proj/up_proj [I,D],
//          mlp.down_proj [D,I] (+ biases with Llama's mlp_bias), model.norm [D],
//          lm_head.weight [V,D] unless tie_word_embeddings.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "llm/fp8_checkpoint.h"
#include "llm/model_config.h"
#include "llm/safetensors.h"

namespace kiln::llm {

struct ExpectedWeight {
  std::string name;
  Shape shape;
  bool required = true;  // false: may be absent (a tied lm_head), checked when present
};

// `prefix` is prepended to GPT-2's names ("" or "transformer."); the Llama family ignores it.
std::vector<ExpectedWeight> expected_weights(const ModelConfig& config, const std::string& prefix);

// Tensors a checkpoint may carry that are no weights and are ignored: GPT-2's causal-mask
// buffers (h.N.attn.bias, h.N.attn.masked_bias) and older Llama exports' rotary inv_freq.
bool is_ignored_buffer(const ModelConfig& config, const std::string& name);

// Checks `tensors` (name -> tensor; each knows its file) against the spec: every required
// weight present, no tensor outside the spec and the ignored buffers, shapes equal, dtypes
// F32/F16/BF16. With `fp8` (the checkpoint's FP8 declaration, fp8_checkpoint.h; Llama family
// only — GPT-2 is Unsupported) a linear layer's weight (the *_proj.weight projections and
// lm_head.weight) may also be F8_E4M3, when its weight_scale and input_scale pass
// read_fp8_linear's checks; those scales and FP8 KV-cache scales are then expected tensors, and a
// declaration without any F8_E4M3 weight is InvalidModel. Without it, or for other weights, FP8
// and integer dtypes are Unsupported. `where` names the checkpoint directory in errors; each
// error also names the tensor and file.
Status check_weights(const ModelConfig& config, const std::string& prefix,
                     const std::map<std::string, SafetensorsTensor>& tensors, const std::string& where,
                     const Fp8CheckpointQuant* fp8 = nullptr);

}  // namespace kiln::llm
