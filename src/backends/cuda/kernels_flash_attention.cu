// Kiln's fused attention kernel, FlashAttention-2 style (Dao 2023, algorithm 1): one block of
// W = 4 or 8 warps per 16·W query rows of one (batch, query head); each warp owns 16 rows. The Q
// tile is read once into registers as mma A fragments; K and V tiles of 64 keys stream through a
// two-stage shared-memory ring (cp.async): tile t + 1's K and V are in flight while tile t is
// computed, so each tile costs one wait and two barriers. Per tile, in float32:
//   S = scale·log2(e) · Q Kᵀ (+ log2(e) · mask), excluded keys -> -inf,
//   m' = max(m, rowmax S), P = 2^(S - m'), l = l·2^(m - m') + rowsum P, O = O·2^(m - m') + P V
// and at the end O / l (0 where l = 0: every key excluded). P goes from the S accumulators to
// the A fragments of P V in registers (rounded to the storage type), so neither S nor P is ever
// in memory. A warp computes only the 16-key groups that hold a key visible to one of its rows
// (tails of Sk, the causal bound) and nothing when its rows are all past Sq. O leaves through the
// warp's own rows of the Q tile, in 16-byte stores. Fragment layouts: PTX ISA, "Matrix fragments
// for mma.m16n8k16" and "ldmatrix". Design and expected gains: docs/decisions/0084.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/kernels_flash_attention.h"

namespace kiln::cuda {
namespace {

constexpr int kBlockK = 64;  // keys per tile
constexpr float kLog2e = 1.4426950408889634f;

template <typename T>
struct Elem;
template <>
struct Elem<__half> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);  // lo in the low 16 bits: the lower column
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  static __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
  static __device__ __forceinline__ float2 unpack(uint32_t x) {  // the low 16 bits first
    return __half22float2(*reinterpret_cast<const __half2*>(&x));
  }
};
template <>
struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  static __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ float2 unpack(uint32_t x) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&x));
  }
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define KILN_FLASH_SM80 1
#endif

// c += a · b for one m16n8k16 tile: a (16 x 16, row) as 4 registers of 2 elements, b (16 x 8, col)
// as 2, c (16 x 8) float32.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#ifdef KILN_FLASH_SM80
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

// Four 8x8 matrices of 16-bit elements from shared memory: lanes 8i..8i+7 give the row addresses
// of matrix i; r[i] is matrix i's fragment (lane holds row lane/4, columns 2(lane%4), +1; with
// kTrans row 2(lane%4), +1 of column lane/4).
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#ifdef KILN_FLASH_SM80
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}

// 2^x in one MUFU.EX2 (PTX "ex2.approx.ftz.f32": max relative error 2^-22, -inf -> +0; results
// below 2^-126 flush to 0, far under what P keeps once rounded to fp16 / bf16 or summed into l).
__device__ __forceinline__ float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// 16 bytes global -> shared, asynchronously; `valid` false writes zeros (no global read).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
#ifdef KILN_FLASH_SM80
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#ifdef KILN_FLASH_SM80
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#ifdef KILN_FLASH_SM80
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// Rows [row0, row0 + kRows) of a [rows, D] matrix (row stride `stride` elements) into
// tile[kRows][D + 8] by kThreads threads; rows at or past `rows` become zeros (a partial tile).
template <typename T, int D, int kRows, int kThreads>
__device__ __forceinline__ void load_tile(T (*tile)[D + 8], const T* src, int64_t stride, int64_t row0, int64_t rows) {
  constexpr int kChunks = D / 8;  // 16-byte pieces per row
#pragma unroll
  for (int c = threadIdx.x; c < kRows * kChunks; c += kThreads) {
    const int r = c / kChunks, col = (c % kChunks) * 8;
    const bool valid = row0 + r < rows;
    cp_async_16(&tile[r][col], valid ? src + (row0 + r) * stride + col : src, valid);
  }
}

// Shared memory of one block: the Q tile (later the O staging), then K stages 0, 1 and V stages
// 0, 1, each row padded by 8 elements (rows 16 bytes apart mod 128: ldmatrix's 8 row addresses and
// the fragment stores of O fall in distinct banks). Bytes.
template <typename T, int D, int kWarps>
constexpr int smem_bytes() {
  return (16 * kWarps + 4 * kBlockK) * (D + 8) * static_cast<int>(sizeof(T));
}

// kMask: the mask kind as a compile-time constant (AttentionMask::kNone / kAdditive / kKeep), so
// mask-free attention has no mask code at all.
// Blocks per SM the register budget is fitted to (65536 registers a SM): D = 64 with 4 warps at
// <= 168 registers a thread (3 blocks), with 8 warps at <= 128 without a mask (2 blocks; the
// masked variants would spill there, so they take one block of up to 255); D = 128 at <= 255.
template <int D, int kWarps, AttentionMask kMask>
constexpr int min_blocks() {
  return D == 64 ? (kWarps == 4 ? 3 : (kMask == AttentionMask::kNone ? 2 : 1)) : (kWarps == 4 ? 2 : 1);
}

template <typename T, int D, AttentionMask kMask, int kWarps>
__global__ void __launch_bounds__(kWarps * 32, min_blocks<D, kWarps, kMask>()) flash_attention_kernel(FlashAttentionParams p) {
#ifdef KILN_FLASH_SM80
  constexpr int kBlockQ = 16 * kWarps, kThreads = kWarps * 32, kRow = D + 8;
  extern __shared__ __align__(16) unsigned char smem[];
  T(*qs)[kRow] = reinterpret_cast<T(*)[kRow]>(smem);
  T(*kvs)[kBlockK][kRow] = reinterpret_cast<T(*)[kBlockK][kRow]>(smem + kBlockQ * kRow * sizeof(T));  // K0 K1 V0 V1

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;  // fragment row group and column pair
  const int64_t qtiles = (p.sq + kBlockQ - 1) / kBlockQ;
  const int64_t bh = blockIdx.x / qtiles, q0 = (blockIdx.x % qtiles) * kBlockQ;
  const int64_t b = bh / p.hq, h = bh % p.hq, hk = h / (p.hq / p.hkv);
  const T* q = static_cast<const T*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1];
  const T* k = static_cast<const T*>(p.k) + b * p.k_stride[0] + hk * p.k_stride[1];
  const T* v = static_cast<const T*>(p.v) + b * p.v_stride[0] + hk * p.v_stride[1];
  T* o = static_cast<T*>(p.o) + b * p.o_stride[0] + h * p.o_stride[1];
  const int64_t row_base = bh * p.sq;  // row index over [*, Hq, Sq]

  // Keys past the causal bound of the block's last row are never read.
  const int64_t q_last = (q0 + kBlockQ < p.sq ? q0 + kBlockQ : p.sq) - 1;
  int64_t kv_end = p.sk;
  if (p.rows.causal && q_last + p.sk - p.sq + 1 < kv_end) kv_end = q_last + p.sk - p.sq + 1;
  const int64_t ntiles = kv_end > 0 ? (kv_end + kBlockK - 1) / kBlockK : 0;

  // This warp's rows: the keys any of them sees end at warp_kv_end (the causal bound grows with
  // the row, so the warp's last valid row has the largest); 0 when every row is past Sq.
  const int64_t wrow0 = q0 + warp * 16;
  int64_t warp_kv_end = 0;
  if (wrow0 < p.sq) {
    const int64_t wlast = (wrow0 + 16 < p.sq ? wrow0 + 16 : p.sq) - 1;
    const int64_t lim = attention_key_limit(p.rows, row_base + wlast) + 1;
    warp_kv_end = lim < kv_end ? lim : kv_end;
  }

  // This thread's two rows (fragment rows g and g + 8 of the warp's 16).
  int64_t row_i[2], limit[2], moff[2];
  bool mpair[2];  // the row's mask pairs (keys 2t, 2t + 1) load as one aligned 32-bit word
  const T* mask = static_cast<const T*>(p.mask);
  const int64_t mks = p.rows.mask_key_stride;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_i[r] = wrow0 + g + r * 8;
    const int64_t row = row_base + (row_i[r] < p.sq ? row_i[r] : p.sq - 1);
    limit[r] = attention_key_limit(p.rows, row);
    if (limit[r] > p.sk - 1) limit[r] = p.sk - 1;
    moff[r] = kMask == AttentionMask::kNone ? 0 : attention_mask_row_offset(p.rows, row);
    mpair[r] = kMask != AttentionMask::kNone && mks == 1 && (reinterpret_cast<uintptr_t>(mask + moff[r]) & 3) == 0;
  }
  const float scale_log2 = p.scale * kLog2e;

  // Q, K0 and V0 in flight together (one group).
  load_tile<T, D, kBlockQ, kThreads>(qs, q, p.q_stride[2], q0, p.sq);
  if (ntiles > 0) {
    load_tile<T, D, kBlockK, kThreads>(kvs[0], k, p.k_stride[2], 0, p.sk);
    load_tile<T, D, kBlockK, kThreads>(kvs[2], v, p.v_stride[2], 0, p.sk);
  }
  cp_async_commit();

  uint32_t qf[D / 16][4];
  float acc[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // l: this thread's part of the row sum

  for (int64_t tile = 0; tile < ntiles; ++tile) {
    const int st = static_cast<int>(tile & 1);
    const int64_t kv0 = tile * kBlockK;
    // The next tile's K and V go to the other stage (freed by the barrier ending tile - 1).
    if (tile + 1 < ntiles) {
      load_tile<T, D, kBlockK, kThreads>(kvs[st ^ 1], k, p.k_stride[2], kv0 + kBlockK, p.sk);
      load_tile<T, D, kBlockK, kThreads>(kvs[2 + (st ^ 1)], v, p.v_stride[2], kv0 + kBlockK, p.sk);
    }
    cp_async_commit();
    cp_async_wait<1>();  // everything but the group just committed: this tile (and Q)
    __syncthreads();
    if (tile == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const FlashTileRowCol a = flash_q_fragment_row(lane, warp, kk);
        ldmatrix_x4<false>(qf[kk], &qs[a.row][a.col]);
      }
    }
    // 16-key groups of this tile that hold a key visible to one of the warp's rows (warp-uniform).
    const int64_t wkeys = warp_kv_end - kv0;
    const int nk16 = wkeys <= 0 ? 0 : (wkeys >= kBlockK ? kBlockK / 16 : static_cast<int>((wkeys + 15) / 16));
    if (nk16 > 0) {
      const T(*ks)[kRow] = kvs[st];
      const T(*vs)[kRow] = kvs[2 + st];
      // In-tile key indices are 32-bit: the last visible key of each row relative to kv0,
      // clamped into [-1, kBlockK - 1].
      int last[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int64_t lim = limit[r] - kv0;
        last[r] = static_cast<int>(lim < -1 ? -1 : (lim > kBlockK - 1 ? kBlockK - 1 : lim));
      }
      // The mask values of this thread's 32 scores as raw 16-bit pairs (keys 2t, 2t + 1 of n-block n,
      // row g + 8r; 0 = excluded key, not read), issued before the products so their latency hides
      // behind them.
      uint32_t mw[kBlockK / 8][2];
      if constexpr (kMask != AttentionMask::kNone) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const uint16_t* mrow = reinterpret_cast<const uint16_t*>(mask + moff[r] + kv0 * mks);
#pragma unroll
          for (int n = 0; n < kBlockK / 8; ++n) {
            const int j = n * 8 + 2 * t;
            if (mpair[r] && j + 1 <= last[r]) {
              mw[n][r] = __ldg(reinterpret_cast<const unsigned int*>(mrow + j));
            } else {
              const uint32_t lo = j <= last[r] ? __ldg(mrow + j * mks) : 0u;
              const uint32_t hi = j + 1 <= last[r] ? __ldg(mrow + (j + 1) * mks) : 0u;
              mw[n][r] = lo | (hi << 16);
            }
          }
        }
      }

      // S = Q Kᵀ: 8 n-blocks of 8 keys; ldmatrix of K rows (keys) gives B fragments directly.
      float s[kBlockK / 8][4];
#pragma unroll
      for (int n = 0; n < kBlockK / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
        for (int np = 0; np < kBlockK / 16; ++np) {
          if (np < nk16) {
            uint32_t bf[4];
            const FlashTileRowCol a = flash_k_fragment_row(lane, np, kk);
            ldmatrix_x4<false>(bf, &ks[a.row][a.col]);
            mma_16816<T>(s[2 * np], qf[kk], bf[0], bf[1]);
            mma_16816<T>(s[2 * np + 1], qf[kk], bf[2], bf[3]);
          }
        }
      }

      // Online softmax over this tile's keys; s[n][e] is row g + 8 (e / 2), key kv0 + 8n + 2t + e % 2.
      float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int n = 0; n < kBlockK / 8; ++n) {
        float2 mf[2] = {};
        if constexpr (kMask != AttentionMask::kNone) mf[0] = Elem<T>::unpack(mw[n][0]), mf[1] = Elem<T>::unpack(mw[n][1]);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1;
          const int j = n * 8 + 2 * t + (e & 1);
          const float mval = (e & 1) ? mf[r].y : mf[r].x;
          float x = s[n][e] * scale_log2;
          if constexpr (kMask == AttentionMask::kAdditive) x = fmaf(mval, kLog2e, x);
          if constexpr (kMask == AttentionMask::kKeep) {
            if (mval == 0.f) x = -INFINITY;
          }
          if (j > last[r]) x = -INFINITY;
          s[n][e] = x;
          tmax[r] = fmaxf(tmax[r], x);
        }
      }
      float corr[2], base[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {  // the 4 threads of a quad hold one row
        tmax[r] = fmaxf(tmax[r], __shfl_xor_sync(0xffffffffu, tmax[r], 1));
        tmax[r] = fmaxf(tmax[r], __shfl_xor_sync(0xffffffffu, tmax[r], 2));
        const float mn = fmaxf(m[r], tmax[r]);
        base[r] = mn == -INFINITY ? 0.f : mn;  // all excluded so far: 2^(-inf - 0) = 0, no NaN
        corr[r] = exp2_fast(m[r] - base[r]);
        m[r] = mn;
        l[r] *= corr[r];
      }
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        acc[n][0] *= corr[0];
        acc[n][1] *= corr[0];
        acc[n][2] *= corr[1];
        acc[n][3] *= corr[1];
      }
      // P as A fragments of P V (16 keys per k-step: n-blocks 2ks and 2ks + 1).
      uint32_t pf[kBlockK / 16][4];
#pragma unroll
      for (int n = 0; n < kBlockK / 8; ++n) {
        const float p0 = exp2_fast(s[n][0] - base[0]), p1 = exp2_fast(s[n][1] - base[0]);
        const float p2 = exp2_fast(s[n][2] - base[1]), p3 = exp2_fast(s[n][3] - base[1]);
        l[0] += p0 + p1;
        l[1] += p2 + p3;
        pf[n >> 1][(n & 1) * 2 + 0] = Elem<T>::pack(p0, p1);  // a0 / a2: row g
        pf[n >> 1][(n & 1) * 2 + 1] = Elem<T>::pack(p2, p3);  // a1 / a3: row g + 8
      }

      // O += P V: ldmatrix.trans of V rows (keys) gives B fragments; groups past nk16 have P = 0.
#pragma unroll
      for (int ks2 = 0; ks2 < kBlockK / 16; ++ks2) {
        if (ks2 < nk16) {
#pragma unroll
          for (int np = 0; np < D / 16; ++np) {
            uint32_t bf[4];
            const FlashTileRowCol a = flash_v_fragment_row(lane, ks2, np);
            ldmatrix_x4<true>(bf, &vs[a.row][a.col]);
            mma_16816<T>(acc[2 * np], pf[ks2], bf[0], bf[1]);
            mma_16816<T>(acc[2 * np + 1], pf[ks2], bf[2], bf[3]);
          }
        }
      }
    }
    __syncthreads();  // stage st is free for tile + 2
  }
  cp_async_wait<0>();
  __syncthreads();  // with no key tile, Q's copy (by every thread) ends here, before qs takes O

  if (wrow0 >= p.sq) return;
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    inv[r] = l[r] > 0.f ? 1.f / l[r] : 0.f;  // every key excluded: zeros (docs/decisions/0006)
  }
  // O through the warp's own 16 rows of qs (only this warp ever read them), then 16-byte stores.
  T(*os)[kRow] = qs + warp * 16;
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<uint32_t*>(&os[g + 8 * r][n * 8 + 2 * t]) =
          Elem<T>::pack(acc[n][2 * r] * inv[r], acc[n][2 * r + 1] * inv[r]);
  __syncwarp();
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int c = lane; c < 16 * kChunks; c += 32) {
    const int rr = c / kChunks, col = (c % kChunks) * 8;
    if (wrow0 + rr < p.sq)
      *reinterpret_cast<uint4*>(o + (wrow0 + rr) * p.o_stride[2] + col) = *reinterpret_cast<const uint4*>(&os[rr][col]);
  }
#else
  __trap();  // the layer offers this tactic on sm_80 and newer only
#endif
}

template <typename T, int D, int kWarps>
cudaError_t launch(const FlashAttentionParams& p, cudaStream_t stream) {
  constexpr int kBlockQ = 16 * kWarps;
  constexpr int smem = smem_bytes<T, D, kWarps>();
  const int64_t blocks = p.batch * p.hq * ((p.sq + kBlockQ - 1) / kBlockQ);
  void (*kernel)(FlashAttentionParams) = p.rows.mask == AttentionMask::kAdditive ? flash_attention_kernel<T, D, AttentionMask::kAdditive, kWarps>
                                         : p.rows.mask == AttentionMask::kKeep   ? flash_attention_kernel<T, D, AttentionMask::kKeep, kWarps>
                                                                                 : flash_attention_kernel<T, D, AttentionMask::kNone, kWarps>;
  // Above the 48 KiB default a kernel must opt in (CUDA C++ Programming Guide, "Shared Memory",
  // compute capability 8.x / 9.x); a host call, legal during stream capture.
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
  }
  kernel<<<static_cast<unsigned>(blocks), kWarps * 32, smem, stream>>>(p);
  return cudaGetLastError();
}

template <typename T, int D>
cudaError_t launch_rows(const FlashAttentionParams& p, cudaStream_t stream) {
  return flash_attention_block_rows(p) == 128 ? launch<T, D, 8>(p, stream) : launch<T, D, 4>(p, stream);
}

}  // namespace

int flash_attention_block_rows(const FlashAttentionParams& p) {
  if (p.block_rows == 64 || p.block_rows == 128) return p.block_rows;
  return 64;
}

bool flash_attention_supported(StorageType t, int64_t d, int64_t dv, int64_t batch, int64_t hq, int64_t sq) {
  if (t != StorageType::kF16 && t != StorageType::kBF16) return false;
  if (d != dv || (d != 64 && d != 128)) return false;
  const int64_t qtiles = (sq + 63) / 64;  // the smallest block (64 rows) gives the most blocks
  return batch >= 0 && hq >= 0 && (qtiles == 0 || batch * hq <= INT32_MAX / qtiles);
}

cudaError_t launch_flash_attention(const FlashAttentionParams& p, StorageType t, cudaStream_t stream) {
  if (!flash_attention_supported(t, p.head_dim, p.head_dim, p.batch, p.hq, p.sq) || (p.hkv > 0 && p.hq % p.hkv != 0))
    return cudaErrorInvalidValue;
  if (p.block_rows != 0 && p.block_rows != 64 && p.block_rows != 128) return cudaErrorInvalidValue;
  if (p.batch == 0 || p.hq == 0 || p.sq == 0) return cudaSuccess;  // empty output
  if (p.hkv == 0) return cudaErrorInvalidValue;
  if (reinterpret_cast<uintptr_t>(p.o) % 16 != 0 || p.o_stride[2] % 8 != 0) return cudaErrorInvalidValue;  // 16-byte O rows
  if (t == StorageType::kF16)
    return p.head_dim == 64 ? launch_rows<__half, 64>(p, stream) : launch_rows<__half, 128>(p, stream);
  return p.head_dim == 64 ? launch_rows<__nv_bfloat16, 64>(p, stream) : launch_rows<__nv_bfloat16, 128>(p, stream);
}

}  // namespace kiln::cuda
