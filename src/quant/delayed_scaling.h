// Transformer Engine's DelayedScaling recipe applied to calibration (issue 12; TE docs,
// transformer_engine.common.recipe.DelayedScaling): each calibration batch records the tensor's
// amax in a history of length `history_len`; the amax used is the history's `max` or its
// `most_recent` entry, and the FP8 scale is
//     scale = fp8_max / amax / 2^margin      (x_fp8 = x * scale; fp8_max 448 for E4M3, 57344 for E5M2)
// so the calibrated scales match what an FP8-trained model expects. The Q/DQ (ONNX) scale is its
// reciprocal, y_scale = amax * 2^margin / fp8_max. An amax of 0 or a non-finite amax keeps scale 1
// (TE's behaviour). HYBRID uses E4M3 for forward tensors, so calibration (inference) uses E4M3 for
// both formats; E5M2 is for gradients.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/status.h"

namespace kiln::quant {

enum class Fp8Format { kE4M3, kHybrid };
enum class AmaxAlgo { kMax, kMostRecent };

struct DelayedScaling {
  int history_len = 1024;      // batches kept (>= 1)
  AmaxAlgo algo = AmaxAlgo::kMax;
  int margin = 0;              // scale divided by 2^margin (>= 0)
  Fp8Format format = Fp8Format::kHybrid;
  Status check() const;        // InvalidArgument naming the bad field
};

double fp8_forward_max(Fp8Format f);  // 448 (E4M3) for both: forward tensors are E4M3

class AmaxHistory {
 public:
  explicit AmaxHistory(int len);
  void push(double amax);              // one batch's amax (|x| max)
  int size() const { return static_cast<int>(values_.size()); }
  double reduce(AmaxAlgo algo) const;  // 0 when empty
 private:
  std::vector<double> values_;  // ring buffer, oldest overwritten
  int next_ = 0, len_;
};

// The FP8 scale (x_fp8 = x * scale) the recipe gives from `history`.
double delayed_scale(const AmaxHistory& history, const DelayedScaling& recipe);

}  // namespace kiln::quant
