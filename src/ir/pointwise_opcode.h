// The instruction set of FusedPointwise programs (see ir/pointwise_program.h and
// docs/decisions/0005-pointwise-programs.md) and the one scalar definition of each opcode,
// shared by the CPU reference kernel and the CUDA kernel so both compute the same formula.
// Dependency-free (no STL): kernels.cu includes it, and its text is the prelude of the kernels
// NVRTC compiles for FusedPointwise programs (backends/cuda/pw_jit.h), where the math functions
// are built in and the generated source defines int32_t.
#pragma once

#ifndef __CUDACC_RTC__
#include <math.h>

#include <cstdint>
#endif

#ifdef __CUDACC__
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif

namespace kiln::ir {

constexpr int kMaxPwInputs = 8;   // tensor inputs of one FusedPointwise layer
constexpr int kMaxPwInstrs = 32;  // instructions (= registers) of one program
constexpr int kMaxPwArgs = 3;     // operands of one instruction

// Operands: Add..Pow (a, b); LeakyRelu (x, alpha); Elu (x, alpha); Clip (x, min, max);
// HardSigmoid (x, alpha, beta); QdqS8 / QdqU8 (x, scale, zero point); QdqE4M3 / QdqE5M2 (x, scale);
// Selu (x, alpha, gamma); Celu (x, alpha); ThresholdedRelu (x, alpha); Shrink (x, lambd, bias);
// Fmod / PyMod (a, b); every other opcode (x).
enum class PwOpcode : int32_t {
  kAdd, kSub, kMul, kDiv, kMax, kMin, kPow,
  kRelu, kLeakyRelu, kSigmoid, kTanh, kExp, kLog, kSqrt, kReciprocal, kNeg, kAbs, kErf,
  kClip, kHardSigmoid, kHardSwish, kGelu, kGeluTanh, kSoftplus, kElu,
  // A per-tensor QuantizeLinear -> DequantizeLinear pair (ONNX Operators.md QuantizeLinear /
  // DequantizeLinear; passes::fuse_qdq_pairs): the value the quantized tensor stands for.
  kQdqS8, kQdqU8, kQdqE4M3, kQdqE5M2,
  // The remaining ONNX float activations and unary math (Operators.md, each op's section), and
  // Mod: Fmod = C fmod (fmod=1, the dividend's sign), PyMod = Python's % (fmod=0, the divisor's).
  kSelu, kCelu, kSoftsign, kMish, kThresholdedRelu, kShrink, kSign, kRound, kCeil, kFloor,
  kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh, kFmod, kPyMod,
  kCount,
};

// The nearest FP8 E4M3FN value to v (round half to even), saturating at +-448 (ONNX Cast /
// QuantizeLinear with saturate = 1; OCP 8-bit floating point spec: 4 exponent bits, bias 7,
// 3 mantissa bits, subnormal quantum 2^-9, no infinities). NaN stays NaN.
KILN_HOST_DEVICE inline float round_to_e4m3fn(float v) {
  const float a = fabsf(v);
  if (!(a == a)) return v;
  if (a >= 448.f) return copysignf(448.f, v);
  int e = 0;
  frexpf(a, &e);                // a in [2^(e-1), 2^e)
  const int binade = e - 1 < -6 ? -6 : e - 1;
  const float quantum = ldexpf(1.f, binade - 3);
  return copysignf(rintf(a / quantum) * quantum, v);
}

// The nearest FP8 E5M2 value to v (round half to even), saturating at +-57344 (ONNX Cast /
// QuantizeLinear with saturate = 1, infinities included; OCP 8-bit floating point spec: 5 exponent
// bits, bias 15, 2 mantissa bits, subnormal quantum 2^-16). NaN stays NaN.
KILN_HOST_DEVICE inline float round_to_e5m2(float v) {
  const float a = fabsf(v);
  if (!(a == a)) return v;
  if (a >= 57344.f) return copysignf(57344.f, v);
  int e = 0;
  frexpf(a, &e);                // a in [2^(e-1), 2^e)
  const int binade = e - 1 < -14 ? -14 : e - 1;
  const float quantum = ldexpf(1.f, binade - 2);
  return copysignf(rintf(a / quantum) * quantum, v);
}

// y = op(a, b, c) in float, with the formulas of the CPU reference kernels of the ONNX ops
// (onnx/docs/Operators.md): Sigmoid and Softplus in their overflow-safe forms, Elu via expm1,
// Clip as numpy.clip (min(max(x, lo), hi)), Gelu = 0.5 x (1 + erf(x / sqrt 2)), GeluTanh =
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
KILN_HOST_DEVICE inline float pw_apply(PwOpcode op, float a, float b, float c) {
  switch (op) {
    case PwOpcode::kAdd: return a + b;
    case PwOpcode::kSub: return a - b;
    case PwOpcode::kMul: return a * b;
    case PwOpcode::kDiv: return a / b;
    // NaN propagates from either operand (numpy.maximum / numpy.minimum, the CPU reference).
    case PwOpcode::kMax: return (a != a || b != b) ? a + b : (a < b ? b : a);
    case PwOpcode::kMin: return (a != a || b != b) ? a + b : (b < a ? b : a);
    case PwOpcode::kPow: return powf(a, b);
    case PwOpcode::kRelu: return a > 0.f ? a : 0.f;
    case PwOpcode::kLeakyRelu: return a >= 0.f ? a : b * a;
    case PwOpcode::kSigmoid: {
      if (a >= 0.f) return 1.f / (1.f + expf(-a));
      const float e = expf(a);
      return e / (1.f + e);
    }
    case PwOpcode::kTanh: return tanhf(a);
    case PwOpcode::kExp: return expf(a);
    case PwOpcode::kLog: return logf(a);
    case PwOpcode::kSqrt: return sqrtf(a);
    case PwOpcode::kReciprocal: return 1.f / a;
    case PwOpcode::kNeg: return -a;
    case PwOpcode::kAbs: return fabsf(a);
    case PwOpcode::kErf: return erff(a);
    case PwOpcode::kClip: {
      const float lo = a < b ? b : a;
      return c < lo ? c : lo;
    }
    case PwOpcode::kHardSigmoid: {
      const float v = b * a + c;
      return v < 0.f ? 0.f : (v > 1.f ? 1.f : v);
    }
    case PwOpcode::kHardSwish: {
      const float v = a / 6.f + 0.5f;
      return a * (v < 0.f ? 0.f : (v > 1.f ? 1.f : v));
    }
    case PwOpcode::kGelu: return 0.5f * a * (1.f + erff(a * 0.7071067811865476f));
    case PwOpcode::kGeluTanh: return 0.5f * a * (1.f + tanhf(0.7978845608028654f * (a + 0.044715f * a * a * a)));
    case PwOpcode::kSoftplus: return a > 0.f ? a + log1pf(expf(-a)) : log1pf(expf(a));
    case PwOpcode::kElu: return a >= 0.f ? a : b * expm1f(a);
    // y = (saturate(round_half_even(x / scale) + zp) - zp) * scale, int8 [-128, 127] / uint8 [0, 255].
    case PwOpcode::kQdqS8: {
      const float q = rintf(a / b) + c;
      return ((q < -128.f ? -128.f : (q > 127.f ? 127.f : q)) - c) * b;
    }
    case PwOpcode::kQdqU8: {
      const float q = rintf(a / b) + c;
      return ((q < 0.f ? 0.f : (q > 255.f ? 255.f : q)) - c) * b;
    }
    case PwOpcode::kQdqE4M3: return round_to_e4m3fn(a / b) * b;
    case PwOpcode::kQdqE5M2: return round_to_e5m2(a / b) * b;
    case PwOpcode::kSelu: return c * (a > 0.f ? a : b * expm1f(a));
    case PwOpcode::kCelu: return a > 0.f ? a : b * expm1f(a / b);
    case PwOpcode::kSoftsign: return a / (1.f + fabsf(a));
    case PwOpcode::kMish: {
      const float sp = a > 0.f ? a + log1pf(expf(-a)) : log1pf(expf(a));
      return a * tanhf(sp);
    }
    case PwOpcode::kThresholdedRelu: return a > b ? a : 0.f;
    case PwOpcode::kShrink: return a < -b ? a + c : (a > b ? a - c : 0.f);
    case PwOpcode::kSign: return a != a ? a : static_cast<float>((0.f < a) - (a < 0.f));
    case PwOpcode::kRound: return rintf(a);  // half to even (the default rounding mode)
    case PwOpcode::kCeil: return ceilf(a);
    case PwOpcode::kFloor: return floorf(a);
    case PwOpcode::kTan: return tanf(a);
    case PwOpcode::kAsin: return asinf(a);
    case PwOpcode::kAcos: return acosf(a);
    case PwOpcode::kAtan: return atanf(a);
    case PwOpcode::kSinh: return sinhf(a);
    case PwOpcode::kCosh: return coshf(a);
    case PwOpcode::kAsinh: return asinhf(a);
    case PwOpcode::kAcosh: return acoshf(a);
    case PwOpcode::kAtanh: return atanhf(a);
    case PwOpcode::kFmod: return fmodf(a, b);
    case PwOpcode::kPyMod: {
      float r = fmodf(a, b);
      if (r != 0.f && ((r < 0.f) != (b < 0.f))) r += b;
      return r;
    }
    case PwOpcode::kCount: break;
  }
  return a;
}

}  // namespace kiln::ir
