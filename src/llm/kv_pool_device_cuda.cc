// kv_pool_device.h with the CUDA backend: device_alloc (gpu_model.h) reports failures with the
// device's free memory; cudaMemset zero-fills.
#include <cuda_runtime.h>

#include "backends/cuda/gpu_model.h"
#include "llm/kv_pool_device.h"

namespace kiln::llm {

StatusOr<void*> kv_device_alloc_zeroed(size_t bytes, const std::string& what) {
  void* p = nullptr;
  KILN_RETURN_IF_ERROR(cuda::device_alloc(&p, bytes, what));
  if (cudaError_t e = cudaMemset(p, 0, bytes); e != cudaSuccess) {
    cudaFree(p);
    return internal_error(std::string("cudaMemset of ") + what + ": " + cudaGetErrorString(e));
  }
  return p;
}

void kv_device_free(void* p) {
  if (p) cudaFree(p);
}

void kv_device_memory(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = *total_bytes = 0;
  if (cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error of a machine without a GPU
    *free_bytes = *total_bytes = 0;
  }
}

}  // namespace kiln::llm
