// Device memory for the KV pool of a CUDA plan (kv_cache.h), and the CUDA calls of the runner's
// device io (runner.cc: pinned staging, one stream, async copies, a CUDA graph per bucket). kv_pool_device_cuda.cc implements it
// with the CUDA backend's device_alloc; kv_pool_device_none.cc (builds without CUDA) reports that
// no GPU is there. Kept apart so the rest of src/llm includes no CUDA header.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "kiln/runtime.h"
#include "kiln/status.h"

namespace kiln::llm {

// cudaMalloc of `bytes`, zero-filled (cudaMemset, synchronous). OutOfMemory naming `what`, the
// bytes and the device's free memory; Unsupported without the CUDA backend.
StatusOr<void*> kv_device_alloc_zeroed(size_t bytes, const std::string& what);
// cudaFree; nullptr is ignored.
void kv_device_free(void* p);
// cudaMemGetInfo: bytes free and total on the current device (0, 0 without CUDA or a GPU).
void kv_device_memory(size_t* free_bytes, size_t* total_bytes);

// cudaMallocHost of `bytes` (pinned host memory, zero-filled): OutOfMemory naming `what`;
// Unsupported without the CUDA backend.
StatusOr<void*> llm_pinned_alloc(size_t bytes, const std::string& what);
// cudaFreeHost; nullptr is ignored.
void llm_pinned_free(void* p);
// cudaStreamCreateWithFlags(cudaStreamNonBlocking) / cudaStreamDestroy (nullptr ignored).
StatusOr<CudaStream> llm_stream_create();
void llm_stream_destroy(CudaStream s);
// cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s); errors name `what`.
Status llm_copy_async(void* dst, const void* src, size_t bytes, CudaStream s, const char* what);
// cudaStreamSynchronize; errors name `what`.
Status llm_stream_sync(CudaStream s, const char* what);
// A CUDA graph captured from what `record` enqueues on `s` (cudaStreamBeginCapture, thread-local
// mode; cudaStreamEndCapture; cudaGraphInstantiate): the executable graph, or the first error of
// `record` or of the capture. llm_graph_launch replays it on `s`; llm_graph_destroy frees it.
StatusOr<void*> llm_graph_capture(CudaStream s, const std::function<Status()>& record);
Status llm_graph_launch(void* exec, CudaStream s);
void llm_graph_destroy(void* exec);

}  // namespace kiln::llm
