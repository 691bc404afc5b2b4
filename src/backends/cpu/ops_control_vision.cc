// placeholder
#include "backends/cpu/ops_control.h"
namespace kiln::cpu {
void register_control_vision_kernels(KernelRegistry& r) {}
}  // namespace kiln::cpu
