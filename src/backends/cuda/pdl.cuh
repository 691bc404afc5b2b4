// Programmatic dependent launch (CUDA C++ Programming Guide, "Programmatic Dependent Launch and
// Synchronization"; PTX ISA griddepcontrol; compute capability 9.0+; docs/decisions/0092). A kernel
// launched with cudaLaunchAttributeProgrammaticStreamSerialization may start while the kernel
// before it on the stream is still running, once every block of that kernel has called
// pdl_trigger() (or exited); it must call pdl_wait() — which returns when that kernel has completed
// and its memory is visible — before it reads anything the earlier kernels wrote or writes anything
// they read. Work before the wait may only touch memory no kernel of the step writes (weights).
// Both are no-ops below sm_90 and in kernels launched without the attribute.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <utility>

namespace kiln::cuda {

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether the current device takes programmatic dependent launches (compute capability 9.0+);
// cached per device.
inline bool pdl_available() {
  static std::atomic<int> known[64] = {};  // 0: not asked yet, 1: no, 2: yes
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    cudaGetLastError();
    return false;
  }
  int v = known[dev].load(std::memory_order_relaxed);
  if (v == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) cudaGetLastError();
    v = major >= 9 ? 2 : 1;
    known[dev].store(v, std::memory_order_relaxed);
  }
  return v == 2;
}

// kernel<<<grid, block, smem, stream>>>(args...), as a programmatic dependent launch where the
// device takes one (pdl_available(); the kernel must call pdl_wait() before touching the step's
// tensors). Returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t launch_pdl(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, void (*kernel)(Params...),
                       Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_available() ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace kiln::cuda
