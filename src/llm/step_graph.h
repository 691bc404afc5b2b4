// One forward step of a decoder-only language model for a batch of sequences whose tokens are
// PACKED along one dim T, over a paged KV cache (issue 13; docs/decisions/0059-llm-paged-step-graph.md).
// A step mixes prefill chunks and decode tokens of any sequences (in-flight batching); only T varies,
// and a runner pads it to a bucket with padding tokens (token_seq -1). The KV cache is a pool of
// fixed-size blocks owned by the caller and passed by address; every layer's PagedAttention node
// appends the step's K/V to it in place and attends over it. The graph holds no state.
//
// Inputs, in this order (T tokens, symbolic dim "tokens"; everything else static):
//   input_ids     int64 [T]        token ids (< vocab_size; padding tokens too: e.g. 0)
//   position_ids  int64 [T]        absolute position of each token in its sequence (padding: a
//                                  valid position, e.g. 0: GPT-2 still looks it up in wpe)
//   token_seq     int32 [T]        block-table row of each token's sequence; -1 = padding token
//   block_table   int32 [R, MB]    row r: pool block ids of sequence r (R = max_rows,
//                                  MB = max_blocks_per_seq); position p lives in block
//                                  block_table[r][p / block_size], slot p % block_size
//   kv_pools      int64 [L, 2]     per layer: (pool address, num_blocks); layer l's pool is
//                                  [num_blocks, 2 (K, V), num_kv_heads, block_size, head_dim]
//                                  row-major in cache_dtype (host memory for a CPU plan, device
//                                  memory for a CUDA plan)
//   logit_rows    int64 [R]        index into the T packed tokens of the token whose logits each
//                                  row wants (padding rows may point at token 0)
// Outputs, in this order:
//   logits        float32 [R, vocab] = lm_head(final_norm(hidden[logit_rows]))
//   next_tokens   int64 [R]          = ArgMax(logits, axis 1, keepdims 0): each row's greedy token,
//                                      the lowest id among equal maxima (torch.argmax, Sampler's
//                                      greedy); lets a runner copy R ids instead of R x vocab logits
//                                      (plans built before it lack it: runners then read logits)
// Layers: the decoder graph's (decoder_graph.h, decoder_layers.h: GPT-2, Llama, Mistral, Qwen2),
// with hidden states [T, D], heads [T, H, head_dim], RoPE angles from position_ids [T], and
// attention through PagedAttention (ops.def) instead of Concat + Attention.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ir/graph.h"
#include "kiln/status.h"
#include "llm/checkpoint.h"
#include "llm/model_config.h"

namespace kiln::llm {

struct StepGraphOptions {
  int64_t max_rows = 1;            // R: sequences a step may hold (block_table and logits rows)
  int64_t max_blocks_per_seq = 1;  // MB: block_table columns (a sequence's length <= MB · block_size)
  int64_t block_size = 32;         // tokens per pool block
  std::string cache_dtype = "float32";  // the pool's elements: "float32", "float16", "bfloat16", "fp8e4m3fn"
  // fp8e4m3fn pools: per layer (K scale, V scale), each finite > 0 — the pool stores E4M3(x /
  // scale) (PagedAttention, ops.def). Calibrated: amax / 448 of the layer's keys (after RoPE) and
  // values (fp8_calibration.h); empty: 1 for every layer (TensorRT-LLM's default without a
  // calibrated kv_cache_scaling_factor). Otherwise one entry per decoder layer.
  std::vector<std::pair<float, float>> kv_scales;
  // FP8 projections (issue 13 item 3; decision 0059, addendum "FP8 projections"). Empty: every
  // linear layer a float MatMul. Otherwise one entry per projection of decoder_projections(config)
  // (decoder_layers.h: q/k/v/o, gate/up/down, GPT-2's c_attn/c_proj/c_fc/c_proj; never the
  // embedding or lm_head): projection name -> x_scale, the per-tensor scale of its input (float32,
  // finite, > 0; calibrated: amax / 448, llm/fp8_calibration.h). Each projection is then emitted as
  // QuantLinear (ops.def, decision 0055): X quantized to E4M3FN with x_scale, the weight stored
  // as E4M3FN [N, K] with a per-output-channel w_scale = amax_row / 448 (quantize_weight_fp8),
  // the sum in float32, the bias (GPT-2, Qwen2 q/k/v) added in float.
  std::map<std::string, float> fp8_x_scales;
  // With fp8_x_scales: one weight scale per tensor instead (amax / 448, shared by the projections
  // of one input — q/k/v, gate/up — so their fused layer keeps one scalar scale; quantize_weight_fp8),
  // ModelOpt's FP8 recipe and the form cuBLASLt's fused FP8 GEMM runs on Hopper (decision 0085).
  bool fp8_per_tensor_weights = false;
  // FP8 checkpoints (Checkpoint::fp8_quantization(): ModelOpt, compressed-tensors, AutoFP8;
  // fp8_checkpoint.h, decision 0086). true: every projection whose weight the checkpoint stores as
  // F8_E4M3 is a QuantLinear of that weight as stored ([out, in] = QuantLinear's [N, K]), w_scale
  // = weight_scale broadcast to [N] (or its per-channel column) and x_scale = input_scale, no
  // calibration; q/k/v and gate/up each take their group's largest input_scale (one quantization of
  // their shared input). With fp8_per_tensor_weights, per-tensor weight scales that differ within
  // such a group are requantized to the group's largest (share_fp8_input), so the fused layer
  // keeps one scalar scale (cuBLASLt's fused FP8 GEMM); without, every weight keeps its stored
  // codes and scale (exact; the fused layer's w_scale varies by member). fp8_x_scales must then
  // be empty. false: those weights are dequantized to float32
  // (W = fp8 · weight_scale) and the graph is the float one (or fp8_x_scales' calibrated one).
  // No effect on float checkpoints; lm_head stays float either way.
  bool checkpoint_fp8 = true;
};

inline constexpr const char* kStepInputIdsName = "input_ids";
inline constexpr const char* kStepPositionIdsName = "position_ids";
inline constexpr const char* kStepTokenSeqName = "token_seq";
inline constexpr const char* kStepBlockTableName = "block_table";
inline constexpr const char* kStepKvPoolsName = "kv_pools";
inline constexpr const char* kStepLogitRowsName = "logit_rows";
inline constexpr const char* kStepLogitsName = "logits";
inline constexpr const char* kStepNextTokensName = "next_tokens";
inline constexpr const char* kStepTokensDim = "tokens";  // the symbolic dim T

// Elements of one layer's pool block: 2 · num_kv_heads · block_size · head_dim (times the
// cache_dtype's size for bytes).
int64_t kv_block_elements(const ModelConfig& config, int64_t block_size);

// Builds the step graph of `config` with the weights of `checkpoint` (checked against config's
// spec first). InvalidArgument naming the option for max_rows, max_blocks_per_seq or block_size
// < 1 or a cache_dtype other than float32 / float16 / bfloat16; InvalidArgument for fp8_x_scales
// that lack a projection, name something that is not one, hold a scale that is not finite and
// > 0, or for a projection whose K or N is not a multiple of 16 (the 8-bit GEMMs' alignment,
// decision 0055), naming the projection — also for a checkpoint's FP8 projections under
// checkpoint_fp8, and fp8_x_scales given with them; Unsupported as build_decoder_graph
// for activations and RoPE types the layers do not implement. The graph passes ir::verify.
StatusOr<ir::Graph> build_step_graph(const ModelConfig& config, const Checkpoint& checkpoint,
                                     const StepGraphOptions& options);

}  // namespace kiln::llm
