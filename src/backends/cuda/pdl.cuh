// Programmatic dependent launch (CUDA C++ Programming Guide, "Programmatic Dependent Launch and
// Synchronization"; PTX ISA griddepcontrol; compute capability 9.0+; docs/decisions/0092). A kernel
// launched with cudaLaunchAttributeProgrammaticStreamSerialization may start while the kernel
// before it on the stream is still running, once every block of that kernel has called
// pdl_trigger() (or exited); it must call pdl_wait() — which returns when that kernel has completed
// and its memory is visible — before it reads anything the earlier kernels wrote or writes anything
// they read. Work before the wait may only touch memory no kernel of the step writes (weights).
// Both are no-ops below sm_90 and in kernels launched without the attribute.
#pragma once

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

}  // namespace kiln::cuda
