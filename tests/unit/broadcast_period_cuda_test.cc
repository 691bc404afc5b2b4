// cuda::broadcast_period (kernels.h), the rule that sends a broadcasting pointwise / FusedPointwise
// operand to the 16-byte vector path (docs/decisions/0082): checked against the stride walk the
// general kernels do, on every broadcast pattern of small shapes and on transposed views.
#ifdef KILN_HAVE_CUDA
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "backends/cuda/kernels.h"

namespace kiln::cuda {
namespace {

// The operand offset of output element i, as pointwise_kernel computes it.
int64_t walk(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, int64_t i) {
  int64_t off = 0;
  for (int k = static_cast<int>(dims.size()) - 1; k >= 0; --k) {
    off += (i % dims[k]) * strides[k];
    i /= dims[k];
  }
  return off;
}

// Whether offsets(i) == i mod p for every i.
bool has_period(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, int64_t total, int64_t p) {
  for (int64_t i = 0; i < total; ++i)
    if (walk(dims, strides, i) != i % p) return false;
  return true;
}

void check(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  const int64_t total = std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<int64_t>());
  const int64_t p = broadcast_period(dims.data(), strides.data(), static_cast<int>(dims.size()));
  std::string what = "dims";
  for (size_t k = 0; k < dims.size(); ++k) what += " " + std::to_string(dims[k]) + ":" + std::to_string(strides[k]);
  if (p > 0) {
    EXPECT_TRUE(has_period(dims, strides, total, p)) << what << " period " << p;
  } else {
    EXPECT_EQ(p, -1) << what;
    for (int64_t q = 1; q <= total; ++q) EXPECT_FALSE(has_period(dims, strides, total, q)) << what << " has period " << q;
  }
}

TEST(BroadcastPeriodCuda, EveryBroadcastPatternMatchesTheStrideWalk) {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 400; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> dims(rank);
    for (auto& d : dims) d = 1 + static_cast<int64_t>(rng() % 4);
    // The operand keeps or broadcasts each dim (dense strides over the kept ones, 0 elsewhere).
    const unsigned keep = rng();
    std::vector<int64_t> strides(rank);
    int64_t stride = 1;
    for (int k = rank - 1; k >= 0; --k) {
      const bool kept = (keep >> k) & 1u;
      strides[k] = kept && dims[k] != 1 ? stride : 0;
      if (kept) stride *= dims[k];
    }
    check(dims, strides);
  }
}

TEST(BroadcastPeriodCuda, KnownShapes) {
  // [B, S, H] + [S, H]: S*H; + [H]: H; + [B, 1, H]: not periodic; same shape: total; scalar: 1.
  const std::vector<int64_t> d = {2, 3, 4};
  EXPECT_EQ(broadcast_period(d.data(), std::vector<int64_t>{0, 4, 1}.data(), 3), 12);
  EXPECT_EQ(broadcast_period(d.data(), std::vector<int64_t>{0, 0, 1}.data(), 3), 4);
  EXPECT_EQ(broadcast_period(d.data(), std::vector<int64_t>{4, 0, 1}.data(), 3), -1);
  EXPECT_EQ(broadcast_period(d.data(), std::vector<int64_t>{12, 4, 1}.data(), 3), 24);
  EXPECT_EQ(broadcast_period(d.data(), std::vector<int64_t>{0, 0, 0}.data(), 3), 1);
  // A transposed view ([2, 4, 3] read as [2, 3, 4]) is not periodic.
  check(d, {12, 1, 3});
  // Size-1 output dims carry any stride.
  const std::vector<int64_t> d1 = {1, 3, 1, 4};
  EXPECT_EQ(broadcast_period(d1.data(), std::vector<int64_t>{99, 4, 7, 1}.data(), 4), 12);
  check(d1, {99, 4, 7, 1});
}

}  // namespace
}  // namespace kiln::cuda
#endif
