// CUDA tactics of the internal transformer layers (ops.def: Attention, RMSNormalization; MatMulBias
// lowers to the cuBLASLt Gemm layer with its bias epilogue, factory_gemm.cc): build-time planning of
// each node (shapes and attributes checked, errors name the node; the rules of the CPU reference
// src/backends/cpu/ops_fused_transformer.cc) and the layers that run them. Operands are row-major.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "backends/cuda/gpu_layers.h"
#include "backends/cuda/gpu_model.h"
#include "backends/cuda/kernels_more.h"
#include "backends/cuda/kernels_transformer.h"
#include "ir/graph.h"

namespace kiln::cuda {

// RMSNormalization over X's dims [axis, rank) as a [rows, cols] array; scale has cols values or one.
struct RmsNormPlan {
  int64_t rows = 1, cols = 1;
  int64_t scale_n = 1;  // cols or 1
  float eps = 1e-5f;
};
StatusOr<RmsNormPlan> plan_rms_norm(const ir::Node& n, const Shape& x, const Shape& scale);

// Attention (docs/decisions/0006-attention-op.md) as two cuBLASLt strided-batched GEMMs around
// Kiln's masked softmax ("Attention Is All You Need", Vaswani et al. 2017, eq. 1):
//   S = scale · Q Kᵀ (fp32, workspace)  ->  P = softmax(S + mask) (storage type)  ->  O = P V.
// GQA folds into M: the Hq / Hkv query heads that read one kv head are contiguous in Q and O, so
// each (batch, kv head) pair is one GEMM of M = group · Sq rows against that head's K or V —
// no copy of K/V per query head. Units (batch · Hkv GEMM entries) run in chunks of `chunk` so
// the score scratch stays within the planning limit.
// head_layout "bshd" (ops.def, docs/decisions/0065): Q/K/V/O are [*, S, H, D]; the fused tactic
// reads them through its strides, this layer copies them to [*, H, S, D] in its workspace
// (`staging_bytes` after the scores) and O back — the copies the graph's Transposes made.
struct AttentionPlan {
  int64_t batch = 1;                  // product of the leading dims *
  int64_t hq = 0, hkv = 0, sq = 0, sk = 0, d = 0, dv = 0;
  bool bshd = false;                  // head_layout "bshd": Q/K/V/O stored [*, S, H, D]
  int64_t group = 1;                  // hq / hkv
  float scale = 1.f;                  // attribute `scale`, default 1 / sqrt(D)
  AttentionSoftmaxDesc softmax;       // rows [*, Hq, Sq], mask strides, causal
  int64_t units = 0;                  // batch · hkv GEMM batch entries
  int64_t m = 0;                      // rows per unit: group · sq
  int64_t chunk = 1;                  // units per cuBLASLt call (divides units)
  size_t probs_offset = 0;            // bytes into the scratch where P starts (0: P overwrites S, fp32)
  size_t scratch_bytes = 0;           // S (fp32) and P of one chunk, 256-byte aligned
  size_t staging_bytes = 0;           // bshd: Q, K, V, O as [*, H, S, D] (each 256-byte aligned); else 0
  // bshd: elements from one token of Q, K, V to the next (0: dense, H · D). Larger when the layer
  // reads them in place from the packed [*, S, W] output of a QKV projection (lower_attention).
  int64_t row_stride[3] = {0, 0, 0};
  int64_t row(int i, int64_t heads, int64_t d) const { return row_stride[i] > 0 ? row_stride[i] : heads * d; }
  // " rows=q,k,v" for signatures and tactic names when any is set, else "".
  std::string row_stride_tag() const {
    if (!row_stride[0] && !row_stride[1] && !row_stride[2]) return "";
    return " rows=" + std::to_string(row_stride[0]) + "," + std::to_string(row_stride[1]) + "," + std::to_string(row_stride[2]);
  }
};
// q, k, v, out: the concrete shapes (as stored: [*, S, H, D] for head_layout "bshd"); mask: the mask's shape when present (mask_is_bool: its dtype
// is bool); elem_bytes: the storage type's size; scratch_limit: bytes S and P of one chunk should
// stay within (one unit is always allowed).
StatusOr<AttentionPlan> plan_attention(const ir::Node& n, const Shape& q, const Shape& k, const Shape& v,
                                       const std::optional<Shape>& mask, bool mask_is_bool, const Shape& out,
                                       int elem_bytes, size_t scratch_limit);

// The same for an Attention node of a graph at the shapes and dtypes `vs`: checks the inputs
// (Q, K, V present and of one dtype; the mask float or bool) first.
StatusOr<AttentionPlan> plan_attention(const ir::Node& n, const ValueShapes& vs, int elem_bytes, size_t scratch_limit);

// The copy of a row-major [batch, a, b, d] tensor into [batch, b, a, d] (the swap of the head
// and sequence axes, either way) as a strided-copy descriptor (kernels_more.h).
// `row` (> 0): the source's stride of axis a in elements, when its rows are longer than b · d
// (a view into a wider tensor); 0: b · d.
StridedDesc attention_axes_swap(int64_t batch, int64_t a, int64_t b, int64_t d, int64_t row = 0);

// ins: x, scale.
std::unique_ptr<Layer> make_rms_norm_layer(const RmsNormPlan& p, StorageType t);
// ins: Q, K, V, mask (-1 when absent), all in storage type t; out: O. tf32 for fp32 GEMMs.
StatusOr<std::unique_ptr<Layer>> make_attention_layer(const AttentionPlan& p, StorageType t, bool tf32);

// The fused tactic (flash_attention_layer.cc, docs/decisions/0061, 0084): Kiln's FlashAttention-2
// kernel, tactic ids kFlashAttentionTactic (blocks of 64 query rows) and kFlashAttention128Tactic
// (128 rows), source kKiln, the same ins / outs; a bshd plan is read and written through the
// kernel's strides (no copies). Offered (true) for fp16 / bf16 storage with D == Dv in {64, 128},
// every mask, causal and GQA case the plan accepts; its candidates() also asks for compute
// capability 8.0 or newer.
constexpr TacticId kFlashAttentionTactic = make_tactic_id(TacticSource::kKiln, 0xFA2);
constexpr TacticId kFlashAttention128Tactic = make_tactic_id(TacticSource::kKiln, 0x1FA2);
bool flash_attention_offered(const AttentionPlan& p, StorageType t);
std::unique_ptr<Layer> make_flash_attention_layer(const AttentionPlan& p, StorageType t);

}  // namespace kiln::cuda
