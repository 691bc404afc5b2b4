// Device memory for the KV pool of a CUDA plan (kv_cache.h). kv_pool_device_cuda.cc implements it
// with the CUDA backend's device_alloc; kv_pool_device_none.cc (builds without CUDA) reports that
// no GPU is there. Kept apart so the rest of src/llm includes no CUDA header.
#pragma once

#include <cstddef>
#include <string>

#include "kiln/status.h"

namespace kiln::llm {

// cudaMalloc of `bytes`, zero-filled (cudaMemset, synchronous). OutOfMemory naming `what`, the
// bytes and the device's free memory; Unsupported without the CUDA backend.
StatusOr<void*> kv_device_alloc_zeroed(size_t bytes, const std::string& what);
// cudaFree; nullptr is ignored.
void kv_device_free(void* p);
// cudaMemGetInfo: bytes free and total on the current device (0, 0 without CUDA or a GPU).
void kv_device_memory(size_t* free_bytes, size_t* total_bytes);

}  // namespace kiln::llm
