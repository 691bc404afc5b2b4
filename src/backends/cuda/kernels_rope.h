// Launcher of the CUDA kernel of Rope (ops.def; docs/decisions/0067-fused-rope.md): the rotary
// position embedding of one q or k tensor in one launch. Enqueues on `stream`, never allocates,
// never synchronizes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"

namespace kiln::cuda {

// One Rope layer at fixed shapes: X and Y row-major, viewed as [outer, heads, inner, d] (outer =
// X's dims before the head axis, inner = those between it and the last); positions [outer, inner]
// (int32 or int64, as stored).
struct RopeDesc {
  int64_t rows = 0;             // outer * inner: one position each
  int64_t heads = 0, inner = 1, d = 0;
  int64_t half = 0;             // rotary_dim / 2: the rotated pairs per head
  int64_t cache_positions = 0;  // P of the caches (cache mode), else 0
  bool interleaved = false;     // pairs (2i, 2i + 1) instead of (i, i + half)
  bool positions_int64 = true;
  StorageType io = StorageType::kF32;  // X and Y (fp32 / fp16 / bf16)
};

// The largest `half` the kernel takes: one row's cos and sin sit in shared memory (2 * half floats).
constexpr int64_t kRopeMaxHalf = 4096;

// Y = Rope(X) (ops.def). Angle mode (inv_freq != null): float32 inv_freq [half], c, s =
// cos, sin of float(p) * inv_freq[i] computed with sincosf (full-accuracy range reduction, not
// __sincosf: angles reach 1e5 rad at 128k positions). Cache mode (inv_freq null): cos_cache /
// sin_cache float32 [cache_positions, half]; a position outside [0, cache_positions) leaves its
// row unrotated (c = 1, s = 0; the CPU reference refuses it). One thread block per position row
// computes the row's cos / sin once into shared memory, then rotates every head; 16-byte vector
// loads and stores when the pairs are split in halves, half % 8 == 0, d % 8 == 0 and X / Y are
// 16-byte aligned, element by element otherwise.
cudaError_t launch_rope(const void* x, const void* positions, const float* inv_freq, const float* cos_cache,
                        const float* sin_cache, void* y, const RopeDesc& d, cudaStream_t stream);

}  // namespace kiln::cuda
