// kv_pool_device.h with the CUDA backend: device_alloc (gpu_model.h) reports failures with the
// device's free memory; cudaMemset zero-fills.
#include <cuda_runtime.h>

#include <cstring>

#include "backends/cuda/gpu_model.h"
#include "llm/kv_pool_device.h"

namespace kiln::llm {

StatusOr<void*> kv_device_alloc_zeroed(size_t bytes, const std::string& what) {
  void* p = nullptr;
  KILN_RETURN_IF_ERROR(cuda::device_alloc(&p, bytes, what));
  if (cudaError_t e = cudaMemset(p, 0, bytes); e != cudaSuccess) {
    cudaFree(p);
    return internal_error(std::string("cudaMemset of ") + what + ": " + cudaGetErrorString(e));
  }
  return p;
}

void kv_device_free(void* p) {
  if (p) cudaFree(p);
}

void kv_device_memory(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = *total_bytes = 0;
  if (cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error of a machine without a GPU
    *free_bytes = *total_bytes = 0;
  }
}

namespace {
Status cuda_status(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status::Ok();
  cudaGetLastError();
  return internal_error(what + ": " + cudaGetErrorString(e));
}
}  // namespace

StatusOr<void*> llm_pinned_alloc(size_t bytes, const std::string& what) {
  void* p = nullptr;
  if (cudaError_t e = cudaMallocHost(&p, bytes); e != cudaSuccess) {
    cudaGetLastError();
    return Status(StatusCode::kOutOfMemory, "cudaMallocHost of " + std::to_string(bytes) + " bytes for " + what + ": " +
                                                cudaGetErrorString(e));
  }
  std::memset(p, 0, bytes);
  return p;
}

void llm_pinned_free(void* p) {
  if (p) cudaFreeHost(p);
}

StatusOr<CudaStream> llm_stream_create() {
  cudaStream_t s = nullptr;
  KILN_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "LlmRunner: cudaStreamCreate"));
  return s;
}

void llm_stream_destroy(CudaStream s) {
  if (s) cudaStreamDestroy(s);
}

Status llm_copy_async(void* dst, const void* src, size_t bytes, CudaStream s, const char* what) {
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), std::string("cudaMemcpyAsync of ") + what);
}

Status llm_stream_sync(CudaStream s, const char* what) {
  return cuda_status(cudaStreamSynchronize(s), std::string("cudaStreamSynchronize after ") + what);
}

StatusOr<void*> llm_graph_capture(CudaStream s, const std::function<Status()>& record) {
  KILN_RETURN_IF_ERROR(cuda_status(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture"));
  Status recorded = record();
  cudaGraph_t graph = nullptr;
  cudaError_t end = cudaStreamEndCapture(s, &graph);
  if (!recorded.ok()) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    return recorded;
  }
  KILN_RETURN_IF_ERROR(cuda_status(end, "cudaStreamEndCapture"));
  cudaGraphExec_t exec = nullptr;
  cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  KILN_RETURN_IF_ERROR(cuda_status(inst, "cudaGraphInstantiate"));
  return static_cast<void*>(exec);
}

Status llm_graph_launch(void* exec, CudaStream s) {
  return cuda_status(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), s), "cudaGraphLaunch");
}

void llm_graph_destroy(void* exec) {
  if (exec) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
}

}  // namespace kiln::llm
