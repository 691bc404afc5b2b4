// Det (kernels_linalg.h): thread 0 picks the pivot, swaps and accumulates the determinant; the
// block's threads eliminate the rows below the pivot in parallel (each row as the CPU does it).
#include "backends/cuda/kernels_linalg.h"
#include "backends/cuda/launch_config.cuh"
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

// ---- DFT

namespace {

__global__ void dft_kernel(const float* __restrict__ x, void* y, int64_t n_in, int64_t inner, int comps, int64_t len,
                           int64_t out_len, bool inverse, StorageType t, int64_t total) {
  const double sign = inverse ? 1.0 : -1.0;
  const double two_pi = 6.283185307179586476925286766559;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = e % inner, r = e / inner, k = r % out_len, o = r / out_len;
    double re = 0, im = 0;
    for (int64_t n = 0; n < n_in && n < len; ++n) {
      const float* p = x + ((o * n_in + n) * inner + i) * comps;
      const double xr = p[0], xi = comps == 2 ? p[1] : 0.0;
      const double ang = sign * two_pi * static_cast<double>((k * n) % len) / static_cast<double>(len);
      double s, c;
      sincos(ang, &s, &c);
      re += xr * c - xi * s;
      im += xr * s + xi * c;
    }
    if (inverse) {
      re /= static_cast<double>(len);
      im /= static_cast<double>(len);
    }
    store(y, 2 * e, static_cast<float>(re), t);
    store(y, 2 * e + 1, static_cast<float>(im), t);
  }
}

}  // namespace

cudaError_t launch_dft(const float* x, void* y, int64_t outer, int64_t n_in, int64_t inner, int comps, int64_t len,
                       int64_t out_len, bool inverse, StorageType t, cudaStream_t stream) {
  if (len < 1 || (comps != 1 && comps != 2)) return cudaErrorInvalidValue;
  const int64_t total = outer * out_len * inner;
  if (total == 0) return cudaSuccess;
  dft_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, n_in, inner, comps, len, out_len, inverse, t, total);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
