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
//
// Two fusions of a decoder layer (docs/decisions/0092; ops.def MatMulBias inputs 4 and gate):
// - norm: X is RMS-normalized per row first, X'[m, :] = X[m, :] / sqrt(mean(X[m, :]^2) + norm_eps)
//   * S (S [K] in `t`), computed in float32 and rounded to `t` as launch_rms_norm computes it (the
//   sum of squares in another order: the same values up to its last bit). Each block normalizes the
//   M rows into shared memory (M · K · 2 bytes) before the product.
// - gate: W holds [Wg; Wu] (2N rows) and Y [M, N] = silu(G) · U with G = round_t(X Wgᵀ + bias[:N]),
//   U = round_t(X Wuᵀ + bias[N:]) — the FusedPointwise program Sigmoid(in0); Mul(in0, r0); Mul(r1,
//   in1) (ir::pw_is_silu_gate) over the product stored in `t`, as the unfused layers compute it.
//   Each warp streams rows j and N + j of W for its rows_per_warp outputs; no residual, ReLU or
//   float32 output with it.
struct GemvDesc {
  int64_t m = 0, n = 0, k = 0;        // n: outputs per row of Y (with gate: half of W's 2n rows)
  StorageType t = StorageType::kF16;  // fp16 or bf16
  bool out_f32 = false;
  bool relu = false;                  // max(0, ·) after bias and residual
  int rows_per_warp = 1;              // 1, 2 or 4 outputs of N per warp (the tactic's variant)
  bool norm = false;                  // RMSNorm prologue (norm_scale [K], norm_eps)
  float norm_eps = 1e-5f;
  bool gate = false;                  // silu(G) · U epilogue; rows_per_warp 1 or 2
};

// Whether launch_gemv takes these: 1 <= m <= kGemvMaxM, n >= 1, k >= 8 with k % 8 == 0 (rows of
// W and X 16-byte aligned), t fp16 or bf16, rows_per_warp 1, 2 or 4; with norm, m · k · 2 bytes
// of shared memory within kGemvNormSmem; with gate, rows_per_warp 1 or 2 and no residual, ReLU
// or float32 output.
constexpr int64_t kGemvNormSmem = 96 * 1024;
bool gemv_supports(const GemvDesc& d);

// Once per layer before its first launch (and outside stream capture): raises the kernel's
// dynamic shared memory limit where the norm's rows need more than 48 KiB.
cudaError_t gemv_prepare(const GemvDesc& d);

// One warp per rows_per_warp outputs n, 4 warps per block: the warp's 32 lanes read the rows of W
// 16 bytes each (4 loads in flight per lane and row, streamed past L1), X's matching 16 bytes of
// every row (cached), and accumulate M·rows_per_warp dot products; a butterfly shuffle sums the
// lanes, and lane j < M·rows_per_warp writes one output with bias, residual and ReLU applied.
// bias and residual may be null. X, W, R and Y must be 16-byte aligned (the arena's and the
// weight cache's 256-byte alignment).
// norm_scale: S [K] with d.norm, else ignored. On compute capability 9.0+ a programmatic dependent
// launch (pdl.cuh): the kernel issues its first weight loads while the kernel before it on the
// stream finishes, then waits for it before reading X.
cudaError_t launch_gemv(const void* x, const void* w, const void* bias, const void* residual, const void* norm_scale,
                        void* y, const GemvDesc& d, cudaStream_t stream);

// The gate alone, for the GEMMs that do not run it in their epilogue (a cuBLASLt tactic of a gated
// layer): Y [rows, n] = silu(P[r, j]) · P[r, n + j] over P [rows, 2n], both in `t` (fp32 / fp16 / bf16),
// computed exactly as the skinny GEMM's epilogue (and the FusedPointwise program) computes it.
// 16 bytes per access when n % 8 == 0 and P, Y are 16-byte aligned.
cudaError_t launch_silu_gate(const void* p, void* y, int64_t rows, int64_t n, StorageType t, cudaStream_t stream);

}  // namespace kiln::cuda
