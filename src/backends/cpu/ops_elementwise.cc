// CPU reference kernels: elementwise family (to be filled in).
#include "backends/cpu/cpu_kernel.h"

namespace kiln::cpu {

void register_elementwise_kernels(KernelRegistry& r) {}

}  // namespace kiln::cpu
