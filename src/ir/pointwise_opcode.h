// The instruction set of FusedPointwise programs (see ir/pointwise_program.h and
// docs/decisions/0005-pointwise-programs.md) and the one scalar definition of each opcode,
// shared by the CPU reference kernel and the CUDA kernel so both compute the same formula.
// Dependency-free (no STL): kernels.cu includes it.
#pragma once

#include <math.h>

#include <cstdint>

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
// HardSigmoid (x, alpha, beta); every other opcode (x).
enum class PwOpcode : int32_t {
  kAdd, kSub, kMul, kDiv, kMax, kMin, kPow,
  kRelu, kLeakyRelu, kSigmoid, kTanh, kExp, kLog, kSqrt, kReciprocal, kNeg, kAbs, kErf,
  kClip, kHardSigmoid, kHardSwish, kGelu, kGeluTanh, kSoftplus, kElu,
  kCount,
};

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
    case PwOpcode::kMax: return a < b ? b : a;
    case PwOpcode::kMin: return b < a ? b : a;
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
    case PwOpcode::kCount: break;
  }
  return a;
}

}  // namespace kiln::ir
