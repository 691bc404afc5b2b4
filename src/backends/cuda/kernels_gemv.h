// Kiln's skinny GEMM for LLM decode steps and batch-1 inference (docs/decisions/0089): a GEMM
// with few rows is a stream over its weight, and cuBLASLt's kernels for it reach only part of the
// copy bandwidth. Enqueues on `stream`, never allocates, never synchronizes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"

namespace kiln::cuda {

// The most rows of X the kernel takes: each 16-byte chunk of W read once is used for all of them.
constexpr int64_t kGemvMaxM = 8;

// Y[M, N] = act(X[M, K] · Wᵀ + bias[N] + R[M, N]) with W stored [N, K] row-major (a Linear layer's
// [out_features, in_features]; Gemm transB = 1), X, bias and R in `t`, Y in `t` or float32
// (out_f32); float32 accumulation in the order of each warp's K stride, then a butterfly sum.
struct GemvDesc {
  int64_t m = 0, n = 0, k = 0;
  StorageType t = StorageType::kF16;  // fp16 or bf16
  bool out_f32 = false;
  bool relu = false;                  // max(0, ·) after bias and residual
  int rows_per_warp = 1;              // 1, 2 or 4 outputs of N per warp (the tactic's variant)
};

// Whether launch_gemv takes these: 1 <= m <= kGemvMaxM, n >= 1, k >= 8 with k % 8 == 0 (rows of
// W and X 16-byte aligned), t fp16 or bf16, rows_per_warp 1, 2 or 4.
bool gemv_supports(const GemvDesc& d);

// One warp per rows_per_warp outputs n, 4 warps per block: the warp's 32 lanes read the rows of W
// 16 bytes each (4 loads in flight per lane and row, streamed past L1), X's matching 16 bytes of
// every row (cached), and accumulate M·rows_per_warp dot products; a butterfly shuffle sums the
// lanes, and lane j < M·rows_per_warp writes one output with bias, residual and ReLU applied.
// bias and residual may be null. X, W, R and Y must be 16-byte aligned (the arena's and the
// weight cache's 256-byte alignment).
cudaError_t launch_gemv(const void* x, const void* w, const void* bias, const void* residual, void* y,
                        const GemvDesc& d, cudaStream_t stream);

}  // namespace kiln::cuda
