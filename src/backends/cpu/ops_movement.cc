// CPU reference kernels: movement family (to be filled in).
#include "backends/cpu/cpu_kernel.h"

namespace kiln::cpu {

void register_movement_kernels(KernelRegistry& r) {}

}  // namespace kiln::cpu
