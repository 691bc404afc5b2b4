// Device memory helpers of the CUDA path: allocation with errors that say what and how much,
// and the engine's WeightCache (gpu_model.h): one device copy of each distinct weight, carved
// out of large blocks.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gpu_model.h"
#include "kiln/plan.h"

namespace kiln::cuda {

Status device_alloc(void** p, size_t bytes, const std::string& what) {
  const cudaError_t e = cudaMalloc(p, bytes);
  if (e == cudaSuccess) return Status::Ok();
  cudaGetLastError();  // clear the error so later calls do not report it again
  size_t free_b = 0, total_b = 0;
  const bool info = cudaMemGetInfo(&free_b, &total_b) == cudaSuccess;
  return Status(e == cudaErrorMemoryAllocation ? StatusCode::kOutOfMemory : StatusCode::kInternal,
                "cudaMalloc of " + std::to_string(bytes) + " bytes for " + what + " failed: " + cudaGetErrorString(e) +
                    (info ? " (device memory: " + std::to_string(free_b) + " bytes free of " + std::to_string(total_b) +
                                " total)"
                          : ""));
}

WeightCache::~WeightCache() {
  for (void* b : blocks_) cudaFree(b);
}

StatusOr<void*> WeightCache::place(const void* host, size_t bytes) {
  constexpr size_t kBlock = 64u << 20, kAlign = 256;
  const size_t need = std::max<size_t>((bytes + kAlign - 1) / kAlign * kAlign, kAlign);
  if (need > left_) {
    const size_t size = std::max(need, kBlock);
    void* b = nullptr;
    KILN_RETURN_IF_ERROR(device_alloc(&b, size, "a " + std::to_string(size) + "-byte weight block"));
    blocks_.push_back(b);
    cursor_ = static_cast<char*>(b);
    left_ = size;
  }
  void* p = cursor_;
  cursor_ += need;
  left_ -= need;
  if (bytes) KILN_CUDA_CHECK(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
  bytes_ += bytes;
  return p;
}

StatusOr<void*> WeightCache::get(const void* host, size_t bytes) {
  const std::pair<uint64_t, size_t> key{hash64_words(static_cast<const uint8_t*>(host), bytes), bytes};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = copies_.find(key);
  if (it != copies_.end()) return it->second;
  KILN_ASSIGN_OR_RETURN(void* p, place(host, bytes));
  copies_[key] = p;
  return p;
}

StatusOr<void*> WeightCache::get_packed(const std::string& key, const void* host, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = packed_.find(key);
  if (it != packed_.end()) return it->second;
  KILN_ASSIGN_OR_RETURN(void* p, place(host, bytes));
  packed_[key] = p;
  return p;
}

StatusOr<void*> WeightCache::get_constant(const void* host, size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = constants_.find({host, bytes});
    if (it != constants_.end()) return it->second;
  }
  KILN_ASSIGN_OR_RETURN(void* p, get(host, bytes));
  std::lock_guard<std::mutex> lock(mu_);
  constants_[{host, bytes}] = p;
  return p;
}

void WeightCache::remember_packed(const std::string& key, void* device) {
  std::lock_guard<std::mutex> lock(mu_);
  packed_.emplace(key, device);
}

size_t WeightCache::device_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

int WeightCache::uploads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(copies_.size() + packed_.size());
}

}  // namespace kiln::cuda

namespace kiln::cuda {

bool PackedWeights::is_elided(int value) const { return std::binary_search(elided.begin(), elided.end(), value); }

std::string packed_weight_key(const std::string& layer, const std::string& weight, StorageType st, bool nhwc,
                              const Shape& logical) {
  return layer + "|" + weight + "|" + storage_name(st) + "|" + (nhwc ? "nhwc" : "rowmajor") + "|" + shape_str(logical);
}

}  // namespace kiln::cuda
