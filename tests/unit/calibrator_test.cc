// Calibration statistics (src/quant/calibrator.h): the histogram keeps every value counted as its
// range grows, and each method picks the amax its definition gives on known distributions —
// min-max the largest |x|, percentile the quantile, entropy a threshold below rare outliers, MSE
// the clipped Gaussian tails at low bit widths, and both near the top of a bounded distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "quant/calibrator.h"
#include "quant/delayed_scaling.h"

namespace kiln::quant {
namespace {

std::vector<float> gaussian(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<float> uniform(int n, float lo, float hi) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = lo + (hi - lo) * (i + 0.5f) / n;
  return v;
}

int64_t sum(const std::vector<int64_t>& c) {
  int64_t s = 0;
  for (int64_t x : c) s += x;
  return s;
}

TEST(Calibrator, HistogramGrowsWithoutLosingCounts) {
  AbsHistogram h(16);
  const float a[] = {0.5f, -1.5f, 0.25f};
  h.add(a, 3);
  EXPECT_EQ(h.range(), 2.0);  // the next power of two above 1.5
  const float b[] = {10.f, -0.1f};
  h.add(b, 2);
  EXPECT_EQ(h.range(), 16.0);
  EXPECT_EQ(h.count(), 5);
  EXPECT_EQ(sum(h.counts()), 5);
  EXPECT_EQ(h.max_abs(), 10.0);
  // 0.1, 0.25, 0.5 and 1.5 lie in the first two bins of width 1; 10 in bin 10.
  EXPECT_EQ(h.counts()[0] + h.counts()[1], 4);
  EXPECT_EQ(h.counts()[10], 1);
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 3.f};
  h.add(bad, 3);
  EXPECT_EQ(h.non_finite(), 2);
  EXPECT_EQ(h.count(), 6);
  EXPECT_EQ(h.max_abs(), 10.0);
}

TEST(Calibrator, MinMaxAndPercentile) {
  AbsHistogram h;
  const auto u = uniform(100000, -1.f, 1.f);
  h.add(u.data(), static_cast<int64_t>(u.size()));
  EXPECT_NEAR(*minmax_amax(h), 1.0, 1e-4);
  const double w = h.range() / h.bins();
  EXPECT_NEAR(*percentile_amax(h, 50), 0.5, w + 1e-3);
  EXPECT_NEAR(*percentile_amax(h, 99), 0.99, w + 1e-3);
  EXPECT_NEAR(*percentile_amax(h, 100), 1.0, 1e-4);
  EXPECT_FALSE(percentile_amax(h, 0).ok());
  EXPECT_FALSE(percentile_amax(h, 100.5).ok());
}

TEST(Calibrator, EntropyClipsRareOutliersAndMseClipsLowBitGaussianTails) {
  // A Gaussian with 10 outliers at +-1000 in 10^6 values: min-max keeps them; entropy clips them
  // (its floor is num_quant_bins bins of the 2048 over [0, 1024): 64).
  auto g = gaussian(1000000, 7);
  for (int i = 0; i < 10; ++i) g[static_cast<size_t>(i)] = i % 2 ? 1000.f : -1000.f;
  AbsHistogram h;
  h.add(g.data(), static_cast<int64_t>(g.size()));
  EXPECT_EQ(*minmax_amax(h), 1000.0);
  const double ent = *entropy_amax(h);
  EXPECT_GE(ent, 64.0);
  EXPECT_LT(ent, 100.0);
  // MSE at 4 bits (7 levels each side) on a plain Gaussian: the optimum clips the tails (about
  // 2.5 sigma; Banner et al., "Post-training 4-bit quantization", 2019), far below max |x| (~5).
  const auto plain = gaussian(1000000, 8);
  AbsHistogram p;
  p.add(plain.data(), static_cast<int64_t>(plain.size()));
  const double mse4 = *mse_amax(p, 7);
  EXPECT_GT(mse4, 1.8);
  EXPECT_LT(mse4, 3.3);
  EXPECT_GT(*mse_amax(p, 127), mse4);  // more levels: a wider range pays off
  // A bounded uniform distribution: both keep (nearly) all of it.
  AbsHistogram b;
  const auto u = uniform(200000, -3.f, 3.f);
  b.add(u.data(), static_cast<int64_t>(u.size()));
  EXPECT_GT(*entropy_amax(b), 2.7);
  EXPECT_LE(*entropy_amax(b), 3.0 + 1e-6);
  EXPECT_GT(*mse_amax(b), 2.7);
  EXPECT_LE(*mse_amax(b), 3.0 + 1e-6);
}

TEST(Calibrator, EmptyAndZeroTensors) {
  AbsHistogram h;
  EXPECT_FALSE(minmax_amax(h).ok());
  EXPECT_FALSE(entropy_amax(h).ok());
  EXPECT_NE(entropy_amax(h).status().message().find("no finite value"), std::string::npos);
  const std::vector<float> z(100, 0.f);
  h.add(z.data(), 100);
  EXPECT_EQ(*minmax_amax(h), 0.0);
  EXPECT_EQ(*percentile_amax(h, 99.9), 0.0);
  EXPECT_EQ(*entropy_amax(h), 0.0);
  EXPECT_EQ(*mse_amax(h), 0.0);
}

}  // namespace
}  // namespace kiln::quant

namespace kiln::quant {
namespace {

TEST(DelayedScaling, HistoryMaxMostRecentMarginAndRing) {
  DelayedScaling r;
  r.history_len = 3;
  AmaxHistory h(r.history_len);
  EXPECT_EQ(delayed_scale(h, r), 1.0);  // no amax yet: scale 1, as Transformer Engine keeps it
  for (double a : {2.0, 8.0, 4.0}) h.push(a);
  EXPECT_EQ(h.reduce(AmaxAlgo::kMax), 8.0);
  EXPECT_EQ(h.reduce(AmaxAlgo::kMostRecent), 4.0);
  EXPECT_DOUBLE_EQ(delayed_scale(h, r), 448.0 / 8.0);
  r.margin = 2;
  EXPECT_DOUBLE_EQ(delayed_scale(h, r), 448.0 / 8.0 / 4.0);
  // The ring keeps the last 3: after two more batches it holds 4, 1, 3 (8 dropped out), after a
  // third 1, 3, 2.
  h.push(1.0);
  h.push(3.0);
  EXPECT_EQ(h.reduce(AmaxAlgo::kMax), 4.0);
  EXPECT_EQ(h.reduce(AmaxAlgo::kMostRecent), 3.0);
  h.push(2.0);
  EXPECT_EQ(h.reduce(AmaxAlgo::kMax), 3.0);
  EXPECT_EQ(h.reduce(AmaxAlgo::kMostRecent), 2.0);
  r.algo = AmaxAlgo::kMostRecent;
  r.margin = 0;
  EXPECT_DOUBLE_EQ(delayed_scale(h, r), 448.0 / 2.0);
  AmaxHistory z(4);
  z.push(0.0);
  EXPECT_EQ(delayed_scale(z, r), 1.0);  // an all-zero tensor keeps scale 1
  DelayedScaling bad;
  bad.history_len = 0;
  EXPECT_FALSE(bad.check().ok());
  bad.history_len = 4;
  bad.margin = -1;
  EXPECT_NE(bad.check().message().find("margin"), std::string::npos);
}

}  // namespace
}  // namespace kiln::quant
