// Accuracy metrics of `kiln compare`: one output of the plan against the reference.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace kiln::cli {

struct OutputMetrics {
  std::string mismatch;        // non-empty when dtype or shape differ (then no numbers)
  double max_abs = 0;          // max |a - r|
  double max_rel = 0;          // max |a - r| / |r| over elements with |r| > 0
  double normalized = 0;       // max |a - r| / max |r| (0 when both are all zero)
  double cosine = 1;           // cosine similarity of the flattened tensors (1 when both are zero)
  double topk_agreement = 1;   // fraction of last-axis rows whose top-k index sets agree
  int top_k = 0;               // k used (min(k, last dim)); 0 when not applicable
  int64_t violations = 0;      // elements with |a - r| > atol + rtol * |r| (NaN vs non-NaN counts)
  bool within_tolerance() const { return mismatch.empty() && violations == 0; }
};

OutputMetrics compare_outputs(const Tensor& actual, const Tensor& reference, int top_k, double atol, double rtol);

}  // namespace kiln::cli
