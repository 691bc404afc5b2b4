// Launchers of the CUDA kernels of PagedAttention (ops.def; issue 13, docs/decisions/0063): one
// decoder layer's attention for a step of PACKED tokens of several sequences over a paged KV
// cache owned by the caller. The pool address is read ON THE DEVICE from the kv_pools input, so a
// captured CUDA graph stays valid while the runner changes only input contents. Every launcher
// enqueues on `stream`, never allocates and never synchronizes.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/kernels.h"

namespace kiln::cuda {

// One PagedAttention layer at fixed shapes. Device operands (all row-major):
//   q [T, Hq, D], k / v [T, Hkv, D], out [T, Hq, D] in storage `io` (fp32 / fp16 / bf16);
//   positions int64 [T]; token_seq int32 [T] (-1 = padding); block_table int32 [R, MB];
//   kv_pools int64 [L, 2] (per layer: device address of the pool, num_blocks). Layer `layer`'s
//   pool is [num_blocks, 2 (K, V), Hkv, block_size, D] in storage `cache`.
// Requirements (checked by the factory): D a multiple of 8 up to 256 (rows read in 16-byte
// vectors; every operand and the pool 16-byte aligned) or any D up to 64 (read element by element:
// toy models), Hq a multiple of Hkv.
struct PagedAttentionDesc {
  int64_t tokens = 0;                 // T
  int64_t hq = 0, hkv = 0, d = 0;     // query heads, kv heads, head dim
  int64_t rows = 0, max_blocks = 0;   // R, MB of the block table
  int64_t block_size = 0;             // positions per pool block
  int64_t layer = 0;                  // row of kv_pools
  float scale = 1.f;                  // applied to Q . K
  StorageType io = StorageType::kF32;
  StorageType cache = StorageType::kF32;  // kF32, kF16, kBF16 or kF8E4M3
  // kF8E4M3 pools (ops.def PagedAttention): the append stores E4M3(x / scale), nearest even,
  // saturating at +-448; the attention reads code * scale (k_scale folded into Q's scaling,
  // v_scale into the output). Ignored by the other pools.
  float k_scale = 1.f, v_scale = 1.f;
  // Flash-decoding (Dao et al. 2023, "Flash-Decoding for long-context inference"): the keys of one
  // (token, kv head) are cut into `splits` partitions of `partition` positions, each a thread
  // block writing an unnormalized partial result (its max, sum and weighted V, fp32) to the
  // workspace; a second kernel merges them. splits == 1: one block per (token, kv head, head
  // chunk) writes the output directly, no workspace.
  int64_t splits = 1;
  int64_t partition = 0;              // positions per split (splits > 1)
  // PagedAttention's input 7 (docs/decisions/0090): Q and K arrive before RoPE; the append is
  // launch_paged_rope_append, which rotates them first.
  bool rope = false;
};

// The split count and partition size for a layer of `d`'s shapes (d.splits / d.partition are
// ignored): split only when the blocks of one split per (token, kv head, head chunk) are too few
// to fill a GPU (decode steps), into partitions of at least 256 positions covering MB *
// block_size positions, with the workspace at most `workspace_limit` bytes.
void plan_paged_attention_splits(PagedAttentionDesc* d, size_t workspace_limit);

// Bytes of workspace launch_paged_attention needs (0 when d.splits == 1).
size_t paged_attention_workspace(const PagedAttentionDesc& d);

// Phase 1 (append): K[t] and V[t] of every token t with s = token_seq[t] >= 0 to the pool at
// position p = positions[t] of sequence s (block block_table[s][p / block_size], slot
// p % block_size), converted to the cache storage with round-to-nearest-even. A token with s >= R,
// p < 0, p / block_size >= MB, a block id outside [0, num_blocks) or a null pool writes nothing:
// the kernel never writes outside the pool (the runner is trusted for everything else: two tokens
// of one step at the same position of one sequence race).
cudaError_t launch_paged_kv_append(const void* k, const void* v, const int64_t* positions, const int32_t* token_seq,
                                   const int32_t* block_table, const int64_t* kv_pools, const PagedAttentionDesc& d,
                                   cudaStream_t stream);

// Phase 1 with the fused RoPE (PagedAttention input 7, inv_freq float32 [D / 2]; decision 0090):
// every token's Q and K rows are rotated as the Rope kernel computes it (rotate_half pairs
// (i, i + D / 2), sincosf of float32(positions[t]) * inv_freq[i]) and rounded to `io`; rotated Q
// goes to q_out [T, Hq, D] (io; the attention's Q), rotated K and V to the pool as
// launch_paged_kv_append stores them (padding and unfollowable tokens store nothing; their Q rows
// are still written). One thread per 8 rotated pairs (16-byte loads when D / 2 % 8 == 0, else per
// pair) or per 8 V values.
cudaError_t launch_paged_rope_append(const void* q, const void* k, const void* v, const float* inv_freq,
                                     const int64_t* positions, const int32_t* token_seq, const int32_t* block_table,
                                     const int64_t* kv_pools, void* q_out, const PagedAttentionDesc& d,
                                     cudaStream_t stream);

// Phase 2 (attend), after the append on the same stream: out[t][h] = sum_{j <= p} softmax_j(scale *
// q[t][h] . Kc(s, j)) Vc(s, j) over the pool's stored keys and values of kv head h / (Hq / Hkv),
// an online (streaming) softmax in fp32 (Milakov & Gimelshein 2018), no score matrix stored.
// Padding tokens and tokens whose checks fail (as for the append) give zeros; a position whose
// block id is outside [0, num_blocks) is skipped. `workspace` holds paged_attention_workspace(d)
// bytes (may be null when that is 0).
cudaError_t launch_paged_attention(const void* q, const int64_t* positions, const int32_t* token_seq,
                                   const int32_t* block_table, const int64_t* kv_pools, void* out, void* workspace,
                                   const PagedAttentionDesc& d, cudaStream_t stream);

}  // namespace kiln::cuda
