// Kernels of the 8-bit linear and conv layers (kernels_quant.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backends/cuda/kernels_quant.h"
#include "backends/cuda/storage_access.cuh"

namespace kiln::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void quantize_kernel(StorageType xt, const void* x, int8_t* q, int64_t count, float scale, int zp,
                                bool fp8) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = load(x, i, xt) / scale;  // a division, as QuantizeLinear (not * 1/scale)
    if (fp8) {
      q[i] = static_cast<int8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
    } else {
      const float r = rintf(v) + static_cast<float>(zp);
      q[i] = static_cast<int8_t>(r < -128.f ? -128.f : (r > 127.f ? 127.f : r));
    }
  }
}

// The epilogue's value, each step rounded to float32 as the CPU reference computes it (no fused
// multiply-add): ((a - zp * ws) * (sx * s) + b) + r, then ReLU.
__device__ __forceinline__ float epilogue_value(float a, float zp, float ws, float sx, float s, float b, float r,
                                                bool relu) {
  if (zp != 0.f) a = __fsub_rn(a, __fmul_rn(zp, ws));
  const float o = __fadd_rn(__fadd_rn(__fmul_rn(a, __fmul_rn(sx, s)), b), r);
  return relu && o < 0.f ? 0.f : o;
}

// QuantizeLinear of v (Requant8): the int8 code, or the E4M3FN byte when fp8 — quantize_kernel's
// conversions (a division, not * 1/scale).
__device__ __forceinline__ uint8_t requantize(float v, float ys, int yz, bool fp8) {
  const float f = __fdiv_rn(v, ys);
  if (fp8) return __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3);
  const float r = rintf(f) + static_cast<float>(yz);
  return static_cast<uint8_t>(static_cast<int8_t>(r < -128.f ? -128.f : (r > 127.f ? 127.f : r)));
}

bool eight_bit(StorageType t) { return t == StorageType::kI8 || t == StorageType::kF8E4M3; }

// rt: the residual's storage (yt for a float y); ys / yz: Requant8 when yt is 8-bit.
__global__ void epilogue_kernel(const void* acc, bool acc_int, void* y, StorageType yt, int64_t m, int64_t n,
                                float sx, const float* sw, const float* wsum, int zp, const float* bias, bool relu,
                                const void* res, StorageType rt, float ys, int yz) {
  const bool y8 = yt == StorageType::kI8 || yt == StorageType::kF8E4M3;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < m * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % n;
    const float a = acc_int ? static_cast<float>(static_cast<const int32_t*>(acc)[i]) : static_cast<const float*>(acc)[i];
    const float o = epilogue_value(a, wsum ? static_cast<float>(zp) : 0.f, wsum ? wsum[c] : 0.f, sx, sw[c],
                                   bias ? bias[c] : 0.f, res ? load(res, i, rt) : 0.f, relu);
    if (y8) static_cast<uint8_t*>(y)[i] = requantize(o, ys, yz, yt == StorageType::kF8E4M3);
    else store(y, i, o, yt);
  }
}

__device__ inline float e4m3_value(int8_t b) {
  __nv_fp8_e4m3 v;
  v.__x = static_cast<__nv_fp8_storage_t>(b);
  return static_cast<float>(v);
}

__global__ void gemm_reference_kernel(const int8_t* q, const int8_t* w, void* acc, int64_t m, int64_t n, int64_t k,
                                      bool fp8) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < m * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / n, c = i % n;
    const int8_t* qr = q + r * k;
    const int8_t* wc = w + c * k;
    if (fp8) {
      float a = 0.f;
      for (int64_t j = 0; j < k; ++j) a += e4m3_value(qr[j]) * e4m3_value(wc[j]);
      static_cast<float*>(acc)[i] = a;
    } else {
      int32_t a = 0;
      for (int64_t j = 0; j < k; ++j) a += static_cast<int32_t>(qr[j]) * static_cast<int32_t>(wc[j]);
      static_cast<int32_t*>(acc)[i] = a;
    }
  }
}

__global__ void conv_reference_kernel(const int8_t* q, const int8_t* w, void* acc, Conv8Geometry g, bool fp8) {
  const int64_t total = g.n * g.oh * g.ow * g.k;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = i % g.k, p = i / g.k;
    const int64_t ox = p % g.ow, oy = (p / g.ow) % g.oh, b = p / (g.ow * g.oh);
    int32_t ai = 0;
    float af = 0.f;
    for (int64_t r = 0; r < g.r; ++r) {
      const int64_t iy = oy * g.stride_h - g.pad_h + r * g.dil_h;
      if (iy < 0 || iy >= g.h) continue;
      for (int64_t s = 0; s < g.s; ++s) {
        const int64_t ix = ox * g.stride_w - g.pad_w + s * g.dil_w;
        if (ix < 0 || ix >= g.w) continue;
        const int8_t* qp = q + ((b * g.h + iy) * g.w + ix) * g.c;
        const int8_t* wp = w + ((k * g.r + r) * g.s + s) * g.c;
        for (int64_t c = 0; c < g.c; ++c) {
          if (fp8) af += e4m3_value(qp[c]) * e4m3_value(wp[c]);
          else ai += static_cast<int32_t>(qp[c]) * static_cast<int32_t>(wp[c]);
        }
      }
    }
    if (fp8) static_cast<float*>(acc)[i] = af;
    else static_cast<int32_t*>(acc)[i] = ai;
  }
}

// 8 elements per thread (one Vec8 load: 16 bytes of fp16/bf16 or two float4, one 8-byte store):
// the activation is read once at full width.
template <typename T>
__global__ void quantize8_kernel(const T* x, int8_t* q, int64_t groups, float scale, int zp, bool fp8) {
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v[8];
    Vec8<T>::ld(x, g * 8, v);
    uint8_t b[8];
    for (int j = 0; j < 8; ++j) {
      const float f = v[j] / scale;  // a division, as QuantizeLinear (not * 1/scale)
      if (fp8) {
        b[j] = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3);
      } else {
        const float r = rintf(f) + static_cast<float>(zp);
        b[j] = static_cast<uint8_t>(static_cast<int8_t>(r < -128.f ? -128.f : (r > 127.f ? 127.f : r)));
      }
    }
    uint2 out;
    out.x = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
    out.y = b[4] | (b[5] << 8) | (b[6] << 16) | (static_cast<uint32_t>(b[7]) << 24);
    reinterpret_cast<uint2*>(q)[g] = out;
  }
}

// 4 outputs of one row per thread: one 16-byte load of the accumulator, the scales and bias as
// float4, one store of 4 values.
__global__ void epilogue4_kernel(const void* acc, bool acc_int, void* y, StorageType yt, int64_t groups, int64_t n4,
                                 float sx, const float* sw, const float* wsum, int zp, const float* bias, bool relu,
                                 const void* res, StorageType rt, float ys, int yz) {
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c4 = g % n4;
    float a[4];
    if (acc_int) {
      const int4 v = reinterpret_cast<const int4*>(acc)[g];
      a[0] = static_cast<float>(v.x); a[1] = static_cast<float>(v.y);
      a[2] = static_cast<float>(v.z); a[3] = static_cast<float>(v.w);
    } else {
      const float4 v = reinterpret_cast<const float4*>(acc)[g];
      a[0] = v.x; a[1] = v.y; a[2] = v.z; a[3] = v.w;
    }
    const float4 s = reinterpret_cast<const float4*>(sw)[c4];
    const float sc[4] = {s.x, s.y, s.z, s.w};
    float bb[4] = {0.f, 0.f, 0.f, 0.f}, ws[4] = {0.f, 0.f, 0.f, 0.f};
    if (bias) {
      const float4 b = reinterpret_cast<const float4*>(bias)[c4];
      bb[0] = b.x; bb[1] = b.y; bb[2] = b.z; bb[3] = b.w;
    }
    if (wsum && zp) {
      const float4 w = reinterpret_cast<const float4*>(wsum)[c4];
      ws[0] = w.x; ws[1] = w.y; ws[2] = w.z; ws[3] = w.w;
    }
    float rr[4] = {0.f, 0.f, 0.f, 0.f};
    if (res) {
      if (rt == StorageType::kF16) {
        const uint2 v = reinterpret_cast<const uint2*>(res)[g];
        const __half2* h = reinterpret_cast<const __half2*>(&v);
        const float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]);
        rr[0] = f0.x; rr[1] = f0.y; rr[2] = f1.x; rr[3] = f1.y;
      } else if (rt == StorageType::kBF16) {
        const uint2 v = reinterpret_cast<const uint2*>(res)[g];
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
        const float2 f0 = __bfloat1622float2(h[0]), f1 = __bfloat1622float2(h[1]);
        rr[0] = f0.x; rr[1] = f0.y; rr[2] = f1.x; rr[3] = f1.y;
      } else {
        const float4 v = reinterpret_cast<const float4*>(res)[g];
        rr[0] = v.x; rr[1] = v.y; rr[2] = v.z; rr[3] = v.w;
      }
    }
    float o[4];
    for (int j = 0; j < 4; ++j)
      o[j] = epilogue_value(a[j], wsum ? static_cast<float>(zp) : 0.f, ws[j], sx, sc[j], bb[j], rr[j], relu);
    if (yt == StorageType::kI8 || yt == StorageType::kF8E4M3) {
      const bool f8 = yt == StorageType::kF8E4M3;
      const uint32_t b0 = requantize(o[0], ys, yz, f8), b1 = requantize(o[1], ys, yz, f8),
                     b2 = requantize(o[2], ys, yz, f8), b3 = requantize(o[3], ys, yz, f8);
      reinterpret_cast<uint32_t*>(y)[g] = b0 | (b1 << 8) | (b2 << 16) | (b3 << 24);
    } else if (yt == StorageType::kF16) {
      __half2 h[2] = {__floats2half2_rn(o[0], o[1]), __floats2half2_rn(o[2], o[3])};
      reinterpret_cast<uint2*>(y)[g] = *reinterpret_cast<const uint2*>(h);
    } else if (yt == StorageType::kBF16) {
      __nv_bfloat162 h[2] = {__floats2bfloat162_rn(o[0], o[1]), __floats2bfloat162_rn(o[2], o[3])};
      reinterpret_cast<uint2*>(y)[g] = *reinterpret_cast<const uint2*>(h);
    } else {
      reinterpret_cast<float4*>(y)[g] = make_float4(o[0], o[1], o[2], o[3]);
    }
  }
}

int blocks_for(int64_t count) {
  const int64_t b = (count + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

}  // namespace

static bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

cudaError_t launch_quantize_8bit(StorageType xt, const void* x, int8_t* q, int64_t count, float scale,
                                 int zero_point, bool fp8, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (count % 8 == 0 && aligned16(x) && (reinterpret_cast<uintptr_t>(q) & 7) == 0) {
    const int64_t groups = count / 8;
    switch (xt) {
      case StorageType::kF16:
        quantize8_kernel<__half><<<blocks_for(groups), kThreads, 0, stream>>>(static_cast<const __half*>(x), q, groups,
                                                                              scale, zero_point, fp8);
        return cudaGetLastError();
      case StorageType::kBF16:
        quantize8_kernel<__nv_bfloat16><<<blocks_for(groups), kThreads, 0, stream>>>(
            static_cast<const __nv_bfloat16*>(x), q, groups, scale, zero_point, fp8);
        return cudaGetLastError();
      case StorageType::kF32:
        quantize8_kernel<float><<<blocks_for(groups), kThreads, 0, stream>>>(static_cast<const float*>(x), q, groups,
                                                                             scale, zero_point, fp8);
        return cudaGetLastError();
      default: break;
    }
  }
  quantize_kernel<<<blocks_for(count), kThreads, 0, stream>>>(xt, x, q, count, scale, zero_point, fp8);
  return cudaGetLastError();
}

cudaError_t launch_dequant_epilogue(const void* acc, bool acc_int, void* y, StorageType yt, int64_t m, int64_t n,
                                    float x_scale, const float* w_scale, const float* wsum, int zero_point,
                                    const float* bias, bool relu, cudaStream_t stream, const void* residual,
                                    const Requant8* out8) {
  if (m * n <= 0) return cudaSuccess;
  const bool y8 = eight_bit(yt);
  if (y8 && !out8) return cudaErrorInvalidValue;
  const StorageType rt = y8 ? out8->res_type : yt;
  const float ys = y8 ? out8->y_scale : 1.f;
  const int yz = y8 ? out8->y_zero_point : 0;
  if (y8 && (!(ys > 0.f) || eight_bit(rt))) return cudaErrorInvalidValue;
  auto mask = [](StorageType t) -> uintptr_t { return t == StorageType::kF32 ? 15 : (eight_bit(t) ? 3 : 7); };
  auto is_float = [](StorageType t) {
    return t == StorageType::kF32 || t == StorageType::kF16 || t == StorageType::kBF16;
  };
  if (n % 4 == 0 && aligned16(acc) && aligned16(w_scale) && (!bias || aligned16(bias)) && (!wsum || aligned16(wsum)) &&
      (reinterpret_cast<uintptr_t>(y) & mask(yt)) == 0 && (reinterpret_cast<uintptr_t>(residual) & mask(rt)) == 0 &&
      (is_float(yt) || y8) && (!residual || is_float(rt))) {
    const int64_t groups = m * n / 4;
    epilogue4_kernel<<<blocks_for(groups), kThreads, 0, stream>>>(acc, acc_int, y, yt, groups, n / 4, x_scale, w_scale,
                                                                  wsum, zero_point, bias, relu, residual, rt, ys, yz);
    return cudaGetLastError();
  }
  epilogue_kernel<<<blocks_for(m * n), kThreads, 0, stream>>>(acc, acc_int, y, yt, m, n, x_scale, w_scale, wsum,
                                                              zero_point, bias, relu, residual, rt, ys, yz);
  return cudaGetLastError();
}

cudaError_t launch_conv_8bit_reference(const int8_t* q, const int8_t* w, void* acc, const Conv8Geometry& g, bool fp8,
                                       cudaStream_t stream) {
  const int64_t total = g.n * g.oh * g.ow * g.k;
  if (total <= 0) return cudaSuccess;
  conv_reference_kernel<<<blocks_for(total), kThreads, 0, stream>>>(q, w, acc, g, fp8);
  return cudaGetLastError();
}

cudaError_t launch_gemm_8bit_reference(const int8_t* q, const int8_t* w, void* acc, int64_t m, int64_t n, int64_t k,
                                       bool fp8, cudaStream_t stream) {
  if (m * n <= 0) return cudaSuccess;
  gemm_reference_kernel<<<blocks_for(m * n), kThreads, 0, stream>>>(q, w, acc, m, n, k, fp8);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
