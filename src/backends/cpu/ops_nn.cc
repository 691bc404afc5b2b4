// CPU reference kernels: nn family (to be filled in).
#include "backends/cpu/cpu_kernel.h"

namespace kiln::cpu {

void register_nn_kernels(KernelRegistry& r) {}

}  // namespace kiln::cpu
