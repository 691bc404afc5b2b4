// Kiln's general Resize kernel (ONNX Resize / Upsample, docs/decisions/0075): the last two axes
// of a row-major [planes, ih, iw] array resampled through per-axis tap lists that the host builds
// with the CPU reference's build_taps (backends/cpu/resize_taps.h): nearest, linear and cubic
// (cubic_coeff_a, exclude_outside), antialias, every coordinate_transformation_mode including
// tf_crop_and_resize (extrapolation_value). Enqueues on `stream`, never allocates.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"

namespace kiln::cuda {

// The tap tables live in one device buffer: int64 words from `table`, then doubles. Per axis
// (h, w): begin (out + 1 entries) and idx (int64 words at the given offsets), outside (out
// entries, int64 0 / 1), and w (doubles at w_off, counted in doubles from the table's start).
struct ResizeTapsDesc {
  int64_t planes = 0, ih = 0, iw = 0, oh = 0, ow = 0;
  int64_t h_begin = 0, h_idx = 0, h_outside = 0, h_w = 0;
  int64_t w_begin = 0, w_idx = 0, w_outside = 0, w_w = 0;
  double extrapolation = 0;
};

// Output element i (row-major over [planes, oh, ow]) of the table `tab` (words; the weights are
// the same 8-byte slots read as doubles), x read through load(flat input index) -> double.
// __host__ __device__: the kernel's code, replayed by host tests.
template <typename Load>
__host__ __device__ inline double resize_taps_element(const int64_t* tab, const ResizeTapsDesc& d, int64_t i, Load load) {
  const double* wt = reinterpret_cast<const double*>(tab);
  const int64_t ox = i % d.ow, oy = (i / d.ow) % d.oh, p = i / (d.ow * d.oh);
  if (tab[d.h_outside + oy]) return d.extrapolation;
  double acc = 0;
  const int64_t base = p * d.ih * d.iw;
  for (int64_t qy = tab[d.h_begin + oy]; qy < tab[d.h_begin + oy + 1]; ++qy) {
    const double wy = wt[d.h_w + qy];
    if (wy == 0) continue;
    double row = 0;
    if (tab[d.w_outside + ox]) {
      row = d.extrapolation;
    } else {
      const int64_t r = base + tab[d.h_idx + qy] * d.iw;
      for (int64_t qx = tab[d.w_begin + ox]; qx < tab[d.w_begin + ox + 1]; ++qx) {
        const double wx = wt[d.w_w + qx];
        if (wx == 0) continue;
        row += wx * load(r + tab[d.w_idx + qx]);
      }
    }
    acc += wy * row;
  }
  return acc;
}

// y[p, oy, ox] = extrapolation where oy or ox is outside, else
// sum_qy wy[qy] * (sum_qx wx[qx] * x[p, idx_h[qy], idx_w[qx]]) in double, taps of weight 0
// skipped, in the CPU reference's order (its W pass, then its H pass); rounded once into `t`.
cudaError_t launch_resize_taps(const void* x, void* y, StorageType t, const void* table, const ResizeTapsDesc& d,
                               cudaStream_t stream);

}  // namespace kiln::cuda
