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
    case StorageType::kF32: break;
  }
  static_cast<float*>(p)[i] = v;
}

}  // namespace kiln::cuda
