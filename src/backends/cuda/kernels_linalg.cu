// Det (kernels_linalg.h): thread 0 picks the pivot, swaps and accumulates the determinant; the
// block's threads eliminate the rows below the pivot in parallel (each row as the CPU does it).
#include "backends/cuda/kernels_linalg.h"
#include "backends/cuda/storage_access.cuh"

namespace kiln::cuda {
namespace {

__global__ void det_kernel(const float* __restrict__ x, void* y, int64_t m, StorageType t) {
  extern __shared__ double a[];
  __shared__ double d;
  __shared__ bool done;
  const float* xm = x + blockIdx.x * m * m;
  for (int64_t i = threadIdx.x; i < m * m; i += blockDim.x) a[i] = static_cast<double>(xm[i]);
  if (threadIdx.x == 0) {
    d = 1;
    done = false;
  }
  __syncthreads();
  for (int64_t c = 0; c < m; ++c) {
    if (threadIdx.x == 0) {
      if (d == 0) {
        done = true;
      } else {
        int64_t piv = c;
        for (int64_t r = c + 1; r < m; ++r)
          if (fabs(a[r * m + c]) > fabs(a[piv * m + c])) piv = r;
        if (a[piv * m + c] == 0) {
          d = 0;
          done = true;
        } else {
          if (piv != c) {
            for (int64_t j = 0; j < m; ++j) {
              const double s = a[c * m + j];
              a[c * m + j] = a[piv * m + j];
              a[piv * m + j] = s;
            }
            d = -d;
          }
          d = __dmul_rn(d, a[c * m + c]);
        }
      }
    }
    __syncthreads();
    if (done) break;
    for (int64_t r = c + 1 + threadIdx.x; r < m; r += blockDim.x) {
      const double f = __ddiv_rn(a[r * m + c], a[c * m + c]);
      for (int64_t j = c; j < m; ++j) a[r * m + j] = __dsub_rn(a[r * m + j], __dmul_rn(f, a[c * m + j]));
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) store(y, blockIdx.x, static_cast<float>(d), t);
}

}  // namespace

cudaError_t launch_det(const float* x, void* y, int64_t count, int64_t m, StorageType t, cudaStream_t stream) {
  if (m < 1 || m > kDetMaxDim) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  const size_t smem = static_cast<size_t>(m * m) * sizeof(double);
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(det_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
  }
  det_kernel<<<static_cast<unsigned>(count), 128, smem, stream>>>(x, y, m, t);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
