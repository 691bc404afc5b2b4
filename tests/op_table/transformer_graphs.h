// Graphs of the transformer rows, shared with the tests that check something else about them
// (the CUDA lowering's error messages, integer-input dtype checks).
#pragma once

#include <cstdint>
#include <string>

#include "op_table/op_table.h"

namespace kiln::testing::op_table {

// One Attention node; Q, K, V (and an additive [B, 1, 1, Sk] mask) are graph inputs.
struct AttnCase {
  int64_t b, hq, hkv, sq, sk, d, dv;
  bool causal = false;
  // kBoolInput: a bool graph input [B, 1, Sq, Sk] (a mask computed at run time), query row 1 of
  // batch 0 seeing no key.
  enum Mask { kNone, kAddInput, kAddConst2d, kBoolConst, kBoolInput } mask = kNone;
  int rank = 4;  // 3: [B*H, S, D] (torch 1.13 MHA export), b must be 1
  // As the exporters write the heads (rank 4): Q, K, V inputs [B, S, H, D], each through
  // Transpose(perm 0,2,1,3) into the Attention, its output through the same Transpose
  // ([B, Sq, Hq, Dv]); the optimizer folds the four into head_layout "bshd" (docs/decisions/0065).
  bool bshd = false;
};
OpCase attention_graph(const AttnCase& c, uint32_t seed);

// One pre-LN transformer block: x [B, S, D], H heads of D/H (LayerNorm, Q/K/V MatMul + Add,
// Reshape/Transpose heads, MatMul-Mul-Softmax-MatMul, Gelu MLP, residuals).
ir::Graph transformer_block(int64_t B, int64_t S, int64_t D, int64_t H);

// RMSNorm written out as exporters do (x / sqrt(mean(x^2) + eps) * w), Q/K/V projections with
// biases, attention as MatMul -> Div -> causal Where(finfo.min) -> Softmax -> MatMul, so
// fuse_rmsnorm, fuse_matmul_add, fuse_horizontal_gemm and fuse_attention (is_causal) all fire.
ir::Graph decoder_block(int64_t B, int64_t S, int64_t D, int64_t H);

// A Llama MLP after its attention: x [B, S, D] -> RMSNormalization -> gate_proj, up_proj (MatMul
// [D, F]) -> silu(gate) * up (Sigmoid, Mul, Mul) -> down_proj [F, D] -> residual Add, so
// fuse_horizontal_gemm, fuse_rmsnorm_gemm, fuse_pointwise, fuse_gated_gemm and fuse_gemm_residual
// leave two MatMulBias layers (docs/decisions/0092).
ir::Graph decoder_mlp(int64_t B, int64_t S, int64_t D, int64_t F);

// A dynamic-batch export's shape arithmetic (as torch writes ViT's class token): Shape -> Gather
// -> Unsqueeze -> Concat feeding Expand and Reshape; x[:, 0] is a Gather. x is [2, 4, 8].
ir::Graph class_token_head();

// Batched MatMul on x [2, 3, 5, 8]: 0 x·xᵀ (equal batches), 1 a constant 2-D A times a batched
// activation, 2 B shared (a 2-D activation), 3 a constant rank-3 B with x [3, 5, 8].
OpCase batched_matmul_case(int variant);

// Integer inputs: ids [kBatch, kSeq] -> Gather(table [kVocab, kHidden]) -> LayerNormalization
// (BERT's / GPT-2's embedding lookup); and scores [B, 4, S, S] + (1 - Cast(Unsqueeze(mask))) *
// -10000 -> Softmax with an int64 attention_mask input (BERT's attention mask).
constexpr int64_t kVocab = 50, kHidden = 16, kBatch = 2, kSeq = 8;
ir::Graph embedding_graph(DataType ids_dtype);
ir::Graph mask_graph();

}  // namespace kiln::testing::op_table
