// The grid of Kiln's grid-stride elementwise kernels (kernels_exact.cu, kernels_gather.cu,
// kernels_more.cu): kThreads threads per block and enough blocks for n elements, at least one and
// at most 65535 * 32 (the kernels loop over the rest with a grid stride).
//
// The bandwidth-bound kernels (docs/decisions/0082) size their grid from the SM count instead
// (blocks_for_sms: as many blocks as the GPU keeps resident, the rest by grid stride) and divide
// with FastDivmod (a 32-bit multiply-high and shift) instead of `/` and `%`.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace kiln::cuda {

inline constexpr int kThreads = 256;

inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(b, 65535LL * 32)));
}

// The current device's SM count (cudaDevAttrMultiProcessorCount), cached per device ordinal;
// 132 when the query fails (an H100 / H200 SXM: only the grid size depends on it, not results).
// Safe from several threads (execution contexts on their own threads): the cache is atomic.
inline int sm_count() {
  static std::atomic<int> cached[64];  // static storage: zero-initialized
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    cudaGetLastError();  // a failed query must not be reported by the launch after it
    return 132;
  }
  int n = cached[dev].load(std::memory_order_relaxed);
  if (n == 0) {
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) {
      cudaGetLastError();
      n = 132;
    }
    cached[dev].store(n, std::memory_order_relaxed);
  }
  return n;
}

// Blocks of `threads` for `items` independent work items, one item per thread per grid-stride
// step: at most `waves` times what the SMs hold at once (2048 threads each on sm_80 / sm_90), at
// least 1. A grid of a few resident waves keeps every SM busy without a long tail of small waves.
inline unsigned blocks_for_sms(int64_t items, int threads, int waves = 4) {
  const int64_t need = (items + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(sm_count()) * (2048 / threads) * waves;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(need, cap)));
}

// Division of 32-bit unsigned numerators n < 2^31 by a fixed divisor d >= 1 as a multiply-high
// and a shift (the round-up method of Granlund & Montgomery, "Division by Invariant Integers
// using Multiplication", PLDI 1994): with s = floor(log2 d) and d not a power of two, magic =
// ceil(2^(32 + s) / d) < 2^32 and n * magic / 2^(32 + s) = n / d + n * e / (d * 2^(32 + s)) with
// e = magic * d - 2^(32 + s) < d < 2^(s + 1), so the error term stays below 1 / d for n < 2^31 and
// the floor is exact; a power of two is a plain shift. Built on the host, used on the device
// (tests/unit/fast_divmod_test.cc checks it against `/` and `%`).
struct FastDivmod {
  uint32_t d = 1, magic = 0, shift = 0;
  FastDivmod() = default;
  explicit FastDivmod(uint32_t divisor) : d(divisor < 1 ? 1 : divisor) {
    while ((uint64_t{2} << shift) <= d) ++shift;  // shift = floor(log2 d)
    if ((d & (d - 1)) != 0) magic = static_cast<uint32_t>(((uint64_t{1} << (32 + shift)) + d - 1) / d);
  }
  __host__ __device__ __forceinline__ uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
    return magic ? __umulhi(n, magic) >> shift : n >> shift;
#else
    return magic ? static_cast<uint32_t>((static_cast<uint64_t>(n) * magic) >> 32) >> shift : n >> shift;
#endif
  }
  // n / d and n % d.
  __host__ __device__ __forceinline__ void divmod(uint32_t n, uint32_t& q, uint32_t& r) const {
    q = div(n);
    r = n - q * d;
  }
};

}  // namespace kiln::cuda
