// The LLM runner's GPU sampling kernels (kernels_sampling.h, docs/decisions/0077 and its
// addendum). Six launches per step, all but the last over one block per (row, chunk of kChunk =
// 4,096 ids); a kernel's blocks of rows it has nothing for return at once:
//  1. sample_chunks_kernel: the chunk's part of the row's seen-id bitmap, the chunk's max / argmax /
//     first non-finite id, and for a row with 0 < top_k <= kMaxTopK its candidates: the ids whose
//     key is at or above the chunk's own top_k-th largest key (ties included; at most kCap, else
//     the chunk says overflow).
//  2. sample_masses_kernel: for rows without top-k and top-p ("mass rows": temperature alone) the
//     chunk's sum of fixed-point masses; for top-p rows without top-k ("top-p rows") radix level 0
//     of the top-p threshold (a mass histogram of key bits 31..21 summed over the row's chunks
//     with integer atomics; the row's last block picks the bin).
//  3, 4. sample_topp_kernel levels 1 and 2 (key bits 20..10, 9..0): the threshold tau, exact.
//  5. sample_topp_kernel level 3: per chunk the mass above tau and the count of ids at tau.
//  6. sample_rows_kernel, one block per row: merges the chunks' maxima; greedy rows take the argmax;
//     mass and top-p rows find the chunk their draw falls in from the chunks' kept masses and scan
//     that chunk only; a top-k row whose chunks all fit runs top-k / top-p / the draw over the union
//     of its chunks' candidates (a few thousand keys at most instead of the vocabulary); every other
//     sampling row (top_k > kMaxTopK, a chunk past kCap) over its whole row, re-read per pass from
//     L2 — the one path still bound by one block's latency.
// Thresholds are found by MSB-first radix select (4 passes of 8 bits in one block, or 3 levels of
// 11 / 11 / 10 bits over the chunks) over the order-preserving key of the penalized logit — counts
// for top-k, 2^-40 fixed-point masses for top-p — and every sum is an integer sum, so the result
// does not depend on the order threads add in: the same draw on every run, for every launch
// configuration, on every path (the candidates hold every id the filter keeps, and the masses of
// ids outside the kept set never enter a sum), and a row's draw never depends on the other rows.
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
constexpr int kChunk = kThreads * kItems;  // ids per block of sample_chunks_kernel (a multiple of 32)
constexpr int kMaxChunks = static_cast<int>((kMaxVocab + kChunk - 1) / kChunk);
constexpr int kMaxTopK = 1024;  // rows with 0 < top_k <= this take the candidate path
constexpr int kCap = 1024;      // candidate slots per chunk (>= kMaxTopK: only ties can overflow them)
static_assert(kCap >= kMaxTopK && kChunk % 32 == 0, "a chunk's top_k must fit its slots; chunks own whole words");

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

// Max, argmax (lowest id among equal maxima) and the lowest non-finite id over the block: each
// thread passes its own (best, best_i, bad) — best_i == INT_MAX: no finite value seen, bad ==
// INT_MAX: none non-finite — and every thread gets the block's. shv / shi: kWarps, sh: kWarps + 1.
__device__ __forceinline__ void merge_best(float& best, int32_t& best_i, float ov, int32_t oi) {
  if (oi != INT_MAX && (best_i == INT_MAX || ov > best || (ov == best && oi < best_i))) {
    best = ov;
    best_i = oi;
  }
}

__device__ void block_best(float& best, int32_t& best_i, int32_t& bad, float* shv, int32_t* shi, uint64_t* sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(kFull, best, o);
    const int32_t oi = __shfl_xor_sync(kFull, best_i, o);
    const int32_t ob = __shfl_xor_sync(kFull, bad, o);
    merge_best(best, best_i, ov, oi);
    bad = min(bad, ob);
  }
  __syncthreads();
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
      merge_best(best, best_i, ov, oi);
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
}

// The float whose order_key is k (+0 for the key of -0: the same weight, x - max being equal).
__device__ __forceinline__ float key_float(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// Whether a row takes the candidate path: it samples with a top-k small enough that every chunk's
// local top-k (ties included) fits its kCap candidate slots.
__device__ __forceinline__ bool candidate_row(const SamplingRow& p, int64_t vocab) {
  return p.active && p.temperature > 0 && p.top_k > 0 && p.top_k <= kMaxTopK && p.top_k < vocab;
}

// Whether a row takes the mass path: it samples from its whole distribution (no top-k, no top-p),
// so the draw needs only the chunks' mass sums and one chunk's scan.
__device__ __forceinline__ bool mass_row(const SamplingRow& p, int64_t vocab) {
  return p.active && p.temperature > 0 && !(p.top_k > 0 && p.top_k < vocab) && !(p.top_p < 1.0);
}

// Whether a row takes the top-p path: top-p over its whole vocabulary (no top-k), the threshold
// found by three chunk-parallel radix levels, the draw from per-chunk kept masses.
__device__ __forceinline__ bool topp_row(const SamplingRow& p, int64_t vocab) {
  return p.active && p.temperature > 0 && !(p.top_k > 0 && p.top_k < vocab) && p.top_p < 1.0;
}

// A top-p row's threshold search (written by the last block of each radix level).
struct ToppState {
  uint64_t total;   // the row's fixed-point mass
  uint64_t target;  // ceil(top_p * total), clamped to [1, total]
  uint64_t above;   // mass of the keys above the prefix found so far
  uint64_t at;      // mass of the keys with the prefix found so far
  uint32_t prefix;  // the key bits found so far (after level 2: tau, the whole key)
  uint32_t pad;
};
// Radix level l (0, 1, 2) bins key bits 31..21, 20..10, 9..0: its shift, bins and histogram offset.
__host__ __device__ constexpr int level_shift(int l) { return l == 0 ? 21 : l == 1 ? 10 : 0; }
__host__ __device__ constexpr int level_bins(int l) { return l == 2 ? 1024 : 2048; }
__host__ __device__ constexpr int level_base(int l) { return l == 0 ? 0 : l == 1 ? 2048 : 4096; }
constexpr int kHistPerRow = 5120;

// The scratch buffer's parts (launch_sample_rows' `scratch`, sampling_scratch_bytes), for R rows
// of C = sampling_chunks(V) chunks: per chunk its candidates (key, id; kCap slots, the first
// `count` used, in id order), `count` (-1: more than kCap, the row falls back to the full pass),
// and the chunk's max / argmax / lowest non-finite id of the penalized logits.
struct Scratch {
  uint64_t* mass;  // [R, C] the chunk's sum of fixed-point masses (mass rows); top-p rows: the
                   // chunk's mass above tau, then (sample_rows_kernel) its kept mass
  uint64_t* hist;  // [R, kHistPerRow] top-p rows: the three radix levels' mass histograms
  ToppState* topp; // [R]
  uint32_t* done;  // [R, 4] top-p rows: blocks finished per radix level
  uint32_t* key;   // [R, C, kCap]
  int32_t* id;     // [R, C, kCap]
  int32_t* count;  // [R, C] candidate rows: candidates used; top-p rows: ids whose key is tau
  float* max;      // [R, C]
  int32_t* arg;    // [R, C] (INT_MAX: no finite logit in the chunk)
  int32_t* bad;    // [R, C] (INT_MAX: none)
};

int64_t chunks_of(int64_t vocab) { return (vocab + kChunk - 1) / kChunk; }

Scratch scratch_view(void* base, int64_t rows, int64_t vocab) {
  const int64_t n = rows * chunks_of(vocab);
  Scratch s;
  char* p = static_cast<char*>(base);
  s.mass = reinterpret_cast<uint64_t*>(p);
  p += n * 8;
  s.key = reinterpret_cast<uint32_t*>(p);
  p += n * kCap * 4;
  s.id = reinterpret_cast<int32_t*>(p);
  p += n * kCap * 4;
  s.count = reinterpret_cast<int32_t*>(p);
  p += n * 4;
  s.max = reinterpret_cast<float*>(p);
  p += n * 4;
  s.arg = reinterpret_cast<int32_t*>(p);
  p += n * 4;
  s.bad = reinterpret_cast<int32_t*>(p);
  p += n * 4;
  s.hist = reinterpret_cast<uint64_t*>(p);  // 8-aligned: every part before is a multiple of 8 B
  p += rows * kHistPerRow * 8;
  s.topp = reinterpret_cast<ToppState*>(p);
  p += rows * sizeof(ToppState);
  s.done = reinterpret_cast<uint32_t*>(p);
  return s;
}

// Kernel 1: one block per (row, chunk of kChunk ids), block index r * C + c. Updates the chunk's
// words of the row's seen bitmap (a chunk starts at a multiple of 32 ids, so no word is shared
// between blocks), then for an active row the chunk's max / argmax / non-finite id, and for a
// candidate row the chunk's candidates: every id whose key is >= the chunk's own top_k-th largest
// key (all of the chunk when it has at most top_k ids). The row's top_k-th largest key g is <= the
// chunk's (the chunk's top_k largest are among the row's), so every id the row's top-k keeps
// (key >= g, ties included) is a candidate of its chunk.
__global__ void __launch_bounds__(kThreads)
    sample_chunks_kernel(const float* logits, const SamplingRow* rows, const int64_t* ids, const int32_t* token_seq,
                         const int64_t* positions, uint32_t* seen_all, Scratch s, int64_t vocab, int64_t tokens,
                         int64_t chunks) {
  __shared__ uint32_t skey[kChunk];
  __shared__ uint64_t hist[256];
  __shared__ uint64_t sh[kWarps + 1];
  __shared__ float shv[kWarps];
  __shared__ int32_t shi[kWarps];
  __shared__ int reset;
  const int64_t blk = blockIdx.x;
  const int64_t r = blk / chunks, lo = (blk % chunks) * kChunk;
  const int n = static_cast<int>(min(static_cast<int64_t>(kChunk), vocab - lo));
  const int64_t words = (vocab + 31) / 32;  // sampling_seen_words
  uint32_t* seen = seen_all + r * words;

  // 1. The chunk's words of the row's seen-id bitmap from the step's tokens.
  if (threadIdx.x == 0) reset = 0;
  __syncthreads();
  for (int64_t t = threadIdx.x; t < tokens; t += kThreads)
    if (token_seq[t] == r && positions[t] == 0) reset = 1;
  __syncthreads();
  if (reset)
    for (int64_t w = lo / 32 + threadIdx.x; w < (lo + n + 31) / 32; w += kThreads) seen[w] = 0;
  __syncthreads();
  for (int64_t t = threadIdx.x; t < tokens; t += kThreads)
    if (token_seq[t] == r) {
      const int64_t id = ids[t];
      if (id >= lo && id < lo + n) atomicOr(&seen[id >> 5], 1u << (id & 31));
    }
  __syncthreads();

  const SamplingRow p = rows[r];
  if (!p.active) return;
  if (topp_row(p, vocab) && blk % chunks == 0) {  // the row's top-p histograms and counters, for kernels 2-4
    for (int b = threadIdx.x; b < kHistPerRow; b += kThreads) s.hist[r * kHistPerRow + b] = 0;
    if (threadIdx.x < 4) s.done[r * 4 + threadIdx.x] = 0;
  }
  const Row row{logits + r * vocab, seen, p.repetition_penalty, p.repetition_penalty != 1.0f, 0.f, 1.f};

  // 2. The chunk's max / argmax / first non-finite id; its keys into shared memory.
  float best = -FLT_MAX;
  int32_t best_i = INT_MAX, bad = INT_MAX;
  for (int j = threadIdx.x; j < n; j += kThreads) {
    const float x = row.at(lo + j);
    skey[j] = order_key(x);
    if (!isfinite(x)) {
      bad = min(bad, static_cast<int32_t>(lo + j));
    } else if (x > best || best_i == INT_MAX) {
      best = x;
      best_i = static_cast<int32_t>(lo + j);
    }
  }
  block_best(best, best_i, bad, shv, shi, sh);
  if (threadIdx.x == 0) {
    s.max[blk] = best;
    s.arg[blk] = best_i;
    s.bad[blk] = bad;
  }
  if (!candidate_row(p, vocab) || bad != INT_MAX) return;

  // 3. The chunk's top_k-th largest key (exact: 4 radix passes over shared memory).
  uint32_t floor_key = 0;
  if (n > p.top_k) {
    uint64_t above = 0, at = 0;
    floor_key = radix_select<true>(
        n,
        [&](int64_t i, uint32_t* key, float*) {
          *key = skey[i];
          return true;
        },
        [](float) { return uint64_t{1}; }, static_cast<uint64_t>(p.top_k), hist, sh, &above, &at);
  }
  // 4. Compaction in id order: thread t owns ids lo + kItems t ... + kItems - 1.
  uint64_t mine = 0;
  for (int j = 0; j < kItems; ++j) {
    const int i = threadIdx.x * kItems + j;
    if (i < n && skey[i] >= floor_key) ++mine;
  }
  uint64_t total = 0;
  uint64_t at = block_exclusive_scan(mine, sh, &total);
  if (total > static_cast<uint64_t>(kCap)) {
    if (threadIdx.x == 0) s.count[blk] = -1;
    return;
  }
  uint32_t* ck = s.key + blk * kCap;
  int32_t* ci = s.id + blk * kCap;
  for (int j = 0; j < kItems; ++j) {
    const int i = threadIdx.x * kItems + j;
    if (i < n && skey[i] >= floor_key) {
      ck[at] = skey[i];
      ci[at] = static_cast<int32_t>(lo + i);
      ++at;
    }
  }
  if (threadIdx.x == 0) s.count[blk] = static_cast<int32_t>(total);
}

// The row's max, argmax and first non-finite id from its chunks' (sample_chunks_kernel's results).
__device__ void row_best(const Scratch& s, int64_t r, int64_t chunks, float& best, int32_t& best_i, int32_t& bad,
                         float* shv, int32_t* shi, uint64_t* sh) {
  best = -FLT_MAX;
  best_i = INT_MAX;
  bad = INT_MAX;
  for (int64_t c = threadIdx.x; c < chunks; c += kThreads) {
    merge_best(best, best_i, s.max[r * chunks + c], s.arg[r * chunks + c]);
    bad = min(bad, s.bad[r * chunks + c]);
  }
  block_best(best, best_i, bad, shv, shi, sh);
}

// One radix level of a top-p row's threshold (every thread of a (row, chunk) block calls it): the
// chunk's fixed-point masses of the keys that carry the prefix found so far, binned by the level's
// bits (shared-memory histogram, atomics aggregated per bin within each warp), added into the row's
// histogram (integer atomics: the sums do not depend on the order); the last block of the row to
// finish (threadfence + counter, as CUDA's threadFenceReduction sample) picks the bin where the
// mass from the top reaches what is left of the target, as radix_select does.
__device__ void topp_level(int level, const Row& row, const SamplingRow& p, Scratch& s, int64_t r, int64_t lo,
                           int64_t hi, int64_t chunks, uint64_t* shist, uint64_t* sh) {
  __shared__ int last;
  const int lane = threadIdx.x & 31;
  const int shift = level_shift(level), bins = level_bins(level);
  const int pshift = level == 0 ? 0 : level_shift(level - 1);
  uint64_t* ghist = s.hist + r * kHistPerRow + level_base(level);
  ToppState* st = s.topp + r;
  const uint32_t prefix = level == 0 ? 0u : st->prefix;
  for (int b = threadIdx.x; b < bins; b += kThreads) shist[b] = 0;
  __syncthreads();
  for (int64_t base = lo; base < hi; base += kThreads) {  // the same trip count for every thread
    const int64_t i = base + threadIdx.x;
    int bin = -1;
    uint64_t w = 0;
    if (i < hi) {
      const float x = row.at(i);
      const uint32_t key = order_key(x);
      if ((level == 0 || (key >> pshift) == (prefix >> pshift)) && (w = row.fixed(x)) != 0)
        bin = static_cast<int>((key >> shift) & static_cast<uint32_t>(bins - 1));
    }
    unsigned pending = __ballot_sync(kFull, bin >= 0);
    while (pending) {
      const int leader = __ffs(pending) - 1;
      const int b = __shfl_sync(kFull, bin, leader);
      const bool mine = bin == b;
      const uint64_t sum = warp_sum(mine ? w : 0);
      if (lane == leader)
        atomicAdd(reinterpret_cast<unsigned long long*>(&shist[b]), static_cast<unsigned long long>(sum));
      pending &= ~__ballot_sync(kFull, mine);
    }
  }
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += kThreads)
    if (shist[b])
      atomicAdd(reinterpret_cast<unsigned long long*>(&ghist[b]), static_cast<unsigned long long>(shist[b]));
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&s.done[r * 4 + level], 1u) == static_cast<unsigned>(chunks - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  // The last block: the row's histogram, bins in descending order, kThreads / bins per thread.
  // Every thread reads the state before the scan's barriers, so before the one that finds the bin
  // rewrites it.
  uint64_t target = level == 0 ? 0 : st->target, above = level == 0 ? 0 : st->above;
  const int per = bins / kThreads;
  uint64_t mine = 0;
  for (int j = 0; j < per; ++j)
    mine += __ldcg(reinterpret_cast<const unsigned long long*>(&ghist[bins - 1 - per * threadIdx.x - j]));
  uint64_t total = 0;
  const uint64_t excl = block_exclusive_scan(mine, sh, &total);
  if (level == 0) {
    const double want = ceil(p.top_p * static_cast<double>(total));
    target = want < 1 ? 1 : want > static_cast<double>(total) ? total : static_cast<uint64_t>(want);
  }
  const uint64_t rem = target - above;
  if (excl < rem && rem <= excl + mine) {  // exactly one thread: 1 <= rem <= the level's total
    uint64_t acc = excl;
    int b = bins - 1 - per * threadIdx.x;
    for (int j = 0; j < per; ++j) {
      b = bins - 1 - per * threadIdx.x - j;
      const uint64_t h = __ldcg(reinterpret_cast<const unsigned long long*>(&ghist[b]));
      if (acc + h >= rem) {
        st->at = h;
        break;
      }
      acc += h;
    }
    st->prefix = prefix | (static_cast<uint32_t>(b) << shift);
    st->above = above + acc;
    if (level == 0) {
      st->total = total;
      st->target = target;
    }
  }
}

// Kernel 2, one block per (row, chunk); other rows' blocks return at once. Mass rows: the chunk's
// sum of fixed-point masses w_i = exp((x_i - max) / T), the row's max merged from kernel 1's. Top-p
// rows: radix level 0 (key bits 31..21) of the threshold.
__global__ void __launch_bounds__(kThreads)
    sample_masses_kernel(const float* logits, const SamplingRow* rows, const uint32_t* seen_all, Scratch s,
                         int64_t vocab, int64_t chunks) {
  __shared__ uint64_t shist[2048];
  __shared__ uint64_t sh[kWarps + 1];
  __shared__ float shv[kWarps];
  __shared__ int32_t shi[kWarps];
  const int64_t blk = blockIdx.x;
  const int64_t r = blk / chunks, lo = (blk % chunks) * kChunk, hi = min(lo + kChunk, vocab);
  const SamplingRow p = rows[r];
  const bool mass = mass_row(p, vocab);
  if (!mass && !topp_row(p, vocab)) return;
  float best;
  int32_t best_i, bad;
  row_best(s, r, chunks, best, best_i, bad, shv, shi, sh);
  if (bad != INT_MAX) return;
  const Row row{logits + r * vocab, seen_all + r * ((vocab + 31) / 32), p.repetition_penalty,
                p.repetition_penalty != 1.0f, best, fmaxf(static_cast<float>(p.temperature), FLT_MIN)};
  if (!mass) {
    topp_level(0, row, p, s, r, lo, hi, chunks, shist, sh);
    return;
  }
  uint64_t part = 0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads) part += row.fixed(row.at(i));
  const uint64_t total = block_sum(part, sh);
  if (threadIdx.x == 0) s.mass[blk] = total;
}

// Kernels 3 (level 1, key bits 20..10) and 4 (level 2, bits 9..0; then the prefix is tau) of a top-p
// row's threshold, one block per (row, chunk); kernel 5 (level 3 here): per chunk the mass of the keys
// above tau and the count of those equal to it.
__global__ void __launch_bounds__(kThreads)
    sample_topp_kernel(const float* logits, const SamplingRow* rows, const uint32_t* seen_all, Scratch s,
                       int64_t vocab, int64_t chunks, int level) {
  __shared__ uint64_t shist[2048];
  __shared__ uint64_t sh[kWarps + 1];
  __shared__ float shv[kWarps];
  __shared__ int32_t shi[kWarps];
  const int64_t blk = blockIdx.x;
  const int64_t r = blk / chunks, lo = (blk % chunks) * kChunk, hi = min(lo + kChunk, vocab);
  const SamplingRow p = rows[r];
  if (!topp_row(p, vocab)) return;
  float best;
  int32_t best_i, bad;
  row_best(s, r, chunks, best, best_i, bad, shv, shi, sh);
  if (bad != INT_MAX) return;
  const Row row{logits + r * vocab, seen_all + r * ((vocab + 31) / 32), p.repetition_penalty,
                p.repetition_penalty != 1.0f, best, fmaxf(static_cast<float>(p.temperature), FLT_MIN)};
  if (level < 3) {
    topp_level(level, row, p, s, r, lo, hi, chunks, shist, sh);
    return;
  }
  const uint32_t tau = s.topp[r].prefix;
  uint64_t above = 0, ties = 0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads) {
    const float x = row.at(i);
    const uint32_t key = order_key(x);
    if (key > tau) above += row.fixed(x);
    ties += key == tau;
  }
  above = block_sum(above, sh);
  ties = block_sum(ties, sh);
  if (threadIdx.x == 0) {
    s.mass[blk] = above;
    s.count[blk] = static_cast<int32_t>(ties);
  }
}

// The draw of a mass or top-p row (sample_rows_kernel; every thread of the block calls it):
// s.mass holds each chunk's kept mass; target = u * their sum; the chunk where the running sum
// passes it; then that chunk's kept ids (`kept(id, key)`) scanned in id order from the masses of the
// chunks before it. The same sums, in integers, as a scan of the whole row (filter_and_draw over
// Dense, whose tiles are these chunks), so the same token.
template <class Kept>
__device__ void draw_by_chunks(const Scratch& s, int64_t r, int64_t chunks, const Row& row, const SamplingRow& p,
                               int64_t vocab, uint64_t* sh, SamplingResult* result, float* dist, const Kept& kept) {
  __shared__ int64_t chosen;
  __shared__ uint64_t chosen_before;
  const uint64_t* mass = s.mass + r * chunks;
  uint64_t part = 0;
  for (int64_t c = threadIdx.x; c < chunks; c += kThreads) part += mass[c];
  const uint64_t total = block_sum(part, sh);
  __syncthreads();
  const double u = philox_uniform(p.seed, static_cast<uint64_t>(p.position));
  const double scaled = u * static_cast<double>(total);
  const uint64_t target = scaled >= static_cast<double>(total) ? total - 1 : static_cast<uint64_t>(scaled);
  if (threadIdx.x == 0) {
    chosen = chunks - 1;  // not reached: target < total
    chosen_before = 0;
  }
  uint64_t running = 0;
  for (int64_t c0 = 0; c0 < chunks; c0 += kThreads) {
    const int64_t c = c0 + threadIdx.x;
    const uint64_t m = c < chunks ? mass[c] : 0;
    uint64_t tile = 0;
    const uint64_t before = running + block_exclusive_scan(m, sh, &tile);
    if (before <= target && target < before + m) {  // one thread at most (m > 0)
      chosen = c;
      chosen_before = before;
    }
    if (running + tile > target) break;  // the same for every thread of the block
    running += tile;
    __syncthreads();
  }
  __syncthreads();
  const int64_t i0 = chosen * kChunk + static_cast<int64_t>(threadIdx.x) * kItems;
  uint64_t mine = 0;
  for (int j = 0; j < kItems && i0 + j < vocab; ++j) {
    const float x = row.at(i0 + j);
    if (kept(i0 + j, order_key(x))) mine += row.fixed(x);
  }
  uint64_t tile = 0;
  const uint64_t before = chosen_before + block_exclusive_scan(mine, sh, &tile);
  if (before <= target && target < before + mine) {
    uint64_t c = before;
    for (int j = 0; j < kItems && i0 + j < vocab; ++j) {
      const float x = row.at(i0 + j);
      if (!kept(i0 + j, order_key(x))) continue;
      c += row.fixed(x);
      if (c > target) {
        *result = {static_cast<int32_t>(i0 + j), -1};
        break;
      }
    }
  }
  if (dist) {
    const double sum = static_cast<double>(total) / static_cast<double>(kFixedOne);
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float x = row.at(i);
      dist[i] = kept(i, order_key(x)) ? static_cast<float>(static_cast<double>(row.weight(x)) / sum) : 0.f;
    }
  }
}

// What the filter and the draw read, in id order: item f of n has key *key (order_key of the
// penalized logit) and id *id. Dense: every id of the row; Candidates: the row's chunks'
// candidates, chunk after chunk (off[c] = candidates before chunk c, found by binary search).
struct Dense {
  Row row;
  int64_t n;
  static constexpr bool kDense = true;
  __device__ __forceinline__ void get(int64_t f, uint32_t* key, int64_t* id) const {
    *key = order_key(row.at(f));
    *id = f;
  }
};

struct Candidates {
  const uint32_t* key;  // the row's [C, kCap]
  const int32_t* id;
  const int32_t* off;   // [C + 1], shared memory
  int chunks;
  int64_t n;
  static constexpr bool kDense = false;
  __device__ __forceinline__ void get(int64_t f, uint32_t* k, int64_t* i) const {
    int a = 0, b = chunks;  // off[a] <= f < off[b]
    while (b - a > 1) {
      const int m = (a + b) >> 1;
      if (off[m] <= f) a = m; else b = m;
    }
    const int64_t slot = static_cast<int64_t>(a) * kCap + (f - off[a]);
    *k = key[slot];
    *i = id[slot];
  }
};

// Top-k, top-p and the draw of one sampling row (every logit finite, row.max set) over `src`;
// every thread of the block calls it. The host Sampler's rules (sampling.h), in integer sums.
template <class Src>
__device__ void filter_and_draw(const Src& src, const Row& row, const SamplingRow& p, int64_t vocab, uint64_t* hist,
                                uint64_t* sh, SamplingResult* result, float* dist) {
  const int64_t n = src.n;
  // 1. Top-k: the k-th largest key (ties with it kept). Kept from here on: key > cut_key, or
  // key == cut_key and id <= cut_id.
  uint32_t cut_key = 0;
  int64_t cut_id = vocab;
  uint64_t above = 0, at = 0;
  if (p.top_k > 0 && p.top_k < vocab) {
    cut_key = radix_select<true>(
        n,
        [&](int64_t f, uint32_t* key, float*) {
          int64_t i;
          src.get(f, key, &i);
          return true;
        },
        [](float) { return uint64_t{1}; }, static_cast<uint64_t>(p.top_k), hist, sh, &above, &at);
  }
  // 2. Top-p over the kept tokens: the fewest largest masses whose sum reaches top_p of the kept
  // sum; among tokens tied at the boundary, the lowest ids (the host's stable sort).
  if (p.top_p < 1.0) {
    uint64_t part = 0;
    for (int64_t f = threadIdx.x; f < n; f += kThreads) {
      uint32_t k;
      int64_t i;
      src.get(f, &k, &i);
      if (k >= cut_key) part += row.fixed(key_float(k));
    }
    const uint64_t total = block_sum(part, sh);
    __syncthreads();
    const double want = ceil(p.top_p * static_cast<double>(total));
    const uint64_t target = want < 1 ? 1 : want > static_cast<double>(total) ? total : static_cast<uint64_t>(want);
    const uint32_t floor_key = cut_key;
    const uint32_t tau = radix_select<false>(
        n,
        [&](int64_t f, uint32_t* key, float* x) {
          int64_t i;
          src.get(f, key, &i);
          *x = key_float(*key);
          return *key >= floor_key;
        },
        [&](float x) { return row.fixed(x); }, target, hist, sh, &above, &at);
    // Ties at tau all have the same mass: keep the fewest that reach the target.
    const uint64_t each = row.fixed(key_float(tau));
    const uint64_t ties = each ? at / each : 0;
    uint64_t keep = each ? (target - above + each - 1) / each : ties;
    keep = keep < 1 ? 1 : keep > ties ? ties : keep;
    cut_key = tau;
    if (keep < ties) {
      // The keep-th smallest id among the ties: radix select over 2^32 - 1 - id.
      uint64_t a2 = 0, t2 = 0;
      const uint32_t k2 = radix_select<true>(
          n,
          [&](int64_t f, uint32_t* key, float*) {
            uint32_t k;
            int64_t i;
            src.get(f, &k, &i);
            *key = 0xffffffffu - static_cast<uint32_t>(i);
            return k == tau;
          },
          [](float) { return uint64_t{1}; }, keep, hist, sh, &a2, &t2);
      cut_id = static_cast<int64_t>(0xffffffffu - k2);
    }
  }
  auto kept = [&](int64_t i, uint32_t k) { return k > cut_key || (k == cut_key && i <= cut_id); };

  // 3. The draw: u * (sum of kept masses) in the kept masses' inverse CDF, in id order.
  uint64_t part = 0;
  for (int64_t f = threadIdx.x; f < n; f += kThreads) {
    uint32_t k;
    int64_t i;
    src.get(f, &k, &i);
    if (kept(i, k)) part += row.fixed(key_float(k));
  }
  const uint64_t total = block_sum(part, sh);
  __syncthreads();
  const double u = philox_uniform(p.seed, static_cast<uint64_t>(p.position));
  const double scaled = u * static_cast<double>(total);
  const uint64_t target = scaled >= static_cast<double>(total) ? total - 1 : static_cast<uint64_t>(scaled);
  uint64_t running = 0;
  for (int64_t base = 0; base < n; base += static_cast<int64_t>(kThreads) * kItems) {
    const int64_t f0 = base + static_cast<int64_t>(threadIdx.x) * kItems;
    uint64_t mine = 0;
    for (int j = 0; j < kItems; ++j) {
      if (f0 + j < n) {
        uint32_t k;
        int64_t i;
        src.get(f0 + j, &k, &i);
        if (kept(i, k)) mine += row.fixed(key_float(k));
      }
    }
    uint64_t tile = 0;
    const uint64_t before = running + block_exclusive_scan(mine, sh, &tile);
    if (running + tile > target) {  // the same for every thread of the block
      if (before <= target && target < before + mine) {
        uint64_t c = before;
        for (int j = 0; j < kItems && f0 + j < n; ++j) {
          uint32_t k;
          int64_t i;
          src.get(f0 + j, &k, &i);
          if (!kept(i, k)) continue;
          c += row.fixed(key_float(k));
          if (c > target) {
            *result = {static_cast<int32_t>(i), -1};
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
    if (!Src::kDense) {
      __syncthreads();
      for (int64_t i = threadIdx.x; i < vocab; i += kThreads) dist[i] = 0.f;
      __syncthreads();
    }
    for (int64_t f = threadIdx.x; f < n; f += kThreads) {
      uint32_t k;
      int64_t i;
      src.get(f, &k, &i);
      if (kept(i, k))
        dist[i] = static_cast<float>(static_cast<double>(row.weight(key_float(k))) / sum);
      else if (Src::kDense)
        dist[i] = 0.f;
    }
  }
}

// Kernel 3: one block per row. Merges the chunks' max / argmax / non-finite ids; greedy rows take
// the argmax; a mass row draws from its chunks' mass sums and one chunk's scan; a candidate row
// whose chunks all fit filters and draws over the candidates, any other sampling row over its whole
// vocabulary (Dense).
__global__ void __launch_bounds__(kThreads)
    sample_rows_kernel(const float* logits, const SamplingRow* rows, const uint32_t* seen_all, SamplingResult* results,
                       float* distributions, Scratch s, int64_t vocab, int64_t chunks) {
  __shared__ uint64_t hist[256];
  __shared__ uint64_t sh[kWarps + 1];
  __shared__ float shv[kWarps];
  __shared__ int32_t shi[kWarps];
  __shared__ int32_t off[kMaxChunks + 1];
  const int64_t r = blockIdx.x;
  const SamplingRow p = rows[r];
  if (threadIdx.x == 0) results[r] = {-1, -1};
  if (!p.active) return;
  const int64_t words = (vocab + 31) / 32;  // sampling_seen_words
  // A temperature below float range acts as the smallest float (argmax-like), never as 0 (0 / 0).
  Row row{logits + r * vocab, seen_all + r * words, p.repetition_penalty, p.repetition_penalty != 1.0f, 0.f,
          fmaxf(static_cast<float>(p.temperature), FLT_MIN)};
  float* dist = distributions ? distributions + r * vocab : nullptr;

  // 1. Max, argmax (lowest id among equal maxima) and the first non-finite logit, from the chunks'.
  float best;
  int32_t best_i, bad;
  row_best(s, r, chunks, best, best_i, bad, shv, shi, sh);
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

  if (mass_row(p, vocab)) {
    draw_by_chunks(s, r, chunks, row, p, vocab, sh, &results[r], dist, [](int64_t, uint32_t) { return true; });
    return;
  }
  if (topp_row(p, vocab)) {
    // 2. Top-p, tau from kernels 2-4: of the ties at tau (all the same mass) the fewest that reach the
    // target, lowest ids first, as filter_and_draw. Each chunk's kept mass = its mass above tau +
    // each tie's mass times its ties kept (those of rank <= keep in id order over the row).
    __shared__ int64_t tie_chunk, cut_id_sh;
    __shared__ uint64_t tie_before;
    const ToppState st = s.topp[r];
    const uint32_t tau = st.prefix;
    const uint64_t each = row.fixed(key_float(tau));
    const uint64_t ties = each ? st.at / each : 0;
    uint64_t keep = each ? (st.target - st.above + each - 1) / each : ties;
    keep = keep < 1 ? 1 : keep > ties ? ties : keep;
    const bool cut = keep < ties;
    if (threadIdx.x == 0) {
      tie_chunk = 0;
      tie_before = 0;
      cut_id_sh = vocab;
    }
    uint64_t running = 0;
    for (int64_t c0 = 0; c0 < chunks; c0 += kThreads) {
      const int64_t c = c0 + threadIdx.x;
      const uint64_t t = c < chunks ? static_cast<uint64_t>(s.count[r * chunks + c]) : 0;
      uint64_t tile = 0;
      const uint64_t before = running + block_exclusive_scan(t, sh, &tile);
      if (c < chunks) {
        const uint64_t kept_ties = !cut ? t : keep <= before ? 0 : min(t, keep - before);
        s.mass[r * chunks + c] += each * kept_ties;
        if (cut && before < keep && keep <= before + t) {  // the chunk of the keep-th tie
          tie_chunk = c;
          tie_before = before;
        }
      }
      running += tile;
      __syncthreads();
    }
    __syncthreads();
    if (cut) {  // the same for every thread: the id of the keep-th tie, in its chunk
      const int64_t i0 = tie_chunk * kChunk + static_cast<int64_t>(threadIdx.x) * kItems;
      uint64_t mine = 0;
      for (int j = 0; j < kItems && i0 + j < vocab; ++j) mine += order_key(row.at(i0 + j)) == tau;
      uint64_t tile = 0;
      uint64_t c = tie_before + block_exclusive_scan(mine, sh, &tile);
      if (c < keep && keep <= c + mine)
        for (int j = 0; j < kItems && i0 + j < vocab; ++j)
          if (order_key(row.at(i0 + j)) == tau && ++c == keep) {
            cut_id_sh = i0 + j;
            break;
          }
      __syncthreads();
    }
    const int64_t cut_id = cut_id_sh;
    draw_by_chunks(s, r, chunks, row, p, vocab, sh, &results[r], dist,
                   [&](int64_t i, uint32_t k) { return k > tau || (k == tau && i <= cut_id); });
    return;
  }
  if (candidate_row(p, vocab)) {
    // 2. The candidates' offsets (chunk after chunk); a chunk past kCap sends the row to the full pass.
    uint64_t running = 0;
    bool overflow = false;
    for (int64_t c0 = 0; c0 < chunks; c0 += kThreads) {
      const int64_t c = c0 + threadIdx.x;
      const int32_t cnt = c < chunks ? s.count[r * chunks + c] : 0;
      overflow |= __syncthreads_or(cnt < 0) != 0;
      uint64_t tile = 0;
      const uint64_t before = running + block_exclusive_scan(cnt > 0 ? static_cast<uint64_t>(cnt) : 0, sh, &tile);
      if (c < chunks) off[c] = static_cast<int32_t>(before);
      running += tile;
      __syncthreads();
    }
    if (threadIdx.x == 0) off[chunks] = static_cast<int32_t>(running);
    __syncthreads();
    if (!overflow) {
      const Candidates src{s.key + r * chunks * kCap, s.id + r * chunks * kCap, off, static_cast<int>(chunks),
                           static_cast<int64_t>(running)};
      filter_and_draw(src, row, p, vocab, hist, sh, &results[r], dist);
      return;
    }
  }
  filter_and_draw(Dense{row, vocab}, row, p, vocab, hist, sh, &results[r], dist);
}

}  // namespace

size_t sampling_scratch_bytes(int64_t rows, int64_t vocab) {
  if (rows < 1 || vocab < 1) return 0;
  return static_cast<size_t>(rows * chunks_of(vocab)) * ((2 * kCap + 4) * 4 + 8) +
         static_cast<size_t>(rows) * (kHistPerRow * 8 + sizeof(ToppState) + 16);
}

cudaError_t launch_sample_rows(const float* logits, const SamplingRow* rows, const int64_t* ids,
                               const int32_t* token_seq, const int64_t* positions, uint32_t* seen,
                               SamplingResult* results, float* distributions, void* scratch, const SamplingDesc& d,
                               cudaStream_t stream) {
  if (d.rows < 1 || d.rows > INT_MAX || d.vocab < 1 || d.vocab > kMaxVocab || d.tokens < 0 || !scratch)
    return cudaErrorInvalidValue;
  const int64_t chunks = chunks_of(d.vocab);
  if (d.rows * chunks > INT_MAX) return cudaErrorInvalidValue;
  const Scratch s = scratch_view(scratch, d.rows, d.vocab);
  sample_chunks_kernel<<<static_cast<unsigned>(d.rows * chunks), kThreads, 0, stream>>>(
      logits, rows, ids, token_seq, positions, seen, s, d.vocab, d.tokens, chunks);
  sample_masses_kernel<<<static_cast<unsigned>(d.rows * chunks), kThreads, 0, stream>>>(logits, rows, seen, s, d.vocab,
                                                                                        chunks);
  for (int level = 1; level <= 3; ++level)
    sample_topp_kernel<<<static_cast<unsigned>(d.rows * chunks), kThreads, 0, stream>>>(logits, rows, seen, s, d.vocab,
                                                                                      chunks, level);
  sample_rows_kernel<<<static_cast<unsigned>(d.rows), kThreads, 0, stream>>>(logits, rows, seen, results, distributions,
                                                                             s, d.vocab, chunks);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
