// The host side of the CUDA backend's fast GELU forms (src/backends/cuda/fast_math.cuh) and its
// FastDivmod (launch_config.cuh): the formulas measured against std::erf / std::tanh in double and
// the division against `/` and `%`. The device adds its __expf / __fdividef error on top
// (bench/micro/bandwidth.cu measures that on the GPU).
#ifdef KILN_HAVE_CUDA
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "backends/cuda/fast_math.cuh"
#include "backends/cuda/launch_config.cuh"

namespace kiln::cuda {
namespace {

TEST(FastMathCuda, ErfWithinAbramowitzStegunBound) {
  double worst = 0;
  for (int i = -600000; i <= 600000; ++i) {
    const float z = static_cast<float>(i) * 1e-5f;
    worst = std::max(worst, std::fabs(static_cast<double>(erf_as(z)) - std::erf(static_cast<double>(z))));
  }
  // 1.5e-7 is the formula's bound in exact arithmetic (A&S 7.1.26); evaluated in float, the
  // rounding of its ~10 steps (the polynomial's terms cancel to ~1, then 1 - poly * e^-z^2 near
  // z ~ 0.03) brings it to 5.4e-7 (measured).
  EXPECT_LT(worst, 6e-7);
  EXPECT_EQ(erf_as(0.f), 0.f);
  EXPECT_EQ(erf_as(20.f), 1.f);
  EXPECT_EQ(erf_as(-20.f), -1.f);
}

TEST(FastMathCuda, GeluFormsMatchDoubleReference) {
  double worst_erf = 0, worst_tanh = 0;
  for (int i = -200000; i <= 200000; ++i) {
    const double x = i * 1e-4;  // [-20, 20]
    const double ref_erf = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    const double ref_tanh = 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::acos(-1.0)) * (x + 0.044715 * x * x * x)));
    const float xf = static_cast<float>(x);
    // Absolute error scaled by max(1, |x|): relative where |GELU| is large, absolute near 0.
    const double scale = std::max(1.0, std::fabs(x));
    worst_erf = std::max(worst_erf, std::fabs(fast_gelu_erf(xf) - ref_erf) / scale);
    worst_tanh = std::max(worst_tanh, std::fabs(fast_gelu_tanh(xf) - ref_tanh) / scale);
  }
  EXPECT_LT(worst_erf, 5e-7);
  EXPECT_LT(worst_tanh, 5e-7);
  EXPECT_EQ(fast_gelu_tanh(-200.f), 0.f);  // e^400 = inf: x / inf
  EXPECT_EQ(fast_gelu_tanh(200.f), 200.f);
}

TEST(FastMathCuda, FastDivmodEqualsDivision) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> num(0, (1u << 31) - 1);
  const uint32_t divisors[] = {1, 2, 3, 5, 7, 8, 12, 64, 96, 97, 128, 197, 768, 3072, 98304, 393216,
                               (1u << 30) + 1, (1u << 31) - 1};
  for (uint32_t d : divisors) {
    const FastDivmod f(d);
    for (uint32_t n : {0u, 1u, d - 1, d, d + 1, (1u << 31) - 1, (1u << 31) - 2}) {
      uint32_t q, r;
      f.divmod(n, q, r);
      ASSERT_EQ(q, n / d) << n << " / " << d;
      ASSERT_EQ(r, n % d) << n << " % " << d;
    }
    for (int k = 0; k < 20000; ++k) {
      const uint32_t n = num(rng);
      ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
    }
  }
  // Random divisors too.
  std::uniform_int_distribution<uint32_t> dd(1, (1u << 31) - 1);
  for (int k = 0; k < 2000; ++k) {
    const uint32_t d = dd(rng) >> (k % 31);
    const FastDivmod f(d < 1 ? 1 : d);
    for (int j = 0; j < 50; ++j) {
      const uint32_t n = num(rng);
      ASSERT_EQ(f.div(n), n / (d < 1 ? 1 : d)) << n << " / " << d;
    }
  }
}

}  // namespace
}  // namespace kiln::cuda
#endif
