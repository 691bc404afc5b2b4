// Kiln's kernels for ONNX Det, DFT and RoiAlign. Det (Operators.md "Det", version 11): the determinant of each trailing
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
// ONNX STFT (Operators.md "STFT", version 17; src/backends/cpu/ops_control_signal.cc stft): signal
// [batch, length, comps] float32, window [flen] float32 or null (ones) -> y [batch, frames, bins,
// 2] in storage `t`: frame f starts at f·step, each sample times the window (in double), then
// the DFT of launch_dft over flen samples, bins = flen / 2 + 1 when onesided. One thread per bin.
cudaError_t launch_stft(const float* signal, const float* window, void* y, int64_t batch, int64_t length, int comps,
                        int64_t step, int64_t flen, int64_t frames, int64_t bins, StorageType t, cudaStream_t stream);
cudaError_t launch_dft(const float* x, void* y, int64_t outer, int64_t n_in, int64_t inner, int comps, int64_t len,
                       int64_t out_len, bool inverse, StorageType t, cudaStream_t stream);

// ONNX RoiAlign (Operators.md "RoiAlign", versions 10 / 16), the CPU reference's roi_align
// (src/backends/cpu/ops_control_vision.cc) in double: x [n, c, h, w] row-major in storage `t`,
// rois [rois, 4] float32 (x1, y1, x2, y2), batch_indices [rois] int64 -> y [rois, c, out_h,
// out_w] in storage t. Each output bin averages (or, max mode, maxes the largest weighted tap
// of, as ONNX Runtime) bilinear samples on a sampling_ratio grid (adaptive ceil(roi / bin) when
// 0; capped at 4096 per side on the device, where the CPU refuses larger); samples more than one
// pixel outside the map count zero. A run-time batch index outside [0, n) — an error in the CPU
// reference — gives a zero bin. One thread per output element.
struct RoiAlignDesc {
  int64_t n = 0, c = 0, h = 0, w = 0, rois = 0, out_h = 1, out_w = 1, ratio = 0;
  double scale = 1.0;
  bool half_pixel = true;  // coordinate_transformation_mode half_pixel (else output_half_pixel)
  bool max_mode = false;
};
cudaError_t launch_roi_align(const void* x, const float* rois, const int64_t* batch_indices, void* y, StorageType t,
                             const RoiAlignDesc& d, cudaStream_t stream);

// ONNX Einsum (Operators.md "Einsum", version 12) on float64 operands (docs/decisions/0075), one
// or two inputs, as a direct sum: y[o] = sum over the summed labels' index space of a[.] (* b[.]),
// each operand addressed through per-label strides (a label repeated within an operand — a
// diagonal — has the sum of its dims' strides; an ellipsis dim of extent 1 broadcast against n
// has stride 0). One thread per output element, accumulating in double in row-major order of the
// summed labels (the CPU reference contracts pairwise through a GEMM: same terms, another order).
inline constexpr int kEinsumMaxLabels = 12;
struct EinsumDesc {
  int inputs = 1;            // 1 or 2
  int n_out = 0, n_sum = 0;  // output labels (in output order), summed labels
  int64_t out_ext[kEinsumMaxLabels] = {}, sum_ext[kEinsumMaxLabels] = {};
  // Element strides of each input along each output / summed label (0 where it lacks the label).
  int64_t a_out[kEinsumMaxLabels] = {}, a_sum[kEinsumMaxLabels] = {};
  int64_t b_out[kEinsumMaxLabels] = {}, b_sum[kEinsumMaxLabels] = {};
};
// Output element i: the sum over the summed labels' index space (sum_total = prod(sum_ext)) in
// row-major order. __host__ __device__: the kernel's code, replayed by host tests.
__host__ __device__ inline double einsum_f64_element(const double* a, const double* b, const EinsumDesc& d, int64_t i,
                                                     int64_t sum_total) {
  int64_t rem = i, oa = 0, ob = 0;
  for (int k = d.n_out - 1; k >= 0; --k) {
    const int64_t q = rem % d.out_ext[k];
    rem /= d.out_ext[k];
    oa += q * d.a_out[k];
    ob += q * d.b_out[k];
  }
  double acc = 0;
  for (int64_t s = 0; s < sum_total; ++s) {
    int64_t r = s, sa = oa, sb = ob;
    for (int k = d.n_sum - 1; k >= 0; --k) {
      const int64_t q = r % d.sum_ext[k];
      r /= d.sum_ext[k];
      sa += q * d.a_sum[k];
      sb += q * d.b_sum[k];
    }
    acc += b ? a[sa] * b[sb] : a[sa];
  }
  return acc;
}

// a, b (null for one input), y: doubles; y has prod(out_ext) elements.
cudaError_t launch_einsum_f64(const double* a, const double* b, double* y, const EinsumDesc& d, cudaStream_t stream);

}  // namespace kiln::cuda
