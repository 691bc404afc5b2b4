// GPU probing (see device.h).
#include "backends/cuda/device.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "backends/cuda/cuda_check.h"

namespace kiln::cuda {

const DeviceInfo& device_info() {
  static const DeviceInfo info = [] {
    DeviceInfo d;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      cudaGetLastError();  // clear the sticky "no device" error
      return d;
    }
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return d;
    d.available = true;
    d.name = p.name;
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    d.total_memory = p.totalGlobalMem;
    d.sm_count = p.multiProcessorCount;
    d.cudnn_version = cudnnGetVersion();
    d.cublaslt_version = cublasLtGetVersion();
    return d;
  }();
  return info;
}

Status init_device() {
  static const Status done = []() -> Status {
    if (!device_info().available) return unsupported("no CUDA GPU on this machine");
    KILN_CUDA_CHECK(cudaFree(nullptr));  // creates the primary context
    cudnnHandle_t h = nullptr;
    KILN_CUDNN_CHECK(cudnnCreate(&h));
    cudnnDestroy(h);
    cublasLtHandle_t lt = nullptr;
    KILN_CUBLAS_CHECK(cublasLtCreate(&lt));
    cublasLtDestroy(lt);
    return Status::Ok();
  }();
  return done;
}

}  // namespace kiln::cuda
