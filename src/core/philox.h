// Philox4x32-10, the counter-based random generator of Salmon, Moraes, Dror and Shaw, "Parallel
// random numbers: as easy as 1, 2, 3" (SC 2011; Random123): four 32-bit words out of a 128-bit
// counter and a 64-bit key, no state. The same header serves the host and CUDA kernels (functions
// are __host__ __device__ under nvcc), so a host reference reproduces a kernel's draws exactly.
// Used by the LLM runner's GPU sampling (docs/decisions/0077): key = the request's seed, counter =
// the token position.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif

namespace kiln {

struct Philox4x32 {
  uint32_t v[4];
};

// Philox4x32 with 10 rounds of (counter c[0..3], key k[0..1]) -> 4 words; Random123's
// philox4x32_R(10, ctr, key) (multipliers 0xD2511F53 / 0xCD9E8D57, Weyl key increments
// 0x9E3779B9 / 0xBB67AE85; the key is bumped between rounds). Known answers: Random123's
// kat_vectors, checked in tests/unit/philox_test.cc.
KILN_HOST_DEVICE inline Philox4x32 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                                 uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  return {{c0, c1, c2, c3}};
}

// A uniform double in [0, 1) with 53 random bits from Philox4x32-10 keyed by `seed`, counter
// (counter lo, counter hi, 0, 0): (word0 << 21 | word1 >> 11) * 2^-53.
KILN_HOST_DEVICE inline double philox_uniform(uint64_t seed, uint64_t counter) {
  const Philox4x32 r = philox4x32_10(static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0u, 0u,
                                     static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const uint64_t bits = (static_cast<uint64_t>(r.v[0]) << 21) | (r.v[1] >> 11);
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

}  // namespace kiln
