// Next-token choice from one row of logits (issue 13 item 4's sampling, on the host): greedy, or
// temperature -> top-k -> top-p -> a draw, in the order transformers' generate applies its
// logits warpers (TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper).
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
  // Seeds the request's generator (std::mt19937_64), so a request with the same seed, prompt and
  // options draws the same tokens on every run and machine.
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

// One request's sampler: its options and its random generator.
class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {}
  bool greedy() const { return !(options_.temperature > 0); }

  // The probabilities the next draw uses over `logits` (vocab entries), after temperature, top-k
  // and top-p: tokens filtered out have 0. Greedy: 1 at the argmax. For tests and reports.
  std::vector<double> distribution(const float* logits, int64_t vocab) const;
  // The next token id: the argmax when greedy, else a draw from distribution() with this request's
  // generator (one 53-bit uniform per draw, inverse CDF in id order).
  int32_t next(const float* logits, int64_t vocab);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace kiln::llm
