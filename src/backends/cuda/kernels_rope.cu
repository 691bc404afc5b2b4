// Rope's CUDA kernel (kernels_rope.h): one thread block per position row. Its threads first put
// the row's cos / sin of every rotated pair in shared memory (computed in float32 with sincosf, or
// read from the caches), then rotate all heads of the row: with the pairs split in halves (HF
// Llama's rotate_half) a thread takes 8 consecutive pairs of one head, x1 and x2 each one 16-byte
// load; interleaved pairs and unaligned shapes go element by element. Features past rotary_dim
// are copied. Everything is computed in float32 and rounded once on store.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/kernels_rope.h"
#include "backends/cuda/storage_access.cuh"

namespace kiln::cuda {
namespace {

constexpr int kMaxThreads = 256;

template <typename T>
__device__ __forceinline__ float to_f(T v);
template <>
__device__ __forceinline__ float to_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// V = 8: 16-byte vectors (Vec8), pairs split in halves; V = 1: element by element, either pairing.
template <typename T, int V>
__global__ void rope_kernel(const T* __restrict__ x, const void* __restrict__ positions,
                            const float* __restrict__ inv_freq, const float* __restrict__ cos_cache,
                            const float* __restrict__ sin_cache, T* __restrict__ y, RopeDesc d) {
  extern __shared__ float cs[];  // [0, half): cos, [half, 2 half): sin
  const int64_t row = blockIdx.x;
  const int64_t p = d.positions_int64 ? static_cast<const int64_t*>(positions)[row]
                                      : static_cast<int64_t>(static_cast<const int32_t*>(positions)[row]);
  for (int64_t k = threadIdx.x; k < d.half; k += blockDim.x) {
    float c = 1.f, s = 0.f;
    if (inv_freq) {
      // One float32 rounding of the product, then full-accuracy sincosf.
      sincosf(static_cast<float>(p) * inv_freq[k], &s, &c);
    } else if (p >= 0 && p < d.cache_positions) {
      c = cos_cache[p * d.half + k];
      s = sin_cache[p * d.half + k];
    }
    cs[k] = c;
    cs[d.half + k] = s;
  }
  __syncthreads();
  const int64_t o = row / d.inner, i = row % d.inner;
  const int64_t head_stride = d.inner * d.d;
  const int64_t base0 = (o * d.heads * d.inner + i) * d.d;  // head 0 of this row
  const T* xr = x + base0;
  T* yr = y + base0;
  const int64_t rot = 2 * d.half;
  if (V == 8) {
    const int64_t chunks = d.half / 8;
    for (int64_t it = threadIdx.x; it < d.heads * chunks; it += blockDim.x) {
      const int64_t h = it / chunks, k0 = (it % chunks) * 8;
      float a[8], b[8], ya[8], yb[8];
      Vec8<T>::ld(xr + h * head_stride, k0, a);
      Vec8<T>::ld(xr + h * head_stride, d.half + k0, b);
#pragma unroll
      for (int m = 0; m < 8; ++m) {
        const float c = cs[k0 + m], s = cs[d.half + k0 + m];
        ya[m] = a[m] * c - b[m] * s;
        yb[m] = b[m] * c + a[m] * s;
      }
      Vec8<T>::st(yr + h * head_stride, k0, ya);
      Vec8<T>::st(yr + h * head_stride, d.half + k0, yb);
    }
    const int64_t pass = (d.d - rot) / 8;
    for (int64_t it = threadIdx.x; it < d.heads * pass; it += blockDim.x) {
      const int64_t h = it / pass, e = rot + (it % pass) * 8;
      float v[8];
      Vec8<T>::ld(xr + h * head_stride, e, v);
      Vec8<T>::st(yr + h * head_stride, e, v);
    }
  } else {
    for (int64_t it = threadIdx.x; it < d.heads * d.half; it += blockDim.x) {
      const int64_t h = it / d.half, k = it % d.half;
      const int64_t ia = d.interleaved ? 2 * k : k, ib = d.interleaved ? 2 * k + 1 : k + d.half;
      const float a = to_f(xr[h * head_stride + ia]), b = to_f(xr[h * head_stride + ib]);
      const float c = cs[k], s = cs[d.half + k];
      yr[h * head_stride + ia] = from_f<T>(a * c - b * s);
      yr[h * head_stride + ib] = from_f<T>(b * c + a * s);
    }
    const int64_t pass = d.d - rot;
    for (int64_t it = threadIdx.x; it < d.heads * pass; it += blockDim.x) {
      const int64_t h = it / pass, e = rot + it % pass;
      yr[h * head_stride + e] = xr[h * head_stride + e];
    }
  }
}

template <typename T>
cudaError_t launch_typed(const void* x, const void* positions, const float* inv_freq, const float* cos_cache,
                         const float* sin_cache, void* y, const RopeDesc& d, cudaStream_t stream) {
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  const bool vec = !d.interleaved && d.half % 8 == 0 && d.d % 8 == 0 && aligned;
  const int64_t items = std::max<int64_t>(d.heads * (vec ? d.half / 8 : d.half), d.half);
  const int threads = static_cast<int>(std::min<int64_t>(kMaxThreads, std::max<int64_t>(32, (items + 31) / 32 * 32)));
  const size_t smem = static_cast<size_t>(2 * d.half) * sizeof(float);
  const auto* xt = static_cast<const T*>(x);
  auto* yt = static_cast<T*>(y);
  if (vec)
    rope_kernel<T, 8><<<static_cast<unsigned>(d.rows), threads, smem, stream>>>(xt, positions, inv_freq, cos_cache,
                                                                                 sin_cache, yt, d);
  else
    rope_kernel<T, 1><<<static_cast<unsigned>(d.rows), threads, smem, stream>>>(xt, positions, inv_freq, cos_cache,
                                                                                 sin_cache, yt, d);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_rope(const void* x, const void* positions, const float* inv_freq, const float* cos_cache,
                        const float* sin_cache, void* y, const RopeDesc& d, cudaStream_t stream) {
  if (d.rows <= 0 || d.heads <= 0 || d.d <= 0) return cudaSuccess;
  if (d.half > kRopeMaxHalf || d.rows > 0x7fffffffLL) return cudaErrorInvalidValue;
  switch (d.io) {
    case StorageType::kF16: return launch_typed<__half>(x, positions, inv_freq, cos_cache, sin_cache, y, d, stream);
    case StorageType::kBF16:
      return launch_typed<__nv_bfloat16>(x, positions, inv_freq, cos_cache, sin_cache, y, d, stream);
    case StorageType::kF32: return launch_typed<float>(x, positions, inv_freq, cos_cache, sin_cache, y, d, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace kiln::cuda
