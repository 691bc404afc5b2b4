// Device-side element access in a layer's storage type (kernels.h StorageType): every float
// kernel loads into float and stores back with round-to-nearest, so one kernel serves fp32,
// fp16, bf16 and (for conversions) int32/int64 tensors. Included by the .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/kernels.h"

namespace kiln::cuda {

__device__ __forceinline__ float load(const void* p, int64_t i, StorageType t) {
  switch (t) {
    case StorageType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case StorageType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case StorageType::kI32: return static_cast<float>(static_cast<const int32_t*>(p)[i]);
    case StorageType::kI64: return static_cast<float>(static_cast<const int64_t*>(p)[i]);
    case StorageType::kBool: return static_cast<const uint8_t*>(p)[i] != 0 ? 1.f : 0.f;
    case StorageType::kI8: return static_cast<float>(static_cast<const int8_t*>(p)[i]);  // the code, not its value
    case StorageType::kF8E4M3: return static_cast<float>(static_cast<const uint8_t*>(p)[i]);
    case StorageType::kF64: return static_cast<float>(static_cast<const double*>(p)[i]);
    case StorageType::kU64: return static_cast<float>(static_cast<const uint64_t*>(p)[i]);
    case StorageType::kF32: break;
  }
  return static_cast<const float*>(p)[i];
}
__device__ __forceinline__ void store(void* p, int64_t i, float v, StorageType t) {
  switch (t) {
    case StorageType::kF16: static_cast<__half*>(p)[i] = __float2half_rn(v); return;
    case StorageType::kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); return;
    case StorageType::kI32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); return;
    case StorageType::kI64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); return;
    case StorageType::kBool: static_cast<uint8_t*>(p)[i] = v != 0.f ? 1 : 0; return;
    case StorageType::kI8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); return;  // no float kernel writes codes
    case StorageType::kF8E4M3: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); return;
    case StorageType::kF64: static_cast<double*>(p)[i] = v; return;
    case StorageType::kU64: static_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v); return;
    case StorageType::kF32: break;
  }
  static_cast<float*>(p)[i] = v;
}

// Eight consecutive elements of a float storage type as float, one 16-byte access (two for
// float32): elements [i, i + 8) with i a multiple of 8 and the pointer 16-byte aligned. Rounding
// to nearest on store, as store() does.
template <typename T>
struct Vec8;
template <>
struct Vec8<__half> {
  static __device__ __forceinline__ void ld(const void* p, int64_t i, float* v) {
    const uint4 u = *reinterpret_cast<const uint4*>(static_cast<const __half*>(p) + i);
    const __half2* h = reinterpret_cast<const __half2*>(&u);
    for (int j = 0; j < 4; ++j) {
      const float2 f = __half22float2(h[j]);
      v[2 * j] = f.x;
      v[2 * j + 1] = f.y;
    }
  }
  static __device__ __forceinline__ void st(void* p, int64_t i, const float* v) {
    uint4 u;
    __half2* h = reinterpret_cast<__half2*>(&u);
    for (int j = 0; j < 4; ++j) h[j] = __floats2half2_rn(v[2 * j], v[2 * j + 1]);
    *reinterpret_cast<uint4*>(static_cast<__half*>(p) + i) = u;
  }
};
template <>
struct Vec8<__nv_bfloat16> {
  static __device__ __forceinline__ void ld(const void* p, int64_t i, float* v) {
    const uint4 u = *reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p) + i);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
    for (int j = 0; j < 4; ++j) {
      const float2 f = __bfloat1622float2(h[j]);
      v[2 * j] = f.x;
      v[2 * j + 1] = f.y;
    }
  }
  static __device__ __forceinline__ void st(void* p, int64_t i, const float* v) {
    uint4 u;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
    for (int j = 0; j < 4; ++j) h[j] = __floats2bfloat162_rn(v[2 * j], v[2 * j + 1]);
    *reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p) + i) = u;
  }
};
template <>
struct Vec8<float> {
  static __device__ __forceinline__ void ld(const void* p, int64_t i, float* v) {
    const float4 a = reinterpret_cast<const float4*>(static_cast<const float*>(p) + i)[0];
    const float4 b = reinterpret_cast<const float4*>(static_cast<const float*>(p) + i)[1];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
  }
  static __device__ __forceinline__ void st(void* p, int64_t i, const float* v) {
    reinterpret_cast<float4*>(static_cast<float*>(p) + i)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(static_cast<float*>(p) + i)[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
};

// Calls f(T{}) with the device element type of storage `t` — float, __half, __nv_bfloat16,
// int32_t, int64_t, double, uint64_t, and uint8_t for bool (one byte 0 / 1) — and returns what f
// returns; cudaErrorInvalidValue for bool when `with_bool` is false. The one switch over
// StorageType the typed kernels dispatch through (host code).
template <typename F>
cudaError_t with_storage_type(StorageType t, bool with_bool, F f) {
  switch (t) {
    case StorageType::kF32: return f(float{});
    case StorageType::kF16: return f(__half{});
    case StorageType::kBF16: return f(__nv_bfloat16{});
    case StorageType::kI32: return f(int32_t{});
    case StorageType::kI64: return f(int64_t{});
    case StorageType::kF64: return f(double{});
    case StorageType::kU64: return f(uint64_t{});
    case StorageType::kBool: return with_bool ? f(uint8_t{}) : cudaErrorInvalidValue;
    case StorageType::kI8: case StorageType::kF8E4M3: return cudaErrorInvalidValue;  // QuantConv's codes only
  }
  return cudaErrorInvalidValue;
}

}  // namespace kiln::cuda
