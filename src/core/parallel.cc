// parallel_for (see parallel.h).
#include "core/parallel.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace kiln {

void parallel_for(int64_t n, int64_t work, const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t threads = std::min<int64_t>({hw, 16, n, std::max<int64_t>(1, work >> 16)});
  if (threads <= 1) {
    f(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = (n + threads - 1) / threads;
  for (int64_t t = 1; t < threads; ++t) {
    const int64_t b = t * chunk, e = std::min(n, b + chunk);
    if (b < e) pool.emplace_back([&f, b, e] { f(b, e); });
  }
  f(int64_t{0}, std::min(n, chunk));
  for (auto& th : pool) th.join();
}

}  // namespace kiln
