// Next-token choice from one row of logits (issue 13 item 4's sampling, on the host): greedy, or
// temperature -> top-k -> top-p -> a draw, in the order transformers' generate applies its
// logits warpers (TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper). The CPU runner's
// sampler and the reference of the GPU sampler (device_sampler.h, docs/decisions/0077), which
// keeps the same tokens and probabilities but draws from Philox4x32-10 (device_uniform) instead
// of this class's std::mt19937_64 stream.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kiln/status.h"

namespace kiln::llm {

struct SamplingOptions {
  // <= 0: greedy (argmax, the lowest id among equal maxima). Otherwise logits are divided by it.
  double temperature = 0.0;
  // > 0: keep the k largest logits (and any equal to the k-th: transformers' `logits < kth` test).
  int64_t top_k = 0;
  // < 1: keep the fewest largest-probability tokens whose probabilities sum to >= top_p (always at
  // least one; transformers' TopPLogitsWarper keeps the same set).
  double top_p = 1.0;
  // Seeds the request's generator, so a request with the same seed, prompt and options draws the
  // same tokens on every run and machine: std::mt19937_64 on the host (Sampler), Philox4x32-10
  // keyed by the seed and the token's position on the GPU (device_uniform): the two streams differ.
  uint64_t seed = 0;
  // != 1: transformers' RepetitionPenaltyLogitsProcessor (applied before temperature, as
  // generate() runs logits processors before warpers): the logit of every id already in the
  // sequence (prompt and generated) is divided by it when positive, multiplied when negative.
  // Must be > 0; > 1 discourages repeats (CTRL, Keskar et al. 2019, suggests 1.2).
  double repetition_penalty = 1.0;
};

// InvalidArgument naming the field: a NaN temperature, top_k < 0, top_p outside (0, 1],
// repetition_penalty not > 0.
Status validate_sampling(const SamplingOptions& options);

// Applies `penalty` (SamplingOptions::repetition_penalty) in place to logits[id] for each
// distinct id of `seen` in [0, vocab); ids outside are ignored. No-op for penalty == 1.
void apply_repetition_penalty(float* logits, int64_t vocab, const std::vector<int32_t>& seen, double penalty);

// The draw of an inverse CDF in id order: the first id i with u < p[0] + ... + p[i] (ids with
// p == 0 never chosen), or the last id with mass when rounding leaves u beyond the sum. `p` as
// Sampler::distribution returns it, u in [0, 1).
int32_t sample_index(const std::vector<double>& p, double u);

// The uniform the GPU sampler (device_sampler.h) draws the token at `position` (the index the new
// token takes in its sequence: prompt length + tokens generated before it) of a request seeded
// `seed` with: philox_uniform(seed, position) (core/philox.h). sample_index(distribution, it) is
// the GPU's token up to the float rounding of its probabilities.
double device_uniform(uint64_t seed, int64_t position);

// One request's sampler: its options and its random generator.
class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {}
  bool greedy() const { return !(options_.temperature > 0); }

  // The probabilities the next draw uses over `logits` (vocab entries), after temperature, top-k
  // and top-p: tokens filtered out have 0. Greedy: 1 at the argmax. For tests and reports.
  std::vector<double> distribution(const float* logits, int64_t vocab) const;
  // The next token id: the argmax when greedy, else sample_index(distribution(), u) with u this
  // request's next 53-bit uniform from its std::mt19937_64.
  int32_t next(const float* logits, int64_t vocab);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace kiln::llm
