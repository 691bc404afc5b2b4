// The grid of Kiln's grid-stride elementwise kernels (kernels_exact.cu, kernels_gather.cu,
// kernels_more.cu): kThreads threads per block and enough blocks for n elements, at least one and
// at most 65535 * 32 (the kernels loop over the rest with a grid stride).
#pragma once

#include <algorithm>
#include <cstdint>

namespace kiln::cuda {

inline constexpr int kThreads = 256;

inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(b, 65535LL * 32)));
}

}  // namespace kiln::cuda
