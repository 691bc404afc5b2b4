// Greedy and temperature / top-k / top-p sampling (semantics in sampling.h).
#include "llm/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/philox.h"

namespace kiln::llm {

namespace {

int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return static_cast<int32_t>(best);
}

}  // namespace

Status validate_sampling(const SamplingOptions& o) {
  if (std::isnan(o.temperature)) return invalid_argument("sampling: temperature is NaN");
  if (o.top_k < 0) return invalid_argument("sampling: top_k is " + std::to_string(o.top_k) + ", expected >= 0");
  if (!(o.top_p > 0 && o.top_p <= 1)) return invalid_argument("sampling: top_p is " + std::to_string(o.top_p) + ", expected in (0, 1]");
  if (!(o.repetition_penalty > 0) || std::isinf(o.repetition_penalty))
    return invalid_argument("sampling: repetition_penalty is " + std::to_string(o.repetition_penalty) + ", expected a finite value > 0");
  return Status::Ok();
}

void apply_repetition_penalty(float* logits, int64_t vocab, const std::vector<int32_t>& seen, double penalty) {
  if (penalty == 1.0) return;
  std::vector<bool> done(static_cast<size_t>(vocab), false);
  for (int32_t id : seen) {
    if (id < 0 || id >= vocab || done[static_cast<size_t>(id)]) continue;
    done[static_cast<size_t>(id)] = true;
    // transformers computes in the logits' dtype: float32 here.
    float& v = logits[id];
    v = v < 0 ? static_cast<float>(v * static_cast<float>(penalty)) : static_cast<float>(v / static_cast<float>(penalty));
  }
}

std::vector<double> Sampler::distribution(const float* logits, int64_t vocab) const {
  std::vector<double> p(static_cast<size_t>(vocab), 0.0);
  if (vocab <= 0) return p;
  if (greedy()) {
    p[static_cast<size_t>(argmax(logits, vocab))] = 1.0;
    return p;
  }
  std::vector<double> z(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) z[i] = static_cast<double>(logits[i]) / options_.temperature;
  const double kMinus = -std::numeric_limits<double>::infinity();
  if (options_.top_k > 0 && options_.top_k < vocab) {
    std::vector<double> sorted = z;
    std::nth_element(sorted.begin(), sorted.begin() + (options_.top_k - 1), sorted.end(), std::greater<double>());
    const double kth = sorted[static_cast<size_t>(options_.top_k - 1)];
    for (double& v : z)
      if (v < kth) v = kMinus;
  }
  const double mx = *std::max_element(z.begin(), z.end());
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += (p[i] = z[i] == kMinus ? 0.0 : std::exp(z[i] - mx));
  for (double& v : p) v /= sum;
  if (options_.top_p < 1) {
    std::vector<int64_t> order(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double cum = 0, kept = 0;
    size_t keep = 0;
    while (keep < order.size() && (keep == 0 || cum < options_.top_p)) cum += p[order[keep++]];
    for (size_t i = keep; i < order.size(); ++i) p[order[i]] = 0;
    for (size_t i = 0; i < keep; ++i) kept += p[order[i]];
    for (double& v : p) v /= kept;
  }
  return p;
}

int32_t sample_index(const std::vector<double>& p, double u) {
  double cum = 0;
  int32_t last = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) continue;
    last = static_cast<int32_t>(i);
    cum += p[i];
    if (u < cum) return last;
  }
  return last;  // u beyond the sum's rounding: the last token with mass
}

double device_uniform(uint64_t seed, int64_t position) { return philox_uniform(seed, static_cast<uint64_t>(position)); }

int32_t Sampler::next(const float* logits, int64_t vocab) {
  if (greedy()) return argmax(logits, vocab);
  // 53 random bits -> u in [0, 1): the same on every standard library (std::uniform_real_distribution is not).
  const double u = static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0);
  return sample_index(distribution(logits, vocab), u);
}

}  // namespace kiln::llm
