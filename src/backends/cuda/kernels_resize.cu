// The general Resize kernel (kernels_resize.h): one thread per output element walking its taps.
#include "backends/cuda/kernels_resize.h"
#include "backends/cuda/launch_config.cuh"
#include "backends/cuda/storage_access.cuh"

namespace kiln::cuda {
namespace {

__global__ void resize_taps_kernel(const void* x, void* y, StorageType t, const int64_t* __restrict__ tab,
                                   ResizeTapsDesc d) {
  const int64_t total = d.planes * d.oh * d.ow;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = resize_taps_element(tab, d, i, [&](int64_t k) { return static_cast<double>(load(x, k, t)); });
    store(y, i, static_cast<float>(v), t);
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
