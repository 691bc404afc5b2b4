// CPU reference kernels: reduce family (to be filled in).
#include "backends/cpu/cpu_kernel.h"

namespace kiln::cpu {

void register_reduce_kernels(KernelRegistry& r) {}

}  // namespace kiln::cpu
