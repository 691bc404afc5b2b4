// The skinny GEMM of kernels_gemv.h (docs/decisions/0089), with its RMSNorm prologue and silu
// gate epilogue (0092).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "backends/cuda/kernels_gemv.h"
#include "backends/cuda/pdl.cuh"
#include "ir/pointwise_opcode.h"

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
// Two floats rounded to nearest even into one 32-bit pair.
__device__ __forceinline__ uint32_t from_float2(float a, float b, __half) {
  const __half2 h = __halves2half2(__float2half_rn(a), __float2half_rn(b));
  uint32_t u;
  memcpy(&u, &h, 4);
  return u;
}
__device__ __forceinline__ uint32_t from_float2(float a, float b, __nv_bfloat16) {
  const __nv_bfloat162 h = __halves2bfloat162(__float2bfloat16_rn(a), __float2bfloat16_rn(b));
  uint32_t u;
  memcpy(&u, &h, 4);
  return u;
}
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float round_to(float v, __half) { return __half2float(__float2half_rn(v)); }
__device__ __forceinline__ float round_to(float v, __nv_bfloat16) { return __bfloat162float(__float2bfloat16_rn(v)); }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }

// silu(g) · u as the FusedPointwise program Sigmoid(in0); Mul(in0, r0); Mul(r1, in1) computes it
// (the same ir::pw_apply formulas, constant opcodes).
__device__ __forceinline__ float silu_gate(float g, float u) {
  const float s = ir::pw_apply(ir::PwOpcode::kSigmoid, g, 0.f, 0.f);
  const float t = ir::pw_apply(ir::PwOpcode::kMul, g, s, 0.f);
  return ir::pw_apply(ir::PwOpcode::kMul, t, u, 0.f);
}

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

// Sum of squares of one 16-byte chunk.
template <typename T>
__device__ __forceinline__ float sumsq8(const uint4& x) {
  const uint32_t xs[4] = {x.x, x.y, x.z, x.w};
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = to_float2(xs[j], T());
    s = fmaf(f.x, f.x, s);
    s = fmaf(f.y, f.y, s);
  }
  return s;
}

// x * inv * scale per element, rounded to T (launch_rms_norm's formula).
template <typename T>
__device__ __forceinline__ uint4 normalize8(const uint4& x, const uint4& sc, float inv) {
  const uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ss[4] = {sc.x, sc.y, sc.z, sc.w};
  uint32_t o[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 xf = to_float2(xs[j], T()), sf = to_float2(ss[j], T());
    o[j] = from_float2(xf.x * inv * sf.x, xf.y * inv * sf.y, T());
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

// One warp per R outputs of Y (with GATE: rows j and n + j of W for each), 4 warps per block.
// NORM: the block first normalizes X's M rows into shared memory — after issuing its first W
// loads, so the weight stream starts at once.
template <typename T, typename Y, int M, int R, bool NORM, bool GATE>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias, const T* __restrict__ res,
                const T* __restrict__ scale, Y* __restrict__ y, int64_t n, int64_t k, bool relu, float eps) {
  constexpr int RW = GATE ? 2 * R : R;  // rows of W per warp
  extern __shared__ uint4 xs_norm[];    // NORM: [M, K / 8] normalized chunks
  pdl_trigger();  // the next layer may launch and start its own weight stream (pdl.cuh)
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * R;
  const bool active = row0 < n;
  if (!NORM && !active) return;
  const int64_t kv = k / 8;  // 16-byte chunks per row
  const uint4* wr[RW];
#pragma unroll
  for (int r = 0; r < RW; ++r) {
    const int64_t j = row0 + (r % R);
    const int64_t row = (j < n ? j : n - 1) + (r >= R ? n : 0);
    wr[r] = reinterpret_cast<const uint4*>(w + row * k);
  }
  uint4 wq[kUnroll][RW];
  auto load = [&](int64_t c0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
#pragma unroll
      for (int r = 0; r < RW; ++r) wq[u][r] = c < kv ? __ldcs(wr[r] + c) : make_uint4(0, 0, 0, 0);
    }
  };
  if (active) load(lane);  // W is a weight: read before the wait, while the layer before finishes
  pdl_wait();               // X, the residual and Y belong to the step: after it
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  if constexpr (NORM) {
    __shared__ float part[kWarps][M];
    float ss[M];
#pragma unroll
    for (int m = 0; m < M; ++m) ss[m] = 0.f;
    for (int64_t c = threadIdx.x; c < kv; c += kWarps * 32)
#pragma unroll
      for (int m = 0; m < M; ++m) ss[m] += sumsq8<T>(__ldg(xv + m * kv + c));
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) ss[m] += __shfl_xor_sync(0xffffffffu, ss[m], off);
      if (lane == 0) part[warp][m] = ss[m];
    }
    __syncthreads();
    float inv[M];
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float t = 0.f;
#pragma unroll
      for (int q = 0; q < kWarps; ++q) t += part[q][m];
      inv[m] = 1.f / sqrtf(t / static_cast<float>(k) + eps);
    }
    const uint4* sv = reinterpret_cast<const uint4*>(scale);
    for (int64_t c = threadIdx.x; c < kv; c += kWarps * 32) {
      const uint4 sc = __ldg(sv + c);
#pragma unroll
      for (int m = 0; m < M; ++m) xs_norm[m * kv + c] = normalize8<T>(__ldg(xv + m * kv + c), sc, inv[m]);
    }
    __syncthreads();
    if (!active) return;
    xv = xs_norm;
  }
  float acc[M][RW];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < RW; ++r) acc[m][r] = 0.f;
  for (int64_t c0 = lane; c0 < kv; c0 += 32 * kUnroll) {
    if (c0 != lane) load(c0);  // the first chunks are already in flight
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
      if (c >= kv) break;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const uint4 xq = NORM ? xv[m * kv + c] : __ldg(xv + m * kv + c);
        dot8<T, RW>(wq[u], xq, acc[m]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < RW; ++r)
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
      if constexpr (GATE) {
        float g = acc[m][r], u = acc[m][R + r];
        if (bias) {
          g += to_float(bias[col]);
          u += to_float(bias[n + col]);
        }
        store(y + m * n + col, silu_gate(round_to(g, T()), round_to(u, T())));
      } else {
        float v = acc[m][r];
        if (bias) v += to_float(bias[col]);
        if (res) v += to_float(res[m * n + col]);
        if (relu) v = fmaxf(v, 0.f);
        store(y + m * n + col, v);
      }
    }
}

size_t norm_smem(const GemvDesc& d, size_t elem) {
  return d.norm ? static_cast<size_t>(d.m) * static_cast<size_t>(d.k) * elem : 0;
}

template <typename T, typename Y, int M, int R, bool NORM, bool GATE>
cudaError_t launch_typed(const void* x, const void* w, const void* bias, const void* res, const void* scale, void* y,
                         const GemvDesc& d, cudaStream_t stream, bool prepare) {
  auto* kernel = gemv_kernel<T, Y, M, R, NORM, GATE>;
  const size_t smem = norm_smem(d, sizeof(T));
  if (prepare) {
    if (smem <= 48 * 1024) return cudaSuccess;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  }
  const int64_t warps = (d.n + R - 1) / R;
  const dim3 grid(static_cast<unsigned>((warps + kWarps - 1) / kWarps));
  return launch_pdl(grid, dim3(kWarps * 32), smem, stream, kernel, static_cast<const T*>(x), static_cast<const T*>(w),
                    static_cast<const T*>(bias), static_cast<const T*>(res), static_cast<const T*>(scale),
                    static_cast<Y*>(y), d.n, d.k, d.relu, d.norm_eps);
}

template <typename T, typename Y, int R, bool NORM, bool GATE>
cudaError_t launch_rows(const void* x, const void* w, const void* bias, const void* res, const void* scale, void* y,
                        const GemvDesc& d, cudaStream_t stream, bool prepare) {
#define KILN_GEMV_M(M) \
  case M: return launch_typed<T, Y, M, R, NORM, GATE>(x, w, bias, res, scale, y, d, stream, prepare)
  switch (d.m) {
    KILN_GEMV_M(1);
    KILN_GEMV_M(2);
    KILN_GEMV_M(3);
    KILN_GEMV_M(4);
    KILN_GEMV_M(5);
    KILN_GEMV_M(6);
    KILN_GEMV_M(7);
    KILN_GEMV_M(8);
    default: return cudaErrorInvalidValue;
  }
#undef KILN_GEMV_M
}

// The instantiated forms: plain (any output), norm (16-bit output), gate (16-bit output, 1 or 2
// outputs per warp, with or without norm).
template <typename T>
cudaError_t launch_t(const void* x, const void* w, const void* bias, const void* res, const void* scale, void* y,
                     const GemvDesc& d, cudaStream_t stream, bool prepare) {
  if (d.gate) {
    if (d.rows_per_warp == 1)
      return d.norm ? launch_rows<T, T, 1, true, true>(x, w, bias, res, scale, y, d, stream, prepare)
                    : launch_rows<T, T, 1, false, true>(x, w, bias, res, scale, y, d, stream, prepare);
    return d.norm ? launch_rows<T, T, 2, true, true>(x, w, bias, res, scale, y, d, stream, prepare)
                  : launch_rows<T, T, 2, false, true>(x, w, bias, res, scale, y, d, stream, prepare);
  }
  if (d.norm) {
    switch (d.rows_per_warp) {
      case 1: return launch_rows<T, T, 1, true, false>(x, w, bias, res, scale, y, d, stream, prepare);
      case 2: return launch_rows<T, T, 2, true, false>(x, w, bias, res, scale, y, d, stream, prepare);
      default: return launch_rows<T, T, 4, true, false>(x, w, bias, res, scale, y, d, stream, prepare);
    }
  }
  if (d.out_f32) {
    switch (d.rows_per_warp) {
      case 1: return launch_rows<T, float, 1, false, false>(x, w, bias, res, scale, y, d, stream, prepare);
      case 2: return launch_rows<T, float, 2, false, false>(x, w, bias, res, scale, y, d, stream, prepare);
      default: return launch_rows<T, float, 4, false, false>(x, w, bias, res, scale, y, d, stream, prepare);
    }
  }
  switch (d.rows_per_warp) {
    case 1: return launch_rows<T, T, 1, false, false>(x, w, bias, res, scale, y, d, stream, prepare);
    case 2: return launch_rows<T, T, 2, false, false>(x, w, bias, res, scale, y, d, stream, prepare);
    default: return launch_rows<T, T, 4, false, false>(x, w, bias, res, scale, y, d, stream, prepare);
  }
}

cudaError_t dispatch(const void* x, const void* w, const void* bias, const void* res, const void* scale, void* y,
                     const GemvDesc& d, cudaStream_t stream, bool prepare) {
  if (!gemv_supports(d)) return cudaErrorInvalidValue;
  return d.t == StorageType::kF16 ? launch_t<__half>(x, w, bias, res, scale, y, d, stream, prepare)
                                  : launch_t<__nv_bfloat16>(x, w, bias, res, scale, y, d, stream, prepare);
}

// ---------------------------------------------------------------- the gate alone
template <typename T>
__global__ void silu_gate_vec_kernel(const T* __restrict__ p, T* __restrict__ y, int64_t rows, int64_t n) {
  const int64_t per_row = n / 8, total = rows * per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, c = (i - r * per_row) * 8;
    const uint4 gq = *reinterpret_cast<const uint4*>(p + r * 2 * n + c);
    const uint4 uq = *reinterpret_cast<const uint4*>(p + r * 2 * n + n + c);
    const uint32_t gs[4] = {gq.x, gq.y, gq.z, gq.w}, us[4] = {uq.x, uq.y, uq.z, uq.w};
    uint32_t o[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 g = to_float2(gs[j], T()), u = to_float2(us[j], T());
      o[j] = from_float2(silu_gate(g.x, u.x), silu_gate(g.y, u.y), T());
    }
    *reinterpret_cast<uint4*>(y + r * n + c) = make_uint4(o[0], o[1], o[2], o[3]);
  }
}

template <typename T>
__global__ void silu_gate_kernel(const T* __restrict__ p, T* __restrict__ y, int64_t rows, int64_t n) {
  const int64_t total = rows * n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / n, c = i - r * n;
    store(y + i, silu_gate(to_float(p[r * 2 * n + c]), to_float(p[r * 2 * n + n + c])));
  }
}

template <typename T>
cudaError_t launch_gate_t(const void* p, void* y, int64_t rows, int64_t n, cudaStream_t stream) {
  const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  const bool vec = sizeof(T) == 2 && n % 8 == 0 && aligned(p) && aligned(y);
  const int64_t items = vec ? rows * (n / 8) : rows * n;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((items + 255) / 256, 65535));
  if constexpr (sizeof(T) == 2) {
    if (vec) {
      silu_gate_vec_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<const T*>(p), static_cast<T*>(y), rows, n);
      return cudaGetLastError();
    }
  }
  silu_gate_kernel<T><<<blocks, 256, 0, stream>>>(static_cast<const T*>(p), static_cast<T*>(y), rows, n);
  return cudaGetLastError();
}

}  // namespace

bool gemv_supports(const GemvDesc& d) {
  const bool rows = d.rows_per_warp == 1 || d.rows_per_warp == 2 || d.rows_per_warp == 4;
  const bool base = d.m >= 1 && d.m <= kGemvMaxM && d.n >= 1 && d.n <= (int64_t{1} << 33) && d.k >= 8 &&
                    d.k % 8 == 0 && rows && (d.t == StorageType::kF16 || d.t == StorageType::kBF16);
  if (!base) return false;
  if (d.norm && (d.out_f32 || static_cast<int64_t>(norm_smem(d, 2)) > kGemvNormSmem)) return false;
  if (d.gate && (d.out_f32 || d.relu || d.rows_per_warp == 4)) return false;
  return true;
}

cudaError_t gemv_prepare(const GemvDesc& d) { return dispatch(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, d, nullptr, true); }

cudaError_t launch_gemv(const void* x, const void* w, const void* bias, const void* residual, const void* norm_scale,
                        void* y, const GemvDesc& d, cudaStream_t stream) {
  if (d.norm && !norm_scale) return cudaErrorInvalidValue;
  if (d.gate && residual) return cudaErrorInvalidValue;
  return dispatch(x, w, bias, residual, norm_scale, y, d, stream, false);
}

cudaError_t launch_silu_gate(const void* p, void* y, int64_t rows, int64_t n, StorageType t, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  if (rows < 0 || n < 0) return cudaErrorInvalidValue;
  if (t == StorageType::kF16) return launch_gate_t<__half>(p, y, rows, n, stream);
  if (t == StorageType::kBF16) return launch_gate_t<__nv_bfloat16>(p, y, rows, n, stream);
  if (t == StorageType::kF32) return launch_gate_t<float>(p, y, rows, n, stream);
  return cudaErrorInvalidValue;
}

}  // namespace kiln::cuda
