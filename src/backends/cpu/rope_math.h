// RoPE's angle-mode arithmetic on the CPU (ops.def Rope; docs/decisions/0067), shared by the Rope
// kernel and PagedAttention's fused RoPE (its optional inv_freq input, docs/decisions/0090), so
// the fused and the unfused graph compute the same values.
#pragma once

#include <cmath>
#include <cstdint>

namespace kiln::cpu {

// cos and sin of the angle float32(position) * inv_freq (one float32 rounding of the product, as
// the Cast / Mul graph and transformers' inv_freq @ position_ids compute it), in float32.
inline void rope_cos_sin(int64_t position, float inv_freq, float* c, float* s) {
  const float a = static_cast<float>(position) * inv_freq;
  *c = std::cos(a);
  *s = std::sin(a);
}

// Rotates one head row `x` of `d` values in place, pairs (k, k + half) (or (2k, 2k + 1) when
// interleaved) by cos[k] / sin[k]; values from 2 * half on stay as they are.
template <typename T>
void rope_rotate_row(T* x, int64_t half, bool interleaved, const T* c, const T* s) {
  for (int64_t k = 0; k < half; ++k) {
    const int64_t a = interleaved ? 2 * k : k, b = interleaved ? 2 * k + 1 : k + half;
    const T x1 = x[a], x2 = x[b];
    x[a] = x1 * c[k] - x2 * s[k];
    x[b] = x2 * c[k] + x1 * s[k];
  }
}

}  // namespace kiln::cpu
