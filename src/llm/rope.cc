// RoPE inverse frequencies per scaling type (formulas and sources in rope.h).
#include "llm/rope.h"

#include <cmath>

namespace kiln::llm {

StatusOr<std::vector<float>> rope_inv_freq(const RopeConfig& rope, int64_t head_dim) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    return invalid_argument("RoPE needs a positive even head_dim, got " + std::to_string(head_dim));
  const int64_t half = head_dim / 2;
  std::vector<float> out(static_cast<size_t>(half));
  const double kPi = 3.14159265358979323846;
  for (int64_t i = 0; i < half; ++i) {
    double f = 1.0 / std::pow(rope.theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
    switch (rope.scaling) {
      case RopeScaling::kNone:
      case RopeScaling::kDynamic:
        break;
      case RopeScaling::kLinear:
        f /= rope.factor;
        break;
      case RopeScaling::kLlama3: {
        const double L = static_cast<double>(rope.original_max_position_embeddings);
        const double lo_wavelen = L / rope.low_freq_factor, hi_wavelen = L / rope.high_freq_factor;
        const double wavelen = 2 * kPi / f;
        if (wavelen > lo_wavelen) {
          f /= rope.factor;
        } else if (wavelen >= hi_wavelen) {
          const double s = (L / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
          f = (1 - s) * f / rope.factor + s * f;
        }
        break;
      }
    }
    out[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return out;
}

}  // namespace kiln::llm
