// The general Resize kernel (kernels_resize.h): one thread per output element walking its taps.
#include "backends/cuda/kernels_resize.h"
#include "backends/cuda/launch_config.cuh"
#include "backends/cuda/storage_access.cuh"

namespace kiln::cuda {
namespace {

__global__ void resize_taps_kernel(const void* x, void* y, StorageType t, const int64_t* __restrict__ tab,
                                   ResizeTapsDesc d) {
  const double* wt = reinterpret_cast<const double*>(tab);
  const int64_t total = d.planes * d.oh * d.ow;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ox = i % d.ow, oy = (i / d.ow) % d.oh, p = i / (d.ow * d.oh);
    double acc = 0;
    if (tab[d.h_outside + oy]) {
      acc = d.extrapolation;
    } else {
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
            row += wx * static_cast<double>(load(x, r + tab[d.w_idx + qx], t));
          }
        }
        acc += wy * row;
      }
    }
    store(y, i, static_cast<float>(acc), t);
  }
}

}  // namespace

cudaError_t launch_resize_taps(const void* x, void* y, StorageType t, const void* table, const ResizeTapsDesc& d,
                               cudaStream_t stream) {
  const int64_t total = d.planes * d.oh * d.ow;
  if (total == 0) return cudaSuccess;
  resize_taps_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, t, static_cast<const int64_t*>(table), d);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
