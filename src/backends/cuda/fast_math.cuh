// Fast GELU forms for Kiln's pointwise kernels (kernels.cu apply: the Gelu op, the conv / bias
// epilogues), host and device (tests/unit/fast_gelu_test.cc measures them on the host).
//
// erf-GELU, 0.5 x (1 + erf(x / sqrt 2)): erf by Abramowitz & Stegun, Handbook of Mathematical
// Functions (1964), formula 7.1.26: erf(z) = 1 - (a1 t + a2 t^2 + a3 t^3 + a4 t^4 + a5 t^5)
// e^(-z^2), t = 1 / (1 + p z) for z >= 0, odd in z, |error| <= 1.5e-7 absolute in exact
// arithmetic; evaluated in float (the polynomial's terms cancel to ~1) 5.4e-7 at worst against
// double erf (tests/unit/fast_math_cuda_test.cc). One reciprocal, one exponential and five FMAs
// (erff: a branchy polynomial of about twice the instructions; with the runtime op switch, what
// held the Gelu kernel at ~1.6 TB/s, docs/decisions/0082). The absolute error e of the erf
// becomes 0.5 |x| e in the GELU: at most ~e of |GELU(x)| relative for x >= 0 (GELU(x) >= 0.5 x
// there) and 0.5 |x| e absolute for x < 0 — far below fp16 / bf16 rounding (2^-11 / 2^-8
// relative) and the op table's fp32 tolerance (1e-4). On the device the exponential and the
// reciprocal are the MUFU approximations __expf / __fdividef (~2 ulp each), which add ~2.5e-7:
// bench/micro/bandwidth.cu prints the device's max |erf_as - erff| (fast_erf_vs_erff) — expected
// below 1e-6.
// This form is for GELU only: the Erf op keeps erff (near 0 the 1 - (...) form loses the relative
// accuracy that erf(x) ~ 1.13 x needs; inside GELU that error is multiplied by x and vanishes).
//
// tanh-GELU, 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3): the identity
// 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)) gives x / (1 + e^(-2u)), one exponential and one
// division instead of tanhf (relative error ~4 ulp; exact limits 0 and x for u -> -inf / +inf).
#pragma once

#include <cmath>

#ifndef __CUDACC__
#define KILN_HD inline
#else
#define KILN_HD __host__ __device__ __forceinline__
#endif

namespace kiln::cuda {

KILN_HD float fast_exp(float x) {
#ifdef __CUDA_ARCH__
  return __expf(x);
#else
  return std::exp(x);
#endif
}

KILN_HD float fast_div(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdividef(a, b);
#else
  return a / b;
#endif
}

// erf(z) for z >= 0 (A&S 7.1.26; |error| <= 1.5e-7 with exact exp and division).
KILN_HD float erf_as_nonneg(float z) {
  const float t = fast_div(1.f, fmaf(0.3275911f, z, 1.f));
  float poly = fmaf(1.061405429f, t, -1.453152027f);
  poly = fmaf(poly, t, 1.421413741f);
  poly = fmaf(poly, t, -0.284496736f);
  poly = fmaf(poly, t, 0.254829592f);
  poly *= t;
  return 1.f - poly * fast_exp(-z * z);
}

// erf(z), odd extension of erf_as_nonneg.
KILN_HD float erf_as(float z) { return copysignf(erf_as_nonneg(fabsf(z)), z); }

// 0.5 x (1 + erf(x / sqrt 2)).
KILN_HD float fast_gelu_erf(float x) { return 0.5f * x * (1.f + erf_as(x * 0.70710678118654752f)); }

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) = x / (1 + e^(-2u)). For -2u above ~88 the
// exponential is inf and the quotient x / inf = -0 (the limit); __fdividef returns 0 for
// denominators in (2^126, 2^128), also the limit.
KILN_HD float fast_gelu_tanh(float x) {
  const float u = 0.7978845608028654f * fmaf(0.044715f * x, x * x, x);
  return fast_div(x, 1.f + fast_exp(-2.f * u));
}

}  // namespace kiln::cuda

#undef KILN_HD
