// What GPU (if any) this process sees, and the library versions a CUDA plan is bound to.
// Compiled only with the CUDA backend; src/backends/gpu_probe.cc answers "no GPU" otherwise.
#pragma once

#include <string>

#include "kiln/status.h"

namespace kiln::cuda {

struct DeviceInfo {
  bool available = false;
  int device = 0;
  std::string name;         // "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  size_t total_memory = 0;  // bytes
  int sm_count = 0;
  size_t cudnn_version = 0;     // cudnnGetVersion(): 91900 for 9.19.0
  size_t cublaslt_version = 0;  // cublasLtGetVersion()
};

// Probes device 0 once (cudaGetDeviceCount == 0 or an error means unavailable).
const DeviceInfo& device_info();

// Creates the device's primary context and loads cuDNN and cuBLASLt (one handle of each made
// and destroyed), once per process: the fixed cost a first engine load pays before its own
// work, reported separately from it. Errors name the failing call.
Status init_device();

}  // namespace kiln::cuda
