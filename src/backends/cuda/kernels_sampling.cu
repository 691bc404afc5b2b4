// The LLM runner's GPU sampling kernel (kernels_sampling.h, docs/decisions/0077). One block of
// kThreads per row; every pass re-reads the row from global memory (L2-resident at a decode
// step's sizes) and recomputes the penalized logit, so no row copy is kept. Thresholds are
// found by MSB-first radix select (4 passes of 8 bits) over the order-preserving key of the
// penalized logit — counts for top-k, 2^-40 fixed-point masses for top-p — and every sum is an
// integer sum, so the result does not depend on the order threads add in: the same draw on
// every run, for every launch configuration, and a row's draw never depends on the other rows.
#include <cfloat>
#include <climits>

#include "backends/cuda/kernels_sampling.h"
#include "core/philox.h"

namespace kiln::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kItems = 8;  // consecutive ids per thread in the draw's id-order scan
constexpr unsigned kFull = 0xffffffffu;
constexpr float kFixedOne = 1099511627776.0f;  // 2^40: a mass of 1 in fixed point
constexpr int64_t kMaxVocab = int64_t{1} << 23;  // V * 2^40 < 2^63

// The total order of floats as unsigned integers (larger float -> larger key); -0 is +0 first,
// as the host compares them equal.
__device__ __forceinline__ uint32_t order_key(float x) {
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7fffffffu) == 0) u = 0;  // -0 -> +0, in bits (no compiler may fold it away)
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// One row's penalized logits and its masses.
struct Row {
  const float* logits;
  const uint32_t* seen;
  float penalty;
  bool penalize;
  float max;           // the largest penalized logit
  float temperature;
  __device__ __forceinline__ float at(int64_t i) const {
    float x = logits[i];
    // sampling.h's apply_repetition_penalty, in float as transformers computes in the logits' dtype.
    if (penalize && ((seen[i >> 5] >> (i & 31)) & 1u)) x = x < 0 ? x * penalty : x / penalty;
    return x;
  }
  __device__ __forceinline__ float weight(float x) const { return expf((x - max) / temperature); }
  __device__ __forceinline__ uint64_t fixed(float x) const { return __float2ull_rn(weight(x) * kFixedOne); }
};

__device__ __forceinline__ uint64_t warp_sum(uint64_t v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// Sum over the block, returned to every thread. sh: kWarps + 1 entries.
__device__ uint64_t block_sum(uint64_t v, uint64_t* sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = warp_sum(lane < kWarps ? sh[lane] : 0);
  return v;
}

// Exclusive prefix sum over the block in thread order; *total = the block's sum. sh: kWarps + 1.
__device__ uint64_t block_exclusive_scan(uint64_t v, uint64_t* sh, uint64_t* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint64_t x = v;
  for (int o = 1; o < 32; o <<= 1) {
    const uint64_t y = __shfl_up_sync(kFull, x, o);
    if (lane >= o) x += y;
  }
  __syncthreads();
  if (lane == 31) sh[warp] = x;
  __syncthreads();
  if (warp == 0) {
    const uint64_t s = lane < kWarps ? sh[lane] : 0;
    uint64_t si = s;
    for (int o = 1; o < 32; o <<= 1) {
      const uint64_t y = __shfl_up_sync(kFull, si, o);
      if (lane >= o) si += y;
    }
    if (lane < kWarps) sh[lane] = si - s;
    if (lane == kWarps - 1) sh[kWarps] = si;
  }
  __syncthreads();
  const uint64_t r = sh[warp] + x - v;
  *total = sh[kWarps];
  return r;
}

// The largest key t with F(t) = sum of weights of candidates whose key >= t reaching `target`
// (>= 1; the candidates' total must reach it), by MSB-first radix select. *above = F(t + 1),
// the weight strictly above t; *at = the weight of the candidates whose key is t. `cand(i, &key,
// &x)` says whether i is a candidate and gives its key and penalized logit; `weight(x)` its weight
// (a weight of 0 never counts), evaluated only for candidates in the current prefix. kCounts:
// every weight is 1 (`weight` unused). Histogram atomics are aggregated per bin within each warp.
// Every thread gets the results.
template <bool kCounts, class Cand, class Weight>
__device__ uint32_t radix_select(int64_t n, const Cand& cand, const Weight& weight, uint64_t target, uint64_t* hist,
                                 uint64_t* sh, uint64_t* above_out, uint64_t* at_out) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t prefix = 0;
  uint64_t above = 0, at = 0;
  for (int pass = 0; pass < 4; ++pass) {
    const int shift = 24 - 8 * pass;
    for (int b = threadIdx.x; b < 256; b += kThreads) hist[b] = 0;
    __syncthreads();
    for (int64_t base = 0; base < n; base += kThreads) {
      const int64_t i = base + threadIdx.x;
      uint32_t key = 0;
      float x = 0;
      uint64_t w = 1;
      int bin = -1;
      if (i < n && cand(i, &key, &x) && (pass == 0 || (key >> (shift + 8)) == (prefix >> (shift + 8))) &&
          (kCounts || (w = weight(x)) != 0))
        bin = static_cast<int>((key >> shift) & 255u);
      if (kCounts) {
        // One atomic per distinct bin of the warp: the logits' leading bits are nearly all equal.
        const unsigned peers = __match_any_sync(kFull, bin);
        if (bin >= 0 && lane == __ffs(peers) - 1) atomicAdd(reinterpret_cast<unsigned long long*>(&hist[bin]),
                                                            static_cast<unsigned long long>(__popc(peers)));
      } else {
        // One atomic per distinct bin of the warp, the bin's masses summed across the warp first:
        // in the first pass nearly every token lands in one of a few bins.
        unsigned pending = __ballot_sync(kFull, bin >= 0);
        while (pending) {
          const int leader = __ffs(pending) - 1;
          const int b = __shfl_sync(kFull, bin, leader);
          const bool mine = bin == b;
          const uint64_t sum = warp_sum(mine ? w : 0);
          if (lane == leader) atomicAdd(reinterpret_cast<unsigned long long*>(&hist[b]), static_cast<unsigned long long>(sum));
          pending &= ~__ballot_sync(kFull, mine);
        }
      }
    }
    __syncthreads();
    // Warp 0: lane l holds bins 255 - 8l ... 248 - 8l (descending); the bin where the weight from
    // the top reaches what is left of the target.
    if (warp == 0) {
      uint64_t s = 0;
      for (int j = 0; j < 8; ++j) s += hist[255 - 8 * lane - j];
      uint64_t incl = s;
      for (int o = 1; o < 32; o <<= 1) {
        const uint64_t y = __shfl_up_sync(kFull, incl, o);
        if (lane >= o) incl += y;
      }
      const uint64_t excl = incl - s, rem = target - above;
      const unsigned found = __ballot_sync(kFull, excl < rem && rem <= incl);
      const int src = found ? __ffs(found) - 1 : 31;  // not reached: the lowest bins (caller's bug)
      if (lane == src) {
        uint64_t acc = excl;
        int b = 255 - 8 * lane;
        for (int j = 0; j < 8; ++j) {
          b = 255 - 8 * lane - j;
          if (acc + hist[b] >= rem) break;
          acc += hist[b];
        }
        sh[0] = static_cast<uint64_t>(b);
        sh[1] = above + acc;
        sh[2] = hist[b];
      }
    }
    __syncthreads();
    prefix |= static_cast<uint32_t>(sh[0]) << shift;
    above = sh[1];
    at = sh[2];
    __syncthreads();
  }
  *above_out = above;
  *at_out = at;
  return prefix;
}

__global__ void __launch_bounds__(kThreads)
    sample_rows_kernel(const float* logits, const SamplingRow* rows, const int64_t* ids, const int32_t* token_seq,
                       const int64_t* positions, uint32_t* seen_all, SamplingResult* results, float* distributions,
                       int64_t vocab, int64_t tokens) {
  __shared__ uint64_t hist[256];
  __shared__ uint64_t sh[kWarps + 1];
  __shared__ float shv[kWarps];
  __shared__ int32_t shi[kWarps];
  __shared__ int reset;
  const int r = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t words = (vocab + 31) / 32;  // sampling_seen_words
  uint32_t* seen = seen_all + static_cast<int64_t>(r) * words;

  // 1. The row's seen-id bitmap from the step's tokens.
  if (threadIdx.x == 0) reset = 0;
  __syncthreads();
  for (int64_t t = threadIdx.x; t < tokens; t += kThreads)
    if (token_seq[t] == r && positions[t] == 0) reset = 1;
  __syncthreads();
  if (reset)
    for (int64_t w = threadIdx.x; w < words; w += kThreads) seen[w] = 0;
  __syncthreads();
  for (int64_t t = threadIdx.x; t < tokens; t += kThreads)
    if (token_seq[t] == r) {
      const int64_t id = ids[t];
      if (id >= 0 && id < vocab) atomicOr(&seen[id >> 5], 1u << (id & 31));
    }
  __syncthreads();

  const SamplingRow p = rows[r];
  if (threadIdx.x == 0) results[r] = {-1, -1};
  if (!p.active) return;
  // A temperature below float range acts as the smallest float (argmax-like), never as 0 (0 / 0).
  Row row{logits + static_cast<int64_t>(r) * vocab, seen, p.repetition_penalty, p.repetition_penalty != 1.0f, 0.f,
          fmaxf(static_cast<float>(p.temperature), FLT_MIN)};
  float* dist = distributions ? distributions + static_cast<int64_t>(r) * vocab : nullptr;

  // 2. Max, argmax (lowest id among equal maxima) and the first non-finite logit.
  float best = -FLT_MAX;
  int32_t best_i = INT_MAX, bad = INT_MAX;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float x = row.at(i);
    if (!isfinite(x)) {
      bad = min(bad, static_cast<int32_t>(i));
    } else if (x > best || best_i == INT_MAX) {
      best = x;
      best_i = static_cast<int32_t>(i);
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(kFull, best, o);
    const int32_t oi = __shfl_xor_sync(kFull, best_i, o);
    const int32_t ob = __shfl_xor_sync(kFull, bad, o);
    if (oi != INT_MAX && (best_i == INT_MAX || ov > best || (ov == best && oi < best_i))) {
      best = ov;
      best_i = oi;
    }
    bad = min(bad, ob);
  }
  if (lane == 0) {
    shv[warp] = best;
    shi[warp] = best_i;
    sh[warp] = static_cast<uint64_t>(static_cast<uint32_t>(bad));
  }
  __syncthreads();
  if (warp == 0) {
    best = lane < kWarps ? shv[lane] : -FLT_MAX;
    best_i = lane < kWarps ? shi[lane] : INT_MAX;
    bad = lane < kWarps ? static_cast<int32_t>(sh[lane]) : INT_MAX;
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(kFull, best, o);
      const int32_t oi = __shfl_xor_sync(kFull, best_i, o);
      const int32_t ob = __shfl_xor_sync(kFull, bad, o);
      if (oi != INT_MAX && (best_i == INT_MAX || ov > best || (ov == best && oi < best_i))) {
        best = ov;
        best_i = oi;
      }
      bad = min(bad, ob);
    }
    if (lane == 0) {
      shv[0] = best;
      shi[0] = best_i;
      sh[kWarps] = static_cast<uint64_t>(static_cast<uint32_t>(bad));
    }
  }
  __syncthreads();
  best = shv[0];
  best_i = shi[0];
  bad = static_cast<int32_t>(sh[kWarps]);
  __syncthreads();
  if (bad != INT_MAX) {
    if (threadIdx.x == 0) results[r] = {-1, bad};
    return;
  }
  if (!(p.temperature > 0)) {
    if (threadIdx.x == 0) results[r] = {best_i, -1};
    if (dist)
      for (int64_t i = threadIdx.x; i < vocab; i += kThreads) dist[i] = i == best_i ? 1.f : 0.f;
    return;
  }
  row.max = best;

  // 3. Top-k: the k-th largest key (ties with it kept). Kept from here on: key > cut_key, or
  // key == cut_key and id <= cut_id.
  uint32_t cut_key = 0;
  int64_t cut_id = vocab;
  uint64_t above = 0, at = 0;
  if (p.top_k > 0 && p.top_k < vocab) {
    cut_key = radix_select<true>(
        vocab,
        [&](int64_t i, uint32_t* key, float*) {
          *key = order_key(row.at(i));
          return true;
        },
        [](float) { return uint64_t{1}; }, static_cast<uint64_t>(p.top_k), hist, sh, &above, &at);
  }
  // 4. Top-p over the kept tokens: the fewest largest masses whose sum reaches top_p of the kept
  // sum; among tokens tied at the boundary, the lowest ids (the host's stable sort).
  if (p.top_p < 1.0) {
    uint64_t part = 0;
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float x = row.at(i);
      if (order_key(x) >= cut_key) part += row.fixed(x);
    }
    const uint64_t total = block_sum(part, sh);
    __syncthreads();
    const double want = ceil(p.top_p * static_cast<double>(total));
    const uint64_t target = want < 1 ? 1 : want > static_cast<double>(total) ? total : static_cast<uint64_t>(want);
    const uint32_t floor_key = cut_key;
    const uint32_t tau = radix_select<false>(
        vocab,
        [&](int64_t i, uint32_t* key, float* x) {
          *x = row.at(i);
          *key = order_key(*x);
          return *key >= floor_key;
        },
        [&](float x) { return row.fixed(x); }, target, hist, sh, &above, &at);
    // Ties at tau all have the same mass: keep the fewest that reach the target.
    const float tau_x = __uint_as_float((tau & 0x80000000u) ? (tau & 0x7fffffffu) : ~tau);
    const uint64_t each = row.fixed(tau_x);
    const uint64_t ties = each ? at / each : 0;
    uint64_t keep = each ? (target - above + each - 1) / each : ties;
    keep = keep < 1 ? 1 : keep > ties ? ties : keep;
    cut_key = tau;
    if (keep < ties) {
      // The keep-th smallest id among the ties: radix select over 2^32 - 1 - id.
      uint64_t a2 = 0, t2 = 0;
      const uint32_t k2 = radix_select<true>(
          vocab,
          [&](int64_t i, uint32_t* key, float*) {
            *key = 0xffffffffu - static_cast<uint32_t>(i);
            return order_key(row.at(i)) == tau;
          },
          [](float) { return uint64_t{1}; }, keep, hist, sh, &a2, &t2);
      cut_id = static_cast<int64_t>(0xffffffffu - k2);
    }
  }
  auto kept = [&](int64_t i, float x) {
    const uint32_t k = order_key(x);
    return k > cut_key || (k == cut_key && i <= cut_id);
  };

  // 5. The draw: u * (sum of kept masses) in the kept masses' inverse CDF, in id order.
  uint64_t part = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float x = row.at(i);
    if (kept(i, x)) part += row.fixed(x);
  }
  const uint64_t total = block_sum(part, sh);
  __syncthreads();
  const double u = philox_uniform(p.seed, static_cast<uint64_t>(p.position));
  const double scaled = u * static_cast<double>(total);
  const uint64_t target = scaled >= static_cast<double>(total) ? total - 1 : static_cast<uint64_t>(scaled);
  uint64_t running = 0;
  for (int64_t base = 0; base < vocab; base += static_cast<int64_t>(kThreads) * kItems) {
    const int64_t i0 = base + static_cast<int64_t>(threadIdx.x) * kItems;
    uint64_t mine = 0;
    for (int j = 0; j < kItems; ++j) {
      const int64_t i = i0 + j;
      if (i < vocab) {
        const float x = row.at(i);
        if (kept(i, x)) mine += row.fixed(x);
      }
    }
    uint64_t tile = 0;
    const uint64_t before = running + block_exclusive_scan(mine, sh, &tile);
    if (running + tile > target) {  // the same for every thread of the block
      if (before <= target && target < before + mine) {
        uint64_t c = before;
        for (int j = 0; j < kItems; ++j) {
          const int64_t i = i0 + j;
          if (i >= vocab) break;
          const float x = row.at(i);
          if (!kept(i, x)) continue;
          c += row.fixed(x);
          if (c > target) {
            results[r] = {static_cast<int32_t>(i), -1};
            break;
          }
        }
      }
      break;
    }
    running += tile;
    __syncthreads();
  }
  if (dist) {
    const double sum = static_cast<double>(total) / static_cast<double>(kFixedOne);
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float x = row.at(i);
      dist[i] = kept(i, x) ? static_cast<float>(static_cast<double>(row.weight(x)) / sum) : 0.f;
    }
  }
}

}  // namespace

cudaError_t launch_sample_rows(const float* logits, const SamplingRow* rows, const int64_t* ids,
                               const int32_t* token_seq, const int64_t* positions, uint32_t* seen,
                               SamplingResult* results, float* distributions, const SamplingDesc& d,
                               cudaStream_t stream) {
  if (d.rows < 1 || d.rows > INT_MAX || d.vocab < 1 || d.vocab > kMaxVocab || d.tokens < 0) return cudaErrorInvalidValue;
  sample_rows_kernel<<<static_cast<unsigned>(d.rows), kThreads, 0, stream>>>(
      logits, rows, ids, token_seq, positions, seen, results, distributions, d.vocab, d.tokens);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
