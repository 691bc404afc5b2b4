// PagedAttention's CUDA kernels (kernels_llm.h): the append of the step's K/V rows into the paged
// pool, and a streaming-softmax attention that reads the pool through the block table. Layout of
// the work: a "lane group" of D / 8 lanes (rounded up to 8, 16 or 32) holds one key row, each lane
// 8 consecutive dims in one 16-byte load (two for fp32); a 128-thread block walks the keys of one
// (token, kv head) with 128 / lanes groups in parallel, every group keeping its own running max,
// sum and weighted V for each of the kG query heads of the GQA group it serves (so K/V are read
// once per kv head, not once per query head); the groups merge through shuffles and shared memory
// at the end. Scores are scaled by log2(e) up front so every exponential is an exp2f. FP8 E4M3 pools
// (one byte per element, 8-byte row accesses) store x / scale and are read as code * scale, the
// key scale folded into Q's scaling and the value scale into the output.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <type_traits>

#include "backends/cuda/kernels_llm.h"
#include "backends/cuda/pdl.cuh"
#include "backends/cuda/storage_access.cuh"

namespace kiln::cuda {
namespace {

constexpr int kThreads = 128;
constexpr unsigned kFull = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ void load8(const void* p, int64_t i, StorageType t, float* v) {
  switch (t) {
    case StorageType::kF16: Vec8<__half>::ld(p, i, v); return;
    case StorageType::kBF16: Vec8<__nv_bfloat16>::ld(p, i, v); return;
    default: Vec8<float>::ld(p, i, v); return;
  }
}
__device__ __forceinline__ void store8(void* p, int64_t i, const float* v, StorageType t) {
  switch (t) {
    case StorageType::kF16: Vec8<__half>::st(p, i, v); return;
    case StorageType::kBF16: Vec8<__nv_bfloat16>::st(p, i, v); return;
    default: Vec8<float>::st(p, i, v); return;
  }
}

// Where token t's K/V live: its block-table row, position, the layer's pool and block count.
// False for padding (token_seq < 0) and for anything the kernels must not follow (row >= R,
// negative position, position past the table, null pool).
struct Target {
  int32_t row;
  int64_t pos;
  const char* pool;
  int64_t num_blocks;
};
__device__ __forceinline__ bool token_target(const PagedAttentionDesc& d, const int64_t* positions,
                                             const int32_t* token_seq, const int64_t* kv_pools, int64_t t, Target* r) {
  r->row = token_seq[t];
  if (r->row < 0 || r->row >= d.rows) return false;
  r->pos = positions[t];
  if (r->pos < 0 || r->pos / d.block_size >= d.max_blocks) return false;
  r->pool = reinterpret_cast<const char*>(kv_pools[2 * d.layer]);
  r->num_blocks = kv_pools[2 * d.layer + 1];
  return r->pool != nullptr && r->num_blocks > 0;
}

// ---------------------------------------------------------------- append
// n (8 or 1) values of one K (kv 0) or V (kv 1) row to the pool at element dst in the cache
// storage: 16/32-bit with round-to-nearest-even; FP8 as E4M3(x / scale), nearest even,
// saturating to +-448 (the CPU kernel's double_to_fp8e4m3fn), 8 codes in one 8-byte store.
__device__ __forceinline__ void pool_store(char* pool, int64_t dst, const float* e, int n, const PagedAttentionDesc& d,
                                           int kv) {
  if (d.cache == StorageType::kF8E4M3) {
    const float sc = kv == 0 ? d.k_scale : d.v_scale;
    if (n == 8) {
      uint8_t b[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) b[j] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(e[j] / sc, __NV_SATFINITE, __NV_E4M3));
      uint2 u;
      memcpy(&u, b, 8);
      *reinterpret_cast<uint2*>(pool + dst) = u;
    } else {
      pool[dst] = static_cast<char>(__nv_cvt_float_to_fp8(e[0] / sc, __NV_SATFINITE, __NV_E4M3));
    }
  } else if (n == 8) {
    store8(pool, dst, e, d.cache);
  } else {
    store(pool, dst, e[0], d.cache);
  }
}

// One thread per w elements of one K or V row (w = 8, one 16-byte access, when D % 8 == 0; else
// 1): idx = ((t * Hkv + h) * 2 + kv) * (D / w) + i.
__global__ void paged_append_kernel(const void* k, const void* v, const int64_t* positions, const int32_t* token_seq,
                                    const int32_t* block_table, const int64_t* kv_pools, PagedAttentionDesc d) {
  const int64_t w = d.d % 8 == 0 ? 8 : 1;
  const int64_t vecs = d.d / w;
  const int64_t total = d.tokens * d.hkv * 2 * vecs;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % vecs;
    const int64_t kv = (idx / vecs) % 2;
    const int64_t h = (idx / (2 * vecs)) % d.hkv;
    const int64_t t = idx / (2 * vecs * d.hkv);
    Target g;
    if (!token_target(d, positions, token_seq, kv_pools, t, &g)) continue;
    const int32_t blk = block_table[g.row * d.max_blocks + g.pos / d.block_size];
    if (blk < 0 || blk >= g.num_blocks) continue;
    const void* src = kv == 0 ? k : v;
    const int64_t from = (t * d.hkv + h) * d.d + i * w;
    const int64_t dst = ((static_cast<int64_t>(blk) * 2 + kv) * d.hkv + h) * d.block_size * d.d +
                        (g.pos % d.block_size) * d.d + i * w;
    float e[8];
    if (w == 8) load8(src, from, d.io, e);
    else e[0] = load(src, from, d.io);
    pool_store(const_cast<char*>(g.pool), dst, e, static_cast<int>(w), d, static_cast<int>(kv));
  }
}

// ---------------------------------------------------------------- append with RoPE
// x rounded to storage t (the value a Rope layer's output would hold).
__device__ __forceinline__ float round_to(float x, StorageType t) {
  if (t == StorageType::kF16) return __half2float(__float2half_rn(x));
  if (t == StorageType::kBF16) return __bfloat162float(__float2bfloat16_rn(x));
  return x;
}

// Items per token: (Hq + Hkv) rotated rows of `rc` chunks (w pairs each), then Hkv V rows of `vc`
// chunks (vw values each).
__global__ void paged_rope_append_kernel(const void* q, const void* k, const void* v, const float* inv_freq,
                                         const int64_t* positions, const int32_t* token_seq,
                                         const int32_t* block_table, const int64_t* kv_pools, void* q_out,
                                         PagedAttentionDesc d) {
  pdl_trigger();  // the layers after it may launch (they wait for it: pdl.cuh)
  pdl_wait();     // launched early itself: Q, K, V are the GEMM's before it
  const int64_t half = d.d / 2;
  const int w = half % 8 == 0 ? 8 : 1;
  const int vw = d.d % 8 == 0 ? 8 : 1;
  const int64_t rc = half / w, vc = d.d / vw;
  const int64_t per = (d.hq + d.hkv) * rc + d.hkv * vc;
  const int64_t total = d.tokens * per;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / per, r = idx % per;
    Target g;
    const bool follow = token_target(d, positions, token_seq, kv_pools, t, &g);
    int32_t blk = -1;
    if (follow) {
      blk = block_table[g.row * d.max_blocks + g.pos / d.block_size];
      if (blk >= g.num_blocks) blk = -1;
    }
    char* pool = const_cast<char*>(g.pool);
    if (r < (d.hq + d.hkv) * rc) {
      const int64_t head = r / rc, c = r % rc;
      const bool is_q = head < d.hq;
      if (!is_q && blk < 0) continue;
      const int64_t h = is_q ? head : head - d.hq, H = is_q ? d.hq : d.hkv;
      const int64_t base = (t * H + h) * d.d, i0 = c * w;
      const void* src = is_q ? q : k;
      float a[8], b[8];
      if (w == 8) {
        load8(src, base + i0, d.io, a);
        load8(src, base + i0 + half, d.io, b);
      } else {
        a[0] = load(src, base + i0, d.io);
        b[0] = load(src, base + i0 + half, d.io);
      }
      const float p = static_cast<float>(positions[t]);
      for (int m = 0; m < w; ++m) {
        float s, co;
        sincosf(p * inv_freq[i0 + m], &s, &co);
        const float x1 = a[m], x2 = b[m];
        a[m] = round_to(x1 * co - x2 * s, d.io);
        b[m] = round_to(x2 * co + x1 * s, d.io);
      }
      if (is_q) {
        if (w == 8) {
          store8(q_out, base + i0, a, d.io);
          store8(q_out, base + i0 + half, b, d.io);
        } else {
          store(q_out, base + i0, a[0], d.io);
          store(q_out, base + i0 + half, b[0], d.io);
        }
        continue;
      }
      const int64_t dst = ((static_cast<int64_t>(blk) * 2) * d.hkv + h) * d.block_size * d.d +
                          (g.pos % d.block_size) * d.d + i0;
      pool_store(pool, dst, a, w, d, 0);
      pool_store(pool, dst + half, b, w, d, 0);
    } else {
      if (blk < 0) continue;
      const int64_t rv = r - (d.hq + d.hkv) * rc;
      const int64_t h = rv / vc, i = (rv % vc) * vw;
      float e[8];
      if (vw == 8) load8(v, (t * d.hkv + h) * d.d + i, d.io, e);
      else e[0] = load(v, (t * d.hkv + h) * d.d + i, d.io);
      const int64_t dst = ((static_cast<int64_t>(blk) * 2 + 1) * d.hkv + h) * d.block_size * d.d +
                          (g.pos % d.block_size) * d.d + i;
      pool_store(pool, dst, e, vw, d, 1);
    }
  }
}

// ---------------------------------------------------------------- attention
// Eight pool elements as loaded (16 bytes; 32 for fp32), converted to float only when used: the
// loads of several key rows stay in flight in half the registers.
template <typename T>
struct Row8 {
  static constexpr int kWords = sizeof(T) / 2;  // 16-byte words: 2 for float, 1 for half / bfloat16
  uint4 w[kWords];
  __device__ __forceinline__ void ld(const void* p, int64_t i, int /*n: always 8*/) {
    const uint4* src = reinterpret_cast<const uint4*>(static_cast<const T*>(p) + i);
#pragma unroll
    for (int k = 0; k < kWords; ++k) w[k] = src[k];
  }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int k = 0; k < kWords; ++k) w[k] = make_uint4(0, 0, 0, 0);
  }
  __device__ __forceinline__ void to_float(float* v) const;
};
// The same for head dims that are not a multiple of 8 (rows not 16-byte aligned): the lane's
// `n` <= 8 elements loaded one by one as floats, the rest 0.
template <typename T>
struct RowScalar {
  float v[8];
  __device__ __forceinline__ void ld(const void* p, int64_t i, int n) {
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = e < n ? to_f(static_cast<const T*>(p)[i + e]) : 0.f;
  }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = 0.f;
  }
  __device__ __forceinline__ void to_float(float* o) const {
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = v[e];
  }
  static __device__ __forceinline__ float to_f(float x) { return x; }
  static __device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
  static __device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ float to_f(__nv_fp8_e4m3 x) { return static_cast<float>(x); }
};

// FP8 E4M3 pools: eight codes in one 8-byte load, decoded pairwise through half2 (exact: every
// E4M3 value is a half).
struct Row8Fp8 {
  uint2 w;
  __device__ __forceinline__ void ld(const void* p, int64_t i, int /*n: always 8*/) {
    w = *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(p) + i);
  }
  __device__ __forceinline__ void zero() { w = make_uint2(0, 0); }
  __device__ __forceinline__ void to_float(float* v) const {
    const unsigned u[2] = {w.x, w.y};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const __nv_fp8x2_storage_t pair = static_cast<__nv_fp8x2_storage_t>((u[j / 2] >> (16 * (j % 2))) & 0xffffu);
      const __half2 h = __half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3));
      const float2 f = __half22float2(h);
      v[2 * j] = f.x;
      v[2 * j + 1] = f.y;
    }
  }
};

template <>
__device__ __forceinline__ void Row8<float>::to_float(float* v) const {
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    v[4 * k] = __uint_as_float(w[k].x);
    v[4 * k + 1] = __uint_as_float(w[k].y);
    v[4 * k + 2] = __uint_as_float(w[k].z);
    v[4 * k + 3] = __uint_as_float(w[k].w);
  }
}
template <>
__device__ __forceinline__ void Row8<__half>::to_float(float* v) const {
  const unsigned u[4] = {w[0].x, w[0].y, w[0].z, w[0].w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    __half2 h;
    memcpy(&h, &u[j], 4);
    const float2 f = __half22float2(h);
    v[2 * j] = f.x;
    v[2 * j + 1] = f.y;
  }
}
template <>
__device__ __forceinline__ void Row8<__nv_bfloat16>::to_float(float* v) const {
  const unsigned u[4] = {w[0].x, w[0].y, w[0].z, w[0].w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    // bfloat16 -> float is a 16-bit shift: the low half is element 2j, the high half 2j + 1.
    v[2 * j] = __uint_as_float(u[j] << 16);
    v[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
  }
}

// Running softmax state of one query head over a lane's 8 dims: max m (log2 units), sum l of
// exp2(score - m), acc = sum of exp2(score - m) * v. merge() folds another state into this one.
template <int kG>
struct Online {
  float m[kG], l[kG], acc[kG][8];
  __device__ void merge(int g, float m2, float l2, const float* acc2) {
    const float mn = fmaxf(m[g], m2);
    const float a = m[g] == -INFINITY ? 0.f : exp2f(m[g] - mn);
    const float b = m2 == -INFINITY ? 0.f : exp2f(m2 - mn);
    l[g] = l[g] * a + l2 * b;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[g][i] = acc[g][i] * a + acc2[i] * b;
    m[g] = mn;
  }
};

struct AttnArgs {
  const void* q;
  const int64_t* positions;
  const int32_t* token_seq;
  const int32_t* block_table;
  const int64_t* kv_pools;
  void* out;
  float* ws_acc;   // [T, Hq, splits, D] (splits > 1)
  float2* ws_ml;   // [T, Hq, splits]: (max, sum)
};

// Blocks per SM the register budget is set for: 4 (16 warps, 128 registers) keeps enough loads in
// flight for decode; fp32 pools and 8-head blocks need more registers (no spills at 3 and 2;
// nvcc -Xptxas -v, sm_90).
template <typename CacheT, int kG>
constexpr int min_blocks() {
  return kG >= 8 ? 2 : (sizeof(CacheT) == 4 ? 3 : 4);
}

// Grid: x = (t * Hkv + kv head) * chunks + head chunk, y = split. kLanes lanes per key row
// (D <= 8 * kLanes), kG query heads per block (a chunk of the GQA group). kVec: D % 8 == 0, every
// row access one 16-byte load (two for fp32); else element by element.
template <typename CacheT, int kLanes, int kG, bool kVec>
__global__ void __launch_bounds__(kThreads, min_blocks<CacheT, kG>()) paged_attention_kernel(AttnArgs a, PagedAttentionDesc d) {
  constexpr bool kFp8 = sizeof(CacheT) == 1;
  using Row = std::conditional_t<kVec, std::conditional_t<kFp8, Row8Fp8, Row8<CacheT>>, RowScalar<CacheT>>;
  constexpr int kGroups = kThreads / kLanes;  // key rows in flight per step of the block
  constexpr int kWarps = kThreads / 32;
  constexpr int kUnroll = kG >= 4 ? 2 : 4;    // key rows per group per step (loads issued together)
  __shared__ float sh_acc[kWarps][kG][kLanes * 8];
  __shared__ float sh_m[kWarps][kG], sh_l[kWarps][kG];
  pdl_trigger();
  pdl_wait();

  const int64_t group = d.hq / d.hkv;
  const int64_t chunks = (group + kG - 1) / kG;
  const int64_t hc = blockIdx.x % chunks;
  const int64_t kvh = (blockIdx.x / chunks) % d.hkv;
  const int64_t t = blockIdx.x / (chunks * d.hkv);
  const int64_t split = blockIdx.y;
  const int64_t head0 = kvh * group + hc * kG;
  const int nh = static_cast<int>(min(static_cast<int64_t>(kG), group - hc * kG));
  const int lane = threadIdx.x % kLanes, grp = threadIdx.x / kLanes;
  const int64_t dim0 = static_cast<int64_t>(lane) * 8;
  const bool active = dim0 < d.d;
  const int nvalid = active ? static_cast<int>(min(static_cast<int64_t>(8), d.d - dim0)) : 0;  // this lane's dims

  Target tg;
  const bool valid = token_target(d, a.positions, a.token_seq, a.kv_pools, t, &tg);
  int64_t kbeg = 0, kend = valid ? tg.pos + 1 : 0;
  if (d.splits > 1) {
    kbeg = split * d.partition;
    kend = min(kend, kbeg + d.partition);
  }
  if (kend <= kbeg) {  // nothing to attend (padding, bad input, a split past the position)
    if (d.splits == 1) {  // the nh heads' rows are contiguous
      for (int64_t e = threadIdx.x; e < nh * d.d; e += kThreads) store(a.out, (t * d.hq + head0) * d.d + e, 0.f, d.io);
    } else if (threadIdx.x < nh) {
      a.ws_ml[(t * d.hq + head0 + threadIdx.x) * d.splits + split] = make_float2(-INFINITY, 0.f);
    }
    return;
  }

  float q[kG][8];
  Online<kG> st;
  const float qs = d.scale * kLog2e * (kFp8 ? d.k_scale : 1.f);
  const float vs = kFp8 ? d.v_scale : 1.f;  // the value codes' scale, applied to the output
#pragma unroll
  for (int g = 0; g < kG; ++g) {
    if (g < nh && active) {
      const int64_t qi = (t * d.hq + head0 + g) * d.d + dim0;
      if constexpr (kVec) {
        load8(a.q, qi, d.io, q[g]);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) q[g][i] = i < nvalid ? load(a.q, qi + i, d.io) : 0.f;
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) q[g][i] *= qs;
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) q[g][i] = 0.f;
    }
    st.m[g] = -INFINITY;
    st.l[g] = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) st.acc[g][i] = 0.f;
  }

  const int32_t* brow = a.block_table + static_cast<int64_t>(tg.row) * d.max_blocks;
  const int64_t head_elems = d.block_size * d.d;           // one (block, K or V, head) slab
  const int64_t v_off = d.hkv * head_elems;                // V slab after the K slabs of a block
  const int bs = static_cast<int>(d.block_size);
  for (int64_t j0 = kbeg; j0 < kend; j0 += static_cast<int64_t>(kGroups) * kUnroll) {
    Row kr[kUnroll], vr[kUnroll];
    bool ok[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t j = j0 + u * kGroups + grp;
      ok[u] = j < kend;
      int32_t blk = -1;
      if (ok[u]) {
        blk = brow[static_cast<int>(j) / bs];
        ok[u] = blk >= 0 && blk < tg.num_blocks;
      }
      if (ok[u] && active) {
        const int64_t off = (static_cast<int64_t>(blk) * 2 * d.hkv + kvh) * head_elems +
                            static_cast<int64_t>(static_cast<int>(j) % bs) * d.d + dim0;
        kr[u].ld(tg.pool, off, nvalid);
        vr[u].ld(tg.pool, off + v_off, nvalid);
      } else {
        kr[u].zero();
        vr[u].zero();
      }
    }
    // Scores of the step's key rows for every head (invalid rows: -inf), then one rescale of the
    // running state per head and step (not per key row).
    float sc[kUnroll][kG];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kk[8];
      kr[u].to_float(kk);
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) s = fmaf(q[g][i], kk[i], s);
#pragma unroll
        for (int o = kLanes / 2; o > 0; o >>= 1) s += __shfl_xor_sync(kFull, s, o);
        sc[u][g] = ok[u] ? s : -INFINITY;
      }
    }
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      float tmax = sc[0][g];
#pragma unroll
      for (int u = 1; u < kUnroll; ++u) tmax = fmaxf(tmax, sc[u][g]);
      if (tmax == -INFINITY) continue;  // no valid row in this step (uniform over the lane group)
      const float mn = fmaxf(st.m[g], tmax);
      const float corr = exp2f(st.m[g] - mn);  // 0 while m = -inf (no row seen yet)
      st.l[g] *= corr;
#pragma unroll
      for (int i = 0; i < 8; ++i) st.acc[g][i] *= corr;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const float pe = exp2f(sc[u][g] - mn);  // 0 for an invalid row
        st.l[g] += pe;
        float vv[8];
        vr[u].to_float(vv);
#pragma unroll
        for (int i = 0; i < 8; ++i) st.acc[g][i] = fmaf(pe, vv[i], st.acc[g][i]);
      }
      st.m[g] = mn;
    }
  }

  // Merge the groups of a warp (same lane index, other groups), then the warps.
#pragma unroll
  for (int o = kLanes; o < 32; o <<= 1) {
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      float acc2[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) acc2[i] = __shfl_xor_sync(kFull, st.acc[g][i], o);
      const float m2 = __shfl_xor_sync(kFull, st.m[g], o);
      const float l2 = __shfl_xor_sync(kFull, st.l[g], o);
      st.merge(g, m2, l2, acc2);
    }
  }
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 < kLanes) {
#pragma unroll
    for (int g = 0; g < kG; ++g) {
#pragma unroll
      for (int i = 0; i < 8; ++i) sh_acc[warp][g][lane * 8 + i] = st.acc[g][i];
      if (lane == 0) {
        sh_m[warp][g] = st.m[g];
        sh_l[warp][g] = st.l[g];
      }
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < nh * kLanes; e += kThreads) {
    const int g = e / kLanes, ln = e % kLanes;
    if (static_cast<int64_t>(ln) * 8 >= d.d) continue;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sh_m[w][g]);
    float l = 0.f, acc[8] = {};
    for (int w = 0; w < kWarps; ++w) {
      const float f = sh_m[w][g] == -INFINITY ? 0.f : exp2f(sh_m[w][g] - mx);
      l += sh_l[w][g] * f;
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] += sh_acc[w][g][ln * 8 + i] * f;
    }
    const int64_t head = t * d.hq + head0 + g;
    if (d.splits == 1) {
      const float inv = l > 0.f ? vs / l : 0.f;
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] *= inv;
      if constexpr (kVec) {
        store8(a.out, head * d.d + ln * 8, acc, d.io);
      } else {
        for (int i = 0; i < 8 && ln * 8 + i < d.d; ++i) store(a.out, head * d.d + ln * 8 + i, acc[i], d.io);
      }
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] *= vs;  // partial sums are linear in V: scaled before the merge
      float* w = a.ws_acc + (head * d.splits + split) * d.d + ln * 8;
      if constexpr (kVec) {
        Vec8<float>::st(w, 0, acc);
      } else {
        for (int i = 0; i < 8 && ln * 8 + i < d.d; ++i) w[i] = acc[i];
      }
      if (ln == 0) a.ws_ml[head * d.splits + split] = make_float2(mx, l);
    }
  }
}

// Flash-decoding's second phase: one block per (token, query head), one thread per dim;
// partitions with an empty sum (past the position, padding) carry no weight.
__global__ void paged_merge_kernel(const float* ws_acc, const float2* ws_ml, void* out, PagedAttentionDesc d) {
  pdl_trigger();
  pdl_wait();
  const int64_t head = blockIdx.x;  // t * Hq + h
  const float2* ml = ws_ml + head * d.splits;
  float mx = -INFINITY;
  for (int64_t sp = 0; sp < d.splits; ++sp)
    if (ml[sp].y > 0.f) mx = fmaxf(mx, ml[sp].x);
  for (int64_t i = threadIdx.x; i < d.d; i += blockDim.x) {
    float l = 0.f, acc = 0.f;
    for (int64_t sp = 0; sp < d.splits; ++sp) {
      const float2 p = ml[sp];
      if (!(p.y > 0.f)) continue;
      const float f = exp2f(p.x - mx);
      l += p.y * f;
      acc += ws_acc[(head * d.splits + sp) * d.d + i] * f;
    }
    store(out, head * d.d + i, l > 0.f ? acc / l : 0.f, d.io);
  }
}

template <typename CacheT, int kLanes, bool kVec = true>
cudaError_t launch_lanes(const AttnArgs& a, const PagedAttentionDesc& d, dim3 grid, int kg, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  switch (kg) {
    case 1: err = launch_pdl(grid, dim3(kThreads), 0, stream, paged_attention_kernel<CacheT, kLanes, 1, kVec>, a, d); break;
    case 2: err = launch_pdl(grid, dim3(kThreads), 0, stream, paged_attention_kernel<CacheT, kLanes, 2, kVec>, a, d); break;
    case 4: err = launch_pdl(grid, dim3(kThreads), 0, stream, paged_attention_kernel<CacheT, kLanes, 4, kVec>, a, d); break;
    default: err = launch_pdl(grid, dim3(kThreads), 0, stream, paged_attention_kernel<CacheT, kLanes, 8, kVec>, a, d); break;
  }
  return err;
}

template <typename CacheT>
cudaError_t launch_cache(const AttnArgs& a, const PagedAttentionDesc& d, dim3 grid, int kg, cudaStream_t stream) {
  if (d.d % 8 != 0) return launch_lanes<CacheT, 8, false>(a, d, grid, kg, stream);  // D < 64 (the factory checks)
  if (d.d <= 64) return launch_lanes<CacheT, 8>(a, d, grid, kg, stream);
  if (d.d <= 128) return launch_lanes<CacheT, 16>(a, d, grid, kg, stream);
  return launch_lanes<CacheT, 32>(a, d, grid, kg, stream);
}

// Query heads per block: the GQA group size rounded up to a power of two, at most 8.
int heads_per_block(const PagedAttentionDesc& d) {
  const int64_t g = d.hq / d.hkv;
  return g >= 5 ? 8 : (g >= 3 ? 4 : static_cast<int>(g));
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

void plan_paged_attention_splits(PagedAttentionDesc* d, size_t workspace_limit) {
  d->splits = 1;
  d->partition = 0;
  if (d->hkv <= 0 || d->hq % d->hkv != 0) return;
  const int64_t blocks = d->tokens * d->hkv * ceil_div(d->hq / d->hkv, heads_per_block(*d));
  const int64_t ctx = d->max_blocks * d->block_size;  // the most positions a sequence can hold
  // About 8 resident 128-thread blocks on each of an H100's 132 SMs: fewer blocks than this
  // leave bandwidth unused on a long context.
  constexpr int64_t kFill = 1024;
  constexpr int64_t kMaxSplits = 64;
  if (blocks >= kFill || ctx <= 256) return;
  int64_t part = blocks * ceil_div(ctx, 512) >= kFill ? 512 : 256;
  if (ceil_div(ctx, part) > kMaxSplits) part = ceil_div(ceil_div(ctx, kMaxSplits), 64) * 64;
  for (;;) {
    d->partition = part;
    d->splits = ceil_div(ctx, part);
    if (d->splits <= 1 || paged_attention_workspace(*d) <= workspace_limit) break;
    part *= 2;
  }
  if (d->splits <= 1) {
    d->splits = 1;
    d->partition = 0;
  }
}

namespace {
// Workspace: the partial V sums [T, Hq, splits, D] fp32, then (at a 256-byte boundary) the
// (max, sum) pairs [T, Hq, splits].
size_t acc_bytes(const PagedAttentionDesc& d) {
  const auto n = static_cast<size_t>(d.tokens * d.hq * d.splits * d.d) * sizeof(float);
  return (n + 255) / 256 * 256;
}
}  // namespace

size_t paged_attention_workspace(const PagedAttentionDesc& d) {
  if (d.splits <= 1) return 0;
  return acc_bytes(d) + static_cast<size_t>(d.tokens * d.hq * d.splits) * sizeof(float2);
}

cudaError_t launch_paged_kv_append(const void* k, const void* v, const int64_t* positions, const int32_t* token_seq,
                                   const int32_t* block_table, const int64_t* kv_pools, const PagedAttentionDesc& d,
                                   cudaStream_t stream) {
  const int64_t total = d.tokens * d.hkv * 2 * (d.d % 8 == 0 ? d.d / 8 : d.d);
  if (total == 0) return cudaSuccess;
  const unsigned threads = 256;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(total, threads), 65535LL * 16));
  paged_append_kernel<<<blocks, threads, 0, stream>>>(k, v, positions, token_seq, block_table, kv_pools, d);
  return cudaGetLastError();
}

cudaError_t launch_paged_rope_append(const void* q, const void* k, const void* v, const float* inv_freq,
                                     const int64_t* positions, const int32_t* token_seq, const int32_t* block_table,
                                     const int64_t* kv_pools, void* q_out, const PagedAttentionDesc& d,
                                     cudaStream_t stream) {
  if (d.d % 2 != 0) return cudaErrorInvalidValue;
  const int64_t half = d.d / 2;
  const int64_t rc = half % 8 == 0 ? half / 8 : half, vc = d.d % 8 == 0 ? d.d / 8 : d.d;
  const int64_t total = d.tokens * ((d.hq + d.hkv) * rc + d.hkv * vc);
  if (total == 0) return cudaSuccess;
  const unsigned threads = 256;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(total, threads), 65535LL * 16));
  return launch_pdl(dim3(blocks), dim3(threads), 0, stream, paged_rope_append_kernel, q, k, v, inv_freq, positions,
                    token_seq, block_table, kv_pools, q_out, d);
}

cudaError_t launch_paged_attention(const void* q, const int64_t* positions, const int32_t* token_seq,
                                   const int32_t* block_table, const int64_t* kv_pools, void* out, void* workspace,
                                   const PagedAttentionDesc& d, cudaStream_t stream) {
  if (d.tokens == 0 || d.hq == 0) return cudaSuccess;
  const int kg = heads_per_block(d);
  const int64_t chunks = ceil_div(d.hq / d.hkv, kg);
  AttnArgs a{q, positions, token_seq, block_table, kv_pools, out, nullptr, nullptr};
  if (d.splits > 1) {
    a.ws_acc = static_cast<float*>(workspace);
    a.ws_ml = reinterpret_cast<float2*>(static_cast<char*>(workspace) + acc_bytes(d));
  }
  const dim3 grid(static_cast<unsigned>(d.tokens * d.hkv * chunks), static_cast<unsigned>(d.splits));
  cudaError_t e = cudaSuccess;
  switch (d.cache) {
    case StorageType::kF16: e = launch_cache<__half>(a, d, grid, kg, stream); break;
    case StorageType::kBF16: e = launch_cache<__nv_bfloat16>(a, d, grid, kg, stream); break;
    case StorageType::kF8E4M3: e = launch_cache<__nv_fp8_e4m3>(a, d, grid, kg, stream); break;
    default: e = launch_cache<float>(a, d, grid, kg, stream); break;
  }
  if (e != cudaSuccess || d.splits <= 1) return e;
  const unsigned threads = static_cast<unsigned>(std::min<int64_t>(256, ceil_div(d.d, 32) * 32));
  return launch_pdl(dim3(static_cast<unsigned>(d.tokens * d.hq)), dim3(threads), 0, stream, paged_merge_kernel,
                    static_cast<const float*>(a.ws_acc), static_cast<const float2*>(a.ws_ml), out, d);
}

}  // namespace kiln::cuda
