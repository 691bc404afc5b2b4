// Builds the CPU kernel registry from the per-family registration functions.
#include "backends/cpu/cpu_kernel.h"

namespace kiln {

const char* backend_name(BackendKind b) {
  switch (b) {
    case BackendKind::kCpu: return "cpu";
    case BackendKind::kCuda: return "cuda";
  }
  return "unknown";
}

namespace cpu {

Status KernelContext::require_inputs(int n) const {
  for (int i = 0; i < n; ++i)
    if (!has_input(i)) return fail("required input " + std::to_string(i) + " is missing");
  return Status::Ok();
}

const KernelRegistry& KernelRegistry::get() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    register_elementwise_kernels(r);
    register_nn_kernels(r);
    register_movement_kernels(r);
    register_reduce_kernels(r);
    register_control_kernels(r);
    register_fused_kernels(r);
    register_sequence_kernels(r);
    return r;
  }();
  return registry;
}

}  // namespace cpu
}  // namespace kiln
