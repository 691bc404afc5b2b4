// Transformer Engine's DelayedScaling recipe for calibration (see delayed_scaling.h).
#include "quant/delayed_scaling.h"

#include <algorithm>
#include <cmath>

namespace kiln::quant {

Status DelayedScaling::check() const {
  if (history_len < 1)
    return invalid_argument("delayed scaling: amax history length " + std::to_string(history_len) + ", expected >= 1");
  if (margin < 0 || margin > 64)
    return invalid_argument("delayed scaling: margin " + std::to_string(margin) + ", expected 0..64");
  return Status::Ok();
}

double fp8_forward_max(Fp8Format) { return 448.0; }

AmaxHistory::AmaxHistory(int len) : len_(std::max(len, 1)) {}

void AmaxHistory::push(double amax) {
  if (static_cast<int>(values_.size()) < len_) {
    values_.push_back(amax);
    return;
  }
  values_[static_cast<size_t>(next_)] = amax;
  next_ = (next_ + 1) % len_;
}

double AmaxHistory::reduce(AmaxAlgo algo) const {
  if (values_.empty()) return 0;
  if (algo == AmaxAlgo::kMostRecent) {
    const int last = static_cast<int>(values_.size()) < len_ ? static_cast<int>(values_.size()) - 1 : (next_ + len_ - 1) % len_;
    return values_[static_cast<size_t>(last)];
  }
  double m = 0;
  for (double v : values_)
    if (std::isfinite(v)) m = std::max(m, v);
  return m;
}

double delayed_scale(const AmaxHistory& history, const DelayedScaling& recipe) {
  const double amax = history.reduce(recipe.algo);
  if (!(amax > 0) || !std::isfinite(amax)) return 1.0;
  return fp8_forward_max(recipe.format) / amax / std::ldexp(1.0, recipe.margin);
}

}  // namespace kiln::quant
