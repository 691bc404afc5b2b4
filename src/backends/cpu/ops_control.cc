// CPU reference kernels: control family (to be filled in).
#include "backends/cpu/cpu_kernel.h"

namespace kiln::cpu {

void register_control_kernels(KernelRegistry& r) {}

}  // namespace kiln::cpu
