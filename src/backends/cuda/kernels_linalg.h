// Kiln's kernels for ONNX Det and DFT. Det (Operators.md "Det", version 11): the determinant of each trailing
// [m, m] matrix by Gaussian elimination with partial pivoting, in double, step for step as the
// CPU reference computes it (src/backends/cpu/ops_nn_linalg.cc det: the same pivot choice, row
// swaps and products; multiplications and subtractions rounded separately, never fused), so the
// result is the reference's double rounded to the output's storage. One thread block per matrix,
// the matrix in shared memory (m at most kDetMaxDim). Enqueues on `stream`, never allocates,
// never synchronizes. DFT: see launch_dft.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"

namespace kiln::cuda {

inline constexpr int64_t kDetMaxDim = 160;  // 160 * 160 doubles = 200 KiB of shared memory

// x: `count` float32 matrices [m, m] row-major; y: `count` determinants in storage `t`. Errors: m
// outside [1, kDetMaxDim] (cudaErrorInvalidValue), launch errors.
cudaError_t launch_det(const float* x, void* y, int64_t count, int64_t m, StorageType t, cudaStream_t stream);

// ONNX DFT (Operators.md "DFT", versions 17 / 20), the CPU reference's naive transform
// (src/backends/cpu/ops_control_signal.cc naive_dft) in double: x [outer, n_in, inner, comps]
// float32 (comps 1: real, 2: complex) -> y [outer, out_len, inner, 2] in storage `t`, y_k =
// sum_{n < min(n_in, len)} x_n e^{∓2πi (k·n mod len) / len} (+ for `inverse`, then / len). One
// thread per output bin: O(len) each, not an FFT (fine for the short transforms of ONNX graphs).
cudaError_t launch_dft(const float* x, void* y, int64_t outer, int64_t n_in, int64_t inner, int comps, int64_t len,
                       int64_t out_len, bool inverse, StorageType t, cudaStream_t stream);

}  // namespace kiln::cuda
