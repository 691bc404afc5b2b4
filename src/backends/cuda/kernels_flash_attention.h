// Launcher of Kiln's fused attention kernel (FlashAttention-2: Dao 2023, "FlashAttention-2: Faster
// Attention with Better Parallelism and Work Partitioning", algorithm 1): O = softmax(scale · Q Kᵀ
// + mask) V tiled over the keys with the softmax computed online in float32, so the [Sq, Sk]
// scores never reach memory. fp16 / bf16 storage, head size D = Dv = 64 or 128, tensor cores
// (mma.sync m16n8k16, float32 accumulation; sm_80 or newer). The Attention layer's other tactic
// (cuBLASLt + softmax + cuBLASLt, gpu_transformer.cc) runs everything else. Enqueues on `stream`,
// never allocates, never synchronizes. Design: docs/decisions/0061, 0084.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"
#include "backends/cuda/kernels_transformer.h"

namespace kiln::cuda {

// One Attention layer for the fused kernel. Tensors are [batch, heads, seq, D] with the last dim
// contiguous and the other three strided (element strides; a multiple of 8 elements, and every
// pointer 16-byte aligned: tiles are copied and O rows written in 16-byte pieces). `batch` is the product of the
// op's leading dims `*`. Query head h reads kv head h / (hq / hkv) (GQA, docs/decisions/0006).
struct FlashAttentionParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  const void* mask = nullptr;  // in the storage type (bool as 0/1); read through `rows`
  int64_t batch = 1, hq = 0, hkv = 0, sq = 0, sk = 0;
  int head_dim = 0;                     // D == Dv: 64 or 128
  int64_t q_stride[3] = {}, k_stride[3] = {}, v_stride[3] = {}, o_stride[3] = {};  // batch, head, seq (elements)
  float scale = 1.f;                    // multiplies Q Kᵀ before the mask is added
  // The score rows [*, Hq, Sq]: causal flag, mask kind and its broadcast strides, exactly as the
  // softmax kernel of the other tactic reads them (attention_mask_row_offset, attention_key_limit).
  AttentionSoftmaxDesc rows;
  // Query rows per block: 64 (4 warps) or 128 (8 warps, K / V tiles shared by twice the rows);
  // 0 = the launcher's choice (flash_attention_block_rows).
  int block_rows = 0;
};

// The kernel's fragment addressing (PTX ISA, "ldmatrix" and "Matrix fragments for mma.m16n8k16"),
// __host__ __device__ so a host test replays it against the instructions' documented lane
// layouts (tests/gpu/flash_attention_fragments_test.cc). In an ldmatrix.x4, lane L gives the
// address of row L % 8 of matrix L / 8; each function returns that row's tile row and first column.
struct FlashTileRowCol {
  int row, col;  // elements
};
// Q tile [16 · warps rows][D]: the A fragment of warp `warp`'s 16 rows and columns [16 kk, 16 kk + 16):
// matrices (rows +0, cols +0), (rows +8, cols +0), (rows +0, cols +8), (rows +8, cols +8) are
// registers a0..a3.
__host__ __device__ inline FlashTileRowCol flash_q_fragment_row(int lane, int warp, int kk) {
  const int mat = lane >> 3;
  return {warp * 16 + (mat & 1) * 8 + (lane & 7), kk * 16 + (mat >> 1) * 8};
}
// K tile [64 keys][D] (QKᵀ's B operand is K row-major per key): keys [16 np, 16 np + 16) and dims
// [16 kk, 16 kk + 16): matrices (keys +0, dims +0), (keys +0, dims +8) are b0, b1 of n-block
// 2 np; (keys +8, dims +0), (keys +8, dims +8) of n-block 2 np + 1.
__host__ __device__ inline FlashTileRowCol flash_k_fragment_row(int lane, int np, int kk) {
  const int mat = lane >> 3;
  return {np * 16 + (mat >> 1) * 8 + (lane & 7), kk * 16 + (mat & 1) * 8};
}
// V tile [64 keys][D], loaded transposed: keys [16 ks, 16 ks + 16) and dims [16 np, 16 np + 16):
// matrices (keys +0, dims +0), (keys +8, dims +0) are b0, b1 of n-block 2 np; (keys +0, dims +8),
// (keys +8, dims +8) of n-block 2 np + 1.
__host__ __device__ inline FlashTileRowCol flash_v_fragment_row(int lane, int ks, int np) {
  const int mat = lane >> 3;
  return {ks * 16 + (mat & 1) * 8 + (lane & 7), np * 16 + (mat >> 1) * 8};
}

// Whether the kernel runs this configuration (storage fp16 / bf16, D == Dv in {64, 128}, at most
// 2^31 - 1 blocks of 64 query rows). Host-only, no device touched.
bool flash_attention_supported(StorageType t, int64_t d, int64_t dv, int64_t batch, int64_t hq, int64_t sq);

// The query rows per block a launch with `p` uses: p.block_rows when it is 64 or 128, else 64.
int flash_attention_block_rows(const FlashAttentionParams& p);

// Runs the kernel. Rows whose keys are all excluded (mask, causal bound, Sk = 0) give zeros, as
// the other tactic does (docs/decisions/0006). Errors: an unsupported configuration, a block_rows
// other than 0 / 64 / 128, or O not 16-byte aligned (cudaErrorInvalidValue); the launch's error.
cudaError_t launch_flash_attention(const FlashAttentionParams& p, StorageType t, cudaStream_t stream);

}  // namespace kiln::cuda
