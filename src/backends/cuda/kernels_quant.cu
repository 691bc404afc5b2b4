// Kernels of the 8-bit linear layer (kernels_quant.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backends/cuda/kernels_quant.h"

namespace kiln::cuda {
namespace {

constexpr int kThreads = 256;

__device__ inline float load_as_float(StorageType t, const void* p, int64_t i) {
  switch (t) {
    case StorageType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case StorageType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ inline void store_float(StorageType t, void* p, int64_t i, float v) {
  switch (t) {
    case StorageType::kF16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case StorageType::kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(p)[i] = v;
  }
}

__global__ void quantize_kernel(StorageType xt, const void* x, int8_t* q, int64_t count, float scale, int zp,
                                bool fp8) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = load_as_float(xt, x, i) / scale;  // a division, as QuantizeLinear (not * 1/scale)
    if (fp8) {
      q[i] = static_cast<int8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
    } else {
      const float r = rintf(v) + static_cast<float>(zp);
      q[i] = static_cast<int8_t>(r < -128.f ? -128.f : (r > 127.f ? 127.f : r));
    }
  }
}

__global__ void epilogue_kernel(const void* acc, bool acc_int, void* y, StorageType yt, int64_t m, int64_t n,
                                float sx, const float* sw, const float* wsum, int zp, const float* bias) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < m * n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % n;
    float a = acc_int ? static_cast<float>(static_cast<const int32_t*>(acc)[i]) : static_cast<const float*>(acc)[i];
    if (wsum && zp) a -= static_cast<float>(zp) * wsum[c];
    store_float(yt, y, i, a * (sx * sw[c]) + (bias ? bias[c] : 0.f));
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

int blocks_for(int64_t count) {
  const int64_t b = (count + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

}  // namespace

cudaError_t launch_quantize_8bit(StorageType xt, const void* x, int8_t* q, int64_t count, float scale,
                                 int zero_point, bool fp8, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  quantize_kernel<<<blocks_for(count), kThreads, 0, stream>>>(xt, x, q, count, scale, zero_point, fp8);
  return cudaGetLastError();
}

cudaError_t launch_dequant_epilogue(const void* acc, bool acc_int, void* y, StorageType yt, int64_t m, int64_t n,
                                    float x_scale, const float* w_scale, const float* wsum, int zero_point,
                                    const float* bias, cudaStream_t stream) {
  if (m * n <= 0) return cudaSuccess;
  epilogue_kernel<<<blocks_for(m * n), kThreads, 0, stream>>>(acc, acc_int, y, yt, m, n, x_scale, w_scale, wsum,
                                                              zero_point, bias);
  return cudaGetLastError();
}

cudaError_t launch_gemm_8bit_reference(const int8_t* q, const int8_t* w, void* acc, int64_t m, int64_t n, int64_t k,
                                       bool fp8, cudaStream_t stream) {
  if (m * n <= 0) return cudaSuccess;
  gemm_reference_kernel<<<blocks_for(m * n), kThreads, 0, stream>>>(q, w, acc, m, n, k, fp8);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
