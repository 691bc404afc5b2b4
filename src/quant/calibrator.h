// Post-training calibration statistics (issue 12, docs/decisions/0043): what a calibrator sees of
// one tensor over the calibration batches, and the amax (the largest magnitude kept; symmetric
// scale = amax / qmax, e.g. qmax = 127 for INT8, 448 for FP8 E4M3) each calibration method picks.
//
// AbsHistogram collects |x| into `bins` equal bins over [0, range), the range growing by powers of
// two as larger values arrive (bins merged pairwise, so earlier batches stay counted exactly).
// The methods:
//  - min-max: the largest |x| seen.
//  - percentile p: the smallest bin edge below which p% of the values lie.
//  - entropy (TensorRT's "entropy calibration 2"; Migacz, "8-bit Inference with TensorRT", GTC
//    2017): for each candidate threshold i in [num_quant_bins, bins], P = the first i bins with
//    everything above folded into bin i-1, Q = P's first i bins merged into num_quant_bins levels
//    and expanded back over the non-empty bins; both normalized, empty bins given 1e-8 of the
//    mass (smoothing, as MXNet's and TensorRT's implementations smooth); the threshold whose
//    KL(P || Q) is smallest.
//  - MSE: the threshold minimizing the expected squared error of symmetric quantization to
//    `levels` steps (clipping above it, rounding below it), evaluated on the histogram.
// Non-finite inputs (NaN, inf) are counted apart and never set the range.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/status.h"

namespace kiln::quant {

class AbsHistogram {
 public:
  explicit AbsHistogram(int bins = 2048);
  // Adds |x| of `n` floats.
  void add(const float* x, int64_t n);
  int bins() const { return static_cast<int>(counts_.size()); }
  double range() const { return range_; }        // the histogram covers [0, range)
  double max_abs() const { return max_abs_; }    // largest finite |x| seen
  int64_t count() const { return total_; }       // finite values added
  int64_t non_finite() const { return non_finite_; }
  const std::vector<int64_t>& counts() const { return counts_; }

 private:
  void grow_to(double v);
  std::vector<int64_t> counts_;
  double range_ = 0;
  double max_abs_ = 0;
  int64_t total_ = 0, non_finite_ = 0;
};

// The amax each method picks. InvalidArgument for an empty histogram (no finite value seen) or a
// percentile outside (0, 100]; an all-zero tensor gives amax 0 (the caller uses scale 1).
StatusOr<double> minmax_amax(const AbsHistogram& h);
StatusOr<double> percentile_amax(const AbsHistogram& h, double percentile);
StatusOr<double> entropy_amax(const AbsHistogram& h, int num_quant_bins = 128);
StatusOr<double> mse_amax(const AbsHistogram& h, int levels = 127);

}  // namespace kiln::quant
