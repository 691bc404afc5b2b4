// Host-side data parallelism for bulk work on large tensors: weight conversion and layout changes
// at build and load (checkpoint F16/BF16 -> float32, transposes, concatenations, plan reads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace kiln {

// f(begin, end) over [0, n) in contiguous chunks on up to 16 threads (the calling one included)
// when `work` (elements or bytes touched) is large enough to pay for the threads (>= 64 Ki per
// thread); else inline on the calling thread. Returns when every chunk is done. `f` must be safe
// to call concurrently on disjoint ranges.
void parallel_for(int64_t n, int64_t work, const std::function<void(int64_t, int64_t)>& f);

}  // namespace kiln
