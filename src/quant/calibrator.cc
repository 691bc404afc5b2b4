// Calibration statistics and methods (see calibrator.h for the definitions and sources).
#include "quant/calibrator.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::quant {

AbsHistogram::AbsHistogram(int bins) : counts_(static_cast<size_t>(std::max(bins, 2)), 0) {}

// Doubles the range until v < range, merging bins pairwise (counts stay exact: each old bin lies
// inside one new bin).
void AbsHistogram::grow_to(double v) {
  if (range_ == 0) {
    // The first range: the next power of two above v (a bin edge layout that merges exactly).
    range_ = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(v))) + 1);
    return;
  }
  const size_t n = counts_.size();
  while (v >= range_) {
    for (size_t i = 0; i < n / 2; ++i) counts_[i] = counts_[2 * i] + counts_[2 * i + 1];
    if (n % 2) counts_[n / 2] = counts_[n - 1];
    std::fill(counts_.begin() + static_cast<std::ptrdiff_t>((n + 1) / 2), counts_.end(), 0);
    range_ *= 2;
  }
}

void AbsHistogram::add(const float* x, int64_t n) {
  double batch_max = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(x[i]));
    if (std::isfinite(a)) batch_max = std::max(batch_max, a);
  }
  if (batch_max > 0 && batch_max >= range_) grow_to(batch_max);
  max_abs_ = std::max(max_abs_, batch_max);
  const double width = range_ > 0 ? range_ / static_cast<double>(counts_.size()) : 1;
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(x[i]));
    if (!std::isfinite(a)) {
      ++non_finite_;
      continue;
    }
    const size_t b = std::min(counts_.size() - 1, static_cast<size_t>(a / width));
    ++counts_[b];
    ++total_;
  }
}

namespace {

Status check(const AbsHistogram& h) {
  if (h.count() == 0) return invalid_argument("calibration: the tensor had no finite value in any batch");
  return Status::Ok();
}

double bin_width(const AbsHistogram& h) { return h.range() / static_cast<double>(h.bins()); }

// Normalizes d to sum 1 with a tiny mass (1e-8 of the total per bin, then renormalized) on its
// empty bins, so KL(P || Q) stays finite where Q lost a bin P has (the smoothing idea of MXNet's
// and TensorRT's entropy calibration, without their subtraction, which fails on long thin tails).
// False when d has no mass.
bool normalize_smooth(std::vector<double>& d) {
  constexpr double kEps = 1e-8;
  double sum = 0;
  for (double v : d) sum += v;
  if (sum <= 0) return false;
  double total = 0;
  for (double& v : d) {
    v = v == 0 ? kEps : v / sum;
    total += v;
  }
  for (double& v : d) v /= total;
  return true;
}

}  // namespace

StatusOr<double> minmax_amax(const AbsHistogram& h) {
  KILN_RETURN_IF_ERROR(check(h));
  return h.max_abs();
}

StatusOr<double> percentile_amax(const AbsHistogram& h, double percentile) {
  KILN_RETURN_IF_ERROR(check(h));
  if (!(percentile > 0 && percentile <= 100))
    return invalid_argument("calibration: percentile " + std::to_string(percentile) + ", expected (0, 100]");
  if (h.max_abs() == 0) return 0.0;
  const double target = percentile / 100.0 * static_cast<double>(h.count());
  int64_t cum = 0;
  for (int i = 0; i < h.bins(); ++i) {
    cum += h.counts()[static_cast<size_t>(i)];
    if (static_cast<double>(cum) >= target) return std::min(h.max_abs(), (i + 1) * bin_width(h));
  }
  return h.max_abs();
}

StatusOr<double> entropy_amax(const AbsHistogram& h, int num_quant_bins) {
  KILN_RETURN_IF_ERROR(check(h));
  if (h.max_abs() == 0) return 0.0;
  const int n = h.bins();
  // The histogram's used part: thresholds past the last non-empty bin change nothing.
  int last = n - 1;
  while (last > 0 && h.counts()[static_cast<size_t>(last)] == 0) --last;
  const int top = last + 1;
  if (top <= num_quant_bins) return std::min(h.max_abs(), top * bin_width(h));
  const std::vector<int64_t>& c = h.counts();
  double best_kl = std::numeric_limits<double>::infinity();
  int best_i = top;
  std::vector<double> p, q;
  for (int i = num_quant_bins; i <= top; ++i) {
    // P: the first i bins, the outliers folded into the last kept bin.
    p.assign(c.begin(), c.begin() + i);
    double outliers = 0;
    for (int k = i; k < n; ++k) outliers += static_cast<double>(c[static_cast<size_t>(k)]);
    p[static_cast<size_t>(i - 1)] += outliers;
    // Q: the first i bins (without the outliers) merged into num_quant_bins levels, each level's
    // mass spread evenly over its non-empty bins.
    q.assign(static_cast<size_t>(i), 0.0);
    const double per = static_cast<double>(i) / num_quant_bins;
    for (int j = 0; j < num_quant_bins; ++j) {
      const int b0 = static_cast<int>(std::floor(j * per));
      const int b1 = j == num_quant_bins - 1 ? i : static_cast<int>(std::floor((j + 1) * per));
      double mass = 0;
      int nonzero = 0;
      for (int k = b0; k < b1; ++k) {
        mass += static_cast<double>(c[static_cast<size_t>(k)]);
        nonzero += c[static_cast<size_t>(k)] != 0;
      }
      if (nonzero == 0) continue;
      for (int k = b0; k < b1; ++k)
        if (c[static_cast<size_t>(k)] != 0) q[static_cast<size_t>(k)] = mass / nonzero;
    }
    if (!normalize_smooth(p) || !normalize_smooth(q)) continue;
    double kl = 0;
    for (int k = 0; k < i; ++k) {
      const double pk = p[static_cast<size_t>(k)];
      if (pk > 0) kl += pk * std::log(pk / q[static_cast<size_t>(k)]);
    }
    if (kl < best_kl) {
      best_kl = kl;
      best_i = i;
    }
  }
  return std::min(h.max_abs(), best_i * bin_width(h));
}

StatusOr<double> mse_amax(const AbsHistogram& h, int levels) {
  KILN_RETURN_IF_ERROR(check(h));
  if (h.max_abs() == 0) return 0.0;
  const double w = bin_width(h);
  int last = h.bins() - 1;
  while (last > 0 && h.counts()[static_cast<size_t>(last)] == 0) --last;
  double best = std::numeric_limits<double>::infinity(), best_amax = h.max_abs();
  // Candidate thresholds: the upper edges of the used bins (the last one capped at max |x|).
  for (int t = 1; t <= last + 1; ++t) {
    const double amax = std::min(h.max_abs(), t * w);
    const double step = amax / levels;
    double err = 0;
    for (int k = 0; k <= last; ++k) {
      const int64_t cnt = h.counts()[static_cast<size_t>(k)];
      if (cnt == 0) continue;
      const double x = (k + 0.5) * w;  // the bin's centre stands for its values
      const double e = x > amax ? x - amax : x - std::round(x / step) * step;
      err += static_cast<double>(cnt) * e * e;
    }
    if (err < best) {
      best = err;
      best_amax = amax;
    }
  }
  return best_amax;
}

}  // namespace kiln::quant
