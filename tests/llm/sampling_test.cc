// Sampling (src/llm/sampling.h): the distribution after temperature, top-k and top-p against
// probabilities computed here by hand, and draws with a fixed seed against that distribution;
// Philox4x32-10 (core/philox.h, the GPU sampler's generator) against Random123's known answers.
#include "llm/sampling.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/philox.h"

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

// Random123's kat_vectors for philox4x32 with 10 rounds: counter[4], key[2] -> output[4].
TEST(LlmSampling, Philox4x32KnownAnswers) {
  struct Case {
    uint32_t c[4], k[2], out[4];
  };
  const Case cases[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}, {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Case& t : cases) {
    const Philox4x32 r = philox4x32_10(t.c[0], t.c[1], t.c[2], t.c[3], t.k[0], t.k[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.v[i], t.out[i]) << "word " << i << " of counter " << std::hex << t.c[0];
  }
}

// device_uniform: in [0, 1), a function of (seed, position) only, different across positions and
// seeds, and uniform enough (mean and a 10-bin histogram over 100,000 positions).
TEST(LlmSampling, DeviceUniformIsAUniformPerSeedAndPosition) {
  EXPECT_EQ(device_uniform(7, 12), device_uniform(7, 12));
  EXPECT_NE(device_uniform(7, 12), device_uniform(7, 13));
  EXPECT_NE(device_uniform(7, 12), device_uniform(8, 12));
  EXPECT_NE(device_uniform(7, 12), device_uniform(7 + (uint64_t{1} << 32), 12)) << "the seed's high word is ignored";
  EXPECT_NE(device_uniform(7, 12), device_uniform(7, 12 + (int64_t{1} << 32))) << "the position's high word is ignored";
  constexpr int kN = 100000;
  int bins[10] = {};
  double sum = 0;
  for (int i = 0; i < kN; ++i) {
    const double u = device_uniform(42, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    ++bins[static_cast<int>(u * 10)];
  }
  EXPECT_NEAR(sum / kN, 0.5, 0.005);
  double chi2 = 0;
  for (int b : bins) chi2 += (b - kN / 10.0) * (b - kN / 10.0) / (kN / 10.0);
  EXPECT_LT(chi2, 27.9) << "chi-square of 10 bins (9 degrees of freedom, p = 0.001)";
}

// sample_index is the inverse CDF in id order that Sampler::next and the GPU sampler share.
TEST(LlmSampling, SampleIndexIsTheInverseCdfInIdOrder) {
  const std::vector<double> p = {0.0, 0.25, 0.0, 0.5, 0.25};
  EXPECT_EQ(sample_index(p, 0.0), 1);
  EXPECT_EQ(sample_index(p, 0.2499), 1);
  EXPECT_EQ(sample_index(p, 0.25), 3);
  EXPECT_EQ(sample_index(p, 0.7499), 3);
  EXPECT_EQ(sample_index(p, 0.75), 4);
  EXPECT_EQ(sample_index(p, 0.9999999), 4);
  EXPECT_EQ(sample_index({0.5, 0.5 - 1e-12, 0.0}, 0.99999999999999), 1) << "u past the rounded sum: the last id with mass";
  // Sampler::next is sample_index over distribution() with the request's mt19937_64 uniform.
  SamplingOptions o;
  o.temperature = 0.9;
  o.seed = 5;
  Sampler a(o);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 50; ++i) {
    const double u = static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
    EXPECT_EQ(a.next(kLogits.data(), 6), sample_index(a.distribution(kLogits.data(), 6), u)) << "draw " << i;
  }
}

}  // namespace
}  // namespace kiln::llm
