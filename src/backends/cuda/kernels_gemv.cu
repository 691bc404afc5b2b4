// The skinny GEMM of kernels_gemv.h (docs/decisions/0089).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/kernels_gemv.h"

namespace kiln::cuda {
namespace {

constexpr int kWarps = 4;   // warps per block
constexpr int kUnroll = 4;  // 16-byte chunks of each W row in flight per lane

__device__ __forceinline__ float2 to_float2(uint32_t u, __half) {
  __half2 h;
  memcpy(&h, &u, 4);
  return __half22float2(h);
}
__device__ __forceinline__ float2 to_float2(uint32_t u, __nv_bfloat16) {
  __nv_bfloat162 h;
  memcpy(&h, &u, 4);
  return __bfloat1622float2(h);
}
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }

// acc[r] += dot(w[r] (8 values), x (8 values)) for one 16-byte chunk.
template <typename T, int R>
__device__ __forceinline__ void dot8(const uint4 (&w)[R], const uint4& x, float (&acc)[R]) {
  const uint32_t xs[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 xf = to_float2(xs[j], T());
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const uint32_t ws[4] = {w[r].x, w[r].y, w[r].z, w[r].w};
      const float2 wf = to_float2(ws[j], T());
      acc[r] = fmaf(wf.x, xf.x, acc[r]);
      acc[r] = fmaf(wf.y, xf.y, acc[r]);
    }
  }
}

template <typename T, typename Y, int M, int R>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                          const T* __restrict__ bias, const T* __restrict__ res,
                                                          Y* __restrict__ y, int64_t n, int64_t k, bool relu) {
  const int lane = threadIdx.x & 31;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * R;
  if (row0 >= n) return;
  const int64_t kv = k / 8;  // 16-byte chunks per row
  const uint4* wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wr[r] = reinterpret_cast<const uint4*>(w + (row0 + r < n ? row0 + r : n - 1) * k);
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  float acc[M][R];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[m][r] = 0.f;
  for (int64_t c0 = lane; c0 < kv; c0 += 32 * kUnroll) {
    uint4 wq[kUnroll][R];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
#pragma unroll
      for (int r = 0; r < R; ++r) wq[u][r] = c < kv ? __ldcs(wr[r] + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
      if (c >= kv) break;
#pragma unroll
      for (int m = 0; m < M; ++m) dot8<T, R>(wq[u], __ldg(xv + m * kv + c), acc[m]);
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) acc[m][r] += __shfl_xor_sync(0xffffffffu, acc[m][r], off);
  // Every lane holds every sum; lane j writes output j = (m, r) of the warp's M x R.
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (lane != m * R + r) continue;
      const int64_t col = row0 + r;
      if (col >= n) continue;
      float v = acc[m][r];
      if (bias) v += to_float(bias[col]);
      if (res) v += to_float(res[m * n + col]);
      if (relu) v = fmaxf(v, 0.f);
      store(y + m * n + col, v);
    }
}

template <typename T, typename Y, int M, int R>
cudaError_t launch_typed(const void* x, const void* w, const void* bias, const void* res, void* y, const GemvDesc& d,
                         cudaStream_t stream) {
  const int64_t warps = (d.n + R - 1) / R;
  const dim3 grid(static_cast<unsigned>((warps + kWarps - 1) / kWarps));
  gemv_kernel<T, Y, M, R><<<grid, kWarps * 32, 0, stream>>>(
      static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias), static_cast<const T*>(res),
      static_cast<Y*>(y), d.n, d.k, d.relu);
  return cudaGetLastError();
}

template <typename T, typename Y, int R>
cudaError_t launch_rows(const void* x, const void* w, const void* bias, const void* res, void* y, const GemvDesc& d,
                        cudaStream_t stream) {
  switch (d.m) {
    case 1: return launch_typed<T, Y, 1, R>(x, w, bias, res, y, d, stream);
    case 2: return launch_typed<T, Y, 2, R>(x, w, bias, res, y, d, stream);
    case 3: return launch_typed<T, Y, 3, R>(x, w, bias, res, y, d, stream);
    case 4: return launch_typed<T, Y, 4, R>(x, w, bias, res, y, d, stream);
    case 5: return launch_typed<T, Y, 5, R>(x, w, bias, res, y, d, stream);
    case 6: return launch_typed<T, Y, 6, R>(x, w, bias, res, y, d, stream);
    case 7: return launch_typed<T, Y, 7, R>(x, w, bias, res, y, d, stream);
    case 8: return launch_typed<T, Y, 8, R>(x, w, bias, res, y, d, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T, typename Y>
cudaError_t launch_out(const void* x, const void* w, const void* bias, const void* res, void* y, const GemvDesc& d,
                       cudaStream_t stream) {
  switch (d.rows_per_warp) {
    case 1: return launch_rows<T, Y, 1>(x, w, bias, res, y, d, stream);
    case 2: return launch_rows<T, Y, 2>(x, w, bias, res, y, d, stream);
    case 4: return launch_rows<T, Y, 4>(x, w, bias, res, y, d, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

bool gemv_supports(const GemvDesc& d) {
  const bool rows = d.rows_per_warp == 1 || d.rows_per_warp == 2 || d.rows_per_warp == 4;
  return d.m >= 1 && d.m <= kGemvMaxM && d.n >= 1 && d.n <= (int64_t{1} << 34) && d.k >= 8 && d.k % 8 == 0 && rows &&
         (d.t == StorageType::kF16 || d.t == StorageType::kBF16);
}

cudaError_t launch_gemv(const void* x, const void* w, const void* bias, const void* residual, void* y,
                        const GemvDesc& d, cudaStream_t stream) {
  if (!gemv_supports(d)) return cudaErrorInvalidValue;
  if (d.t == StorageType::kF16)
    return d.out_f32 ? launch_out<__half, float>(x, w, bias, residual, y, d, stream)
                     : launch_out<__half, __half>(x, w, bias, residual, y, d, stream);
  return d.out_f32 ? launch_out<__nv_bfloat16, float>(x, w, bias, residual, y, d, stream)
                   : launch_out<__nv_bfloat16, __nv_bfloat16>(x, w, bias, residual, y, d, stream);
}

}  // namespace kiln::cuda
