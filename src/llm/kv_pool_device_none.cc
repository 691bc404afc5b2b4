// kv_pool_device.h without the CUDA backend: there is no device memory to hand out.
#include "llm/kv_pool_device.h"

namespace kiln::llm {

StatusOr<void*> kv_device_alloc_zeroed(size_t bytes, const std::string& what) {
  return unsupported("device memory for " + what + ": this build of Kiln has no CUDA backend");
}

void kv_device_free(void*) {}

void kv_device_memory(size_t* free_bytes, size_t* total_bytes) { *free_bytes = *total_bytes = 0; }

}  // namespace kiln::llm
