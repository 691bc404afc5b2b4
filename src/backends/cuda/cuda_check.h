// One check family for CUDA runtime, cuDNN and cuBLASLt calls: on failure, return a Status
// naming the call, the library's error string, file and line. For use in functions that
// return Status (or StatusOr).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "kiln/status.h"

namespace kiln::cuda {

inline Status cuda_status(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return Status::Ok();
  const StatusCode code = e == cudaErrorMemoryAllocation ? StatusCode::kOutOfMemory : StatusCode::kInternal;
  return Status(code, std::string(call) + " failed: " + cudaGetErrorString(e) + " (" + file + ":" + std::to_string(line) + ")");
}
inline Status cudnn_status(cudnnStatus_t e, const char* call, const char* file, int line) {
  if (e == CUDNN_STATUS_SUCCESS) return Status::Ok();
  return internal_error(std::string(call) + " failed: " + cudnnGetErrorString(e) + " (" + file + ":" + std::to_string(line) + ")");
}
inline Status cublas_status(cublasStatus_t e, const char* call, const char* file, int line) {
  if (e == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return internal_error(std::string(call) + " failed: cublasStatus " + std::to_string(static_cast<int>(e)) + " (" + file +
                        ":" + std::to_string(line) + ")");
}

}  // namespace kiln::cuda

#define KILN_CUDA_CHECK(call) KILN_RETURN_IF_ERROR(::kiln::cuda::cuda_status((call), #call, __FILE__, __LINE__))
#define KILN_CUDNN_CHECK(call) KILN_RETURN_IF_ERROR(::kiln::cuda::cudnn_status((call), #call, __FILE__, __LINE__))
#define KILN_CUBLAS_CHECK(call) KILN_RETURN_IF_ERROR(::kiln::cuda::cublas_status((call), #call, __FILE__, __LINE__))
