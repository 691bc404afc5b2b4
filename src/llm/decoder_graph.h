// One forward step of a decoder-only language model as a Kiln graph (issue 13, CPU reference
// slice; docs/decisions/0053-llm-decoder-graph.md). The same graph serves the prefill (S = prompt
// length, P = 0) and every decode step (S = 1, P = tokens so far): the KV cache enters as inputs
// and leaves as outputs, so the graph holds no state.
//
// Inputs, in this order (B batch, S new tokens, P cached tokens; dims are symbolic):
//   input_ids      int64   [B, S]     token ids (< vocab_size)
//   position_ids   int64   [B, S]     absolute positions (P, ..., P + S - 1 for a plain sequence)
//   past_key.L     float32 [B, KV, P, head_dim]   for each layer L = 0 .. num_layers-1, then
//   past_value.L   float32 [B, KV, P, head_dim]   (keys already rotated by RoPE; P may be 0)
// Outputs, in this order:
//   logits         float32 [B, S, vocab]   ([B, 1, vocab] with DecoderGraphOptions::all_logits off)
//   present_key.L, present_value.L  float32 [B, KV, P + S, head_dim]: past ++ new, along dim 2
// Layout of a layer (transformers' modeling_gpt2.py / modeling_llama.py / modeling_qwen2.py):
//   GPT-2:  x += c_proj(Attn(split(c_attn(LayerNorm1(x)))));  x += c_proj(GeluTanh(c_fc(LayerNorm2(x))))
//           with x = wte[ids] + wpe[positions] first; Conv1D weights are [in, out] as stored.
//   Llama / Mistral / Qwen2:  x += o_proj(Attn(RoPE(q_proj(h)), RoPE(k_proj(h)), v_proj(h))), h = RMSNorm(x);
//           x += down_proj(silu(gate_proj(h)) * up_proj(h)), h = RMSNorm(x); nn.Linear weights
//           [out, in] are stored transposed to [in, out]; q/k/v biases when the config has them.
//   Attn = Kiln's Attention op (ops.def): causal with the past counted (key j is hidden from new
//   token i when j > i + P), grouped-query (query head h reads kv head h / (heads / kv_heads)),
//   scale 1/sqrt(head_dim). Then the final norm and lm_head (the embedding when tied).
// Weights are constant values converted once from the checkpoint's F16/BF16 to float32 (F32
// weights that need no transpose stay in the file's mapping, uncopied).
// The layers are emitted by decoder_layers.h, shared with the paged, packed-token step graph
// (step_graph.h, docs/decisions/0059), which serves batches; this graph stays the CPU reference.
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"
#include "kiln/status.h"
#include "llm/checkpoint.h"
#include "llm/model_config.h"

namespace kiln::llm {

struct DecoderGraphOptions {
  // true: logits for every new position, [B, S, vocab] (tests compare them all); false: only
  // the last position's, [B, 1, vocab] (generation: saves S - 1 lm_head rows per prefill).
  bool all_logits = true;
};

inline constexpr const char* kInputIdsName = "input_ids";
inline constexpr const char* kPositionIdsName = "position_ids";
inline constexpr const char* kLogitsName = "logits";
std::string past_key_name(int64_t layer);       // "past_key.L"
std::string past_value_name(int64_t layer);     // "past_value.L"
std::string present_key_name(int64_t layer);    // "present_key.L"
std::string present_value_name(int64_t layer);  // "present_value.L"

// Builds the forward-step graph of `config` with the weights of `checkpoint` (normally
// checkpoint.config(); the weights are checked against `config`'s spec first). Unsupported names the
// config field for what the graph does not implement: an activation other than gelu_new /
// gelu_pytorch_tanh / gelu_fast / gelu / relu / silu / swish, or dynamic RoPE is accepted only
// as its unscaled form (which transformers uses up to max_position_embeddings). A weight that
// cannot be converted is the checkpoint's error naming the tensor. The graph passes ir::verify.
StatusOr<ir::Graph> build_decoder_graph(const ModelConfig& config, const Checkpoint& checkpoint,
                                       const DecoderGraphOptions& options = {});

// The graph built with all_logits off, turned into its all-positions form by bypassing the
// last-position Slice; the constant weights are shared with `last_only` (no copy). Used by the
// runner to hold both forms for the price of one set of weights. InvalidArgument if `last_only`
// has no last-position Slice.
StatusOr<ir::Graph> with_all_logits(const ir::Graph& last_only);

// The RoPE rotation alone, as the decoder graph emits it (for tests): inputs x float32
// [B, H, S, head_dim] and position_ids int64 [B, S]; output y of x's shape with
//   y[j]        = x[j] cos(p·f_j) - x[j + d/2] sin(p·f_j)
//   y[j + d/2]  = x[j + d/2] cos(p·f_j) + x[j] sin(p·f_j),   j < d/2, f = rope_inv_freq(config.rope)
// (transformers' apply_rotary_pos_emb with rotate_half; angles p·f_j computed in float32 as there).
StatusOr<ir::Graph> build_rope_graph(const ModelConfig& config);

}  // namespace kiln::llm
