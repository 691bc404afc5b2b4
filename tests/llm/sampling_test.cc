// Sampling (src/llm/sampling.h): the distribution after temperature, top-k and top-p against
// probabilities computed here by hand, and draws with a fixed seed against that distribution.
#include "llm/sampling.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kiln::llm {
namespace {

// softmax(z / T) restricted to `keep` (others 0), renormalized.
std::vector<double> expected(const std::vector<float>& z, double T, const std::vector<int>& keep) {
  std::vector<double> p(z.size(), 0.0);
  double sum = 0;
  for (int i : keep) sum += std::exp(z[i] / T);
  for (int i : keep) p[i] = std::exp(z[i] / T) / sum;
  return p;
}

const std::vector<float> kLogits = {1.0f, 3.0f, -0.5f, 2.5f, 0.0f, 2.0f};  // order: 1, 3, 5, 0, 4, 2

void expect_dist(const SamplingOptions& o, const std::vector<double>& want) {
  Sampler s(o);
  const std::vector<double> got = s.distribution(kLogits.data(), static_cast<int64_t>(kLogits.size()));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "token " << i;
}

TEST(LlmSampling, GreedyIsArgmax) {
  SamplingOptions o;
  Sampler s(o);
  EXPECT_TRUE(s.greedy());
  EXPECT_EQ(s.next(kLogits.data(), 6), 1);
  const float ties[] = {0.f, 2.f, 2.f};
  EXPECT_EQ(s.next(ties, 3), 1);  // lowest id among equal maxima
}

TEST(LlmSampling, TemperatureTopKTopP) {
  SamplingOptions o;
  o.temperature = 0.7;
  expect_dist(o, expected(kLogits, 0.7, {0, 1, 2, 3, 4, 5}));
  o.top_k = 3;
  expect_dist(o, expected(kLogits, 0.7, {1, 3, 5}));
  o.top_k = 0;
  // T = 1: p = {.0768, .5678, .0171, .3444, .0283, .2089}/... -> sorted 1 (.43), 3 (.26), 5 (.16), ...
  o.temperature = 1.0;
  const std::vector<double> full = expected(kLogits, 1.0, {0, 1, 2, 3, 4, 5});
  o.top_p = full[1] + full[3] - 1e-9;  // tokens 1 and 3 reach it
  expect_dist(o, expected(kLogits, 1.0, {1, 3}));
  o.top_p = full[1] + full[3] + 1e-9;  // needs a third token
  expect_dist(o, expected(kLogits, 1.0, {1, 3, 5}));
  o.top_p = 1e-6;  // always at least one token
  expect_dist(o, expected(kLogits, 1.0, {1}));
  o.top_k = 2;
  o.top_p = 0.99;  // top-k first, then top-p over what is left
  expect_dist(o, expected(kLogits, 1.0, {1, 3}));
}

TEST(LlmSampling, DrawsFollowTheDistribution) {
  SamplingOptions o;
  o.temperature = 0.8;
  o.top_k = 4;
  o.seed = 99;
  Sampler s(o);
  const std::vector<double> p = s.distribution(kLogits.data(), 6);
  const int n = 40000;
  std::vector<int> count(6, 0);
  for (int i = 0; i < n; ++i) ++count[s.next(kLogits.data(), 6)];
  for (int i = 0; i < 6; ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(count[i], 0) << "token " << i << " is filtered out";
      continue;
    }
    const double sigma = std::sqrt(p[i] * (1 - p[i]) / n);
    EXPECT_NEAR(count[i] / double(n), p[i], 5 * sigma) << "token " << i;
  }
  // The same seed draws the same sequence.
  Sampler a(o), b(o);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.next(kLogits.data(), 6), b.next(kLogits.data(), 6));
}

TEST(LlmSampling, BadOptions) {
  SamplingOptions o;
  o.top_p = 0;
  EXPECT_FALSE(validate_sampling(o).ok());
  o.top_p = 1.5;
  EXPECT_FALSE(validate_sampling(o).ok());
  o.top_p = 1;
  o.top_k = -1;
  EXPECT_FALSE(validate_sampling(o).ok());
  o.top_k = 0;
  o.temperature = std::nan("");
  EXPECT_FALSE(validate_sampling(o).ok());
  o.temperature = 0.5;
  EXPECT_TRUE(validate_sampling(o).ok());
  for (double bad : {0.0, -1.2, std::nan(""), HUGE_VAL}) {
    o.repetition_penalty = bad;
    Status s = validate_sampling(o);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("repetition_penalty"), std::string::npos) << s.message();
  }
}

// transformers' RepetitionPenaltyLogitsProcessor: seen ids' positive logits divided by the
// penalty, negative ones multiplied, each id once however often it was seen; others unchanged.
TEST(LlmSampling, RepetitionPenalty) {
  std::vector<float> x = {2.0f, -2.0f, 1.0f, 0.5f, -0.25f};
  apply_repetition_penalty(x.data(), 5, {0, 1, 1, 4, 4, 4, 99, -3}, 2.0);
  EXPECT_EQ(x, (std::vector<float>{1.0f, -4.0f, 1.0f, 0.5f, -0.5f}));
  std::vector<float> y = {2.0f, -2.0f};
  apply_repetition_penalty(y.data(), 2, {0, 1}, 1.0);
  EXPECT_EQ(y, (std::vector<float>{2.0f, -2.0f}));
  // It changes the greedy choice: 3.0 seen with penalty 2 -> 1.5 < 2.0.
  std::vector<float> z = {3.0f, 2.0f};
  apply_repetition_penalty(z.data(), 2, {0}, 2.0);
  SamplingOptions greedy;
  EXPECT_EQ(Sampler(greedy).next(z.data(), 2), 1);
}

}  // namespace
}  // namespace kiln::llm
