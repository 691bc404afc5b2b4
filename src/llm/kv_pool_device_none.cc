// kv_pool_device.h without the CUDA backend: there is no device memory to hand out.
#include "llm/kv_pool_device.h"

namespace kiln::llm {

StatusOr<void*> kv_device_alloc_zeroed(size_t bytes, const std::string& what) {
  return unsupported("device memory for " + what + ": this build of Kiln has no CUDA backend");
}

void kv_device_free(void*) {}

void kv_device_memory(size_t* free_bytes, size_t* total_bytes) { *free_bytes = *total_bytes = 0; }

StatusOr<void*> llm_pinned_alloc(size_t, const std::string& what) {
  return unsupported("pinned memory for " + what + ": this build of Kiln has no CUDA backend");
}
void llm_pinned_free(void*) {}
StatusOr<CudaStream> llm_stream_create() { return unsupported("a CUDA stream: this build of Kiln has no CUDA backend"); }
void llm_stream_destroy(CudaStream) {}
Status llm_copy_async(void*, const void*, size_t, CudaStream, const char*) {
  return unsupported("this build of Kiln has no CUDA backend");
}
Status llm_stream_sync(CudaStream, const char*) { return unsupported("this build of Kiln has no CUDA backend"); }
StatusOr<void*> llm_graph_capture(CudaStream, const std::function<Status()>&) {
  return unsupported("this build of Kiln has no CUDA backend");
}
Status llm_graph_launch(void*, CudaStream) { return unsupported("this build of Kiln has no CUDA backend"); }
void llm_graph_destroy(void*) {}

}  // namespace kiln::llm
