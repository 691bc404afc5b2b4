// Kiln's own CUDA kernels for LayerNorm, reductions, strided copies, Gather, Pad, Resize, Where
// and fp16 rounding. Formulas follow the ONNX operator definitions named in kernels_more.h and
// match the CPU reference kernels (src/backends/cpu/ops_nn_norm.cc, ops_reduce.cc,
// ops_movement_*.cc). Storage float/__half/__nv_bfloat16, math float; grid-stride loops over
// 64-bit indices throughout.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "backends/cuda/kernels_more.h"
#include "backends/cuda/launch_config.cuh"
#include "backends/cuda/storage_access.cuh"

namespace kiln::cuda {
namespace {

// ---------------------------------------------------------------- strided copy
// Idx: uint32_t when every source and destination offset is below 2^31 (32-bit division per dim
// per element is several times cheaper than 64-bit).
template <typename T, typename Idx>
__global__ void strided_copy_kernel(const T* __restrict__ src, T* __restrict__ dst, StridedDesc d, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Idx rem = static_cast<Idx>(i), off = static_cast<Idx>(d.src_offset);
    for (int k = d.rank - 1; k >= 0; --k) {
      const Idx dim = static_cast<Idx>(d.out_dims[k]);
      const Idx c = rem % dim;
      rem /= dim;
      off += c * static_cast<Idx>(d.src_strides[k]);
    }
    dst[i] = src[off];
  }
}

// The 32-bit form with the dims as FastDivmods (a multiply-high per dim per element instead of a
// division; docs/decisions/0082), the source offset and strides as uint32 (every offset < 2^31).
struct FastStridedDesc {
  int rank = 0;
  uint32_t src_offset = 0;
  FastDivmod dims[kMaxRank];
  int32_t src_strides[kMaxRank] = {};  // may be negative (Slice with negative steps)
};

template <typename T>
__global__ void strided_copy_fast_kernel(const T* __restrict__ src, T* __restrict__ dst, FastStridedDesc d, uint32_t total) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    uint32_t rem = i;
    int32_t off = static_cast<int32_t>(d.src_offset);
    for (int k = d.rank - 1; k >= 0; --k) {
      uint32_t q, c;
      d.dims[k].divmod(rem, q, c);
      rem = q;
      off += static_cast<int32_t>(c) * d.src_strides[k];
    }
    dst[i] = src[off];
  }
}

template <typename T>
void strided_copy_as(const void* src, void* dst, const StridedDesc& d, int64_t total, int64_t src_span, cudaStream_t stream) {
  const unsigned g = blocks_for(total);
  if (total < (int64_t{1} << 31) && src_span < (int64_t{1} << 31) && d.src_offset >= 0) {
    FastStridedDesc f;
    f.rank = d.rank;
    f.src_offset = static_cast<uint32_t>(d.src_offset);
    for (int k = 0; k < d.rank; ++k) {
      f.dims[k] = FastDivmod(static_cast<uint32_t>(d.out_dims[k]));
      f.src_strides[k] = static_cast<int32_t>(d.src_strides[k]);
    }
    strided_copy_fast_kernel<T><<<g, kThreads, 0, stream>>>(static_cast<const T*>(src), static_cast<T*>(dst), f,
                                                            static_cast<uint32_t>(total));
  } else {
    strided_copy_kernel<T, int64_t><<<g, kThreads, 0, stream>>>(static_cast<const T*>(src), static_cast<T*>(dst), d, total);
  }
}

// ---------------------------------------------------------------- compact rows
// The dense output seen as one flat array of rows * dst_cols elements, cut into 16-byte groups of
// E = 16 / sizeof(T) elements: each thread gathers one group from the padded source (element loads,
// coalesced across the warp) and writes it with one aligned 16-byte store. One division per group;
// a group that crosses a row end steps to the next source row.
template <typename T, bool kAligned>
__global__ void compact_rows_kernel(const T* __restrict__ src, T* __restrict__ dst, int64_t total, int64_t src_cols,
                                    int64_t dst_cols) {
  constexpr int E = 16 / sizeof(T);
  const int64_t groups = (total + E - 1) / E;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t f = g * E;
    int64_t r = f / dst_cols, c = f - r * dst_cols;
    if (kAligned && f + E <= total) {
      uint4 v;
      T* e = reinterpret_cast<T*>(&v);
#pragma unroll
      for (int j = 0; j < E; ++j) {
        e[j] = src[r * src_cols + c];
        if (++c == dst_cols) { c = 0; ++r; }
      }
      *reinterpret_cast<uint4*>(dst + f) = v;
    } else {  // this group's elements only (the last, partial group, or an unaligned dst)
      for (int64_t i = f, end = f + E < total ? f + E : total; i < end; ++i) {
        dst[i] = src[r * src_cols + c];
        if (++c == dst_cols) { c = 0; ++r; }
      }
    }
  }
}

// The same compaction into float32 from a 16-bit source (T = __half or __nv_bfloat16): groups of 4
// outputs, one 16-byte store each where dst is aligned. The padded 16-bit GEMM output of a graph
// output declared float32 becomes the dense float32 output in one pass (docs/decisions/0083).
template <typename T, bool kAligned>
__global__ void compact_rows_f32_kernel(const T* __restrict__ src, float* __restrict__ dst, int64_t total,
                                        int64_t src_cols, int64_t dst_cols) {
  const int64_t groups = (total + 3) / 4;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t f = g * 4;
    int64_t r = f / dst_cols, c = f - r * dst_cols;
    if (kAligned && f + 4 <= total) {
      float4 v;
      float* e = &v.x;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        e[j] = static_cast<float>(src[r * src_cols + c]);
        if (++c == dst_cols) { c = 0; ++r; }
      }
      *reinterpret_cast<float4*>(dst + f) = v;
    } else {
      for (int64_t i = f, end = f + 4 < total ? f + 4 : total; i < end; ++i) {
        dst[i] = static_cast<float>(src[r * src_cols + c]);
        if (++c == dst_cols) { c = 0; ++r; }
      }
    }
  }
}

// A transpose whose output's innermost dim is strided in the source while another output dim `q`
// is the source's contiguous one (K^T, [B, H, S, D] -> [B, H, D, S], ...): 32 x 32 tiles through
// shared memory, so both the reads (along q) and the writes (along the innermost dim) are
// coalesced. blockIdx.z walks the other dims (their offsets computed once per block).
struct TileDesc {
  int rank = 0;
  int q = 0;                          // output dim contiguous in the source
  int64_t dims[kMaxRank] = {};        // output dims
  int64_t src[kMaxRank] = {};         // source strides per output dim
  int64_t dst[kMaxRank] = {};         // output (contiguous) strides
  int64_t src_offset = 0;
  int64_t batches = 1;                // product of the dims other than q and rank-1
};

template <typename T>
__global__ void tiled_transpose_kernel(const T* __restrict__ src, T* __restrict__ dst, TileDesc d) {
  __shared__ T tile[32][33];
  const int r = d.rank;
  const int64_t na = d.dims[d.q], nb = d.dims[r - 1];
  const int64_t a0 = static_cast<int64_t>(blockIdx.y) * 32, b0 = static_cast<int64_t>(blockIdx.x) * 32;
  for (int64_t z = blockIdx.z; z < d.batches; z += gridDim.z) {
    int64_t rem = z, so = d.src_offset, dof = 0;
    for (int k = r - 2; k >= 0; --k) {
      if (k == d.q) continue;
      const int64_t c = rem % d.dims[k];
      rem /= d.dims[k];
      so += c * d.src[k];
      dof += c * d.dst[k];
    }
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
      const int64_t a = a0 + threadIdx.x, b = b0 + i;
      if (a < na && b < nb) tile[i][threadIdx.x] = src[so + a * d.src[d.q] + b * d.src[r - 1]];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
      const int64_t a = a0 + i, b = b0 + threadIdx.x;
      if (a < na && b < nb) dst[dof + a * d.dst[d.q] + b] = tile[threadIdx.x][i];
    }
    __syncthreads();
  }
}

// ---------------------------------------------------------------- LayerNorm
// One block of 256 threads per row; two passes over the row (mean, then centered variance) so
// large means do not cancel; block reduction through shared memory.
__device__ float block_sum(float v, float* shm) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // shm may still be read from a previous call
  if (lane == 0) shm[warp] = v;
  __syncthreads();
  float s = 0.f;
  const int nw = blockDim.x >> 5;
  for (int w = 0; w < nw; ++w) s += shm[w];
  return s;
}

__global__ void layernorm_kernel(const void* x, const void* scale, const void* bias, void* y, StorageType t, int64_t rows,
                                 int64_t cols, float eps) {
  __shared__ float shm[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * cols;
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += load(x, base + c, t);
    const float mean = block_sum(s, shm) / static_cast<float>(cols);
    float q = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float d = load(x, base + c, t) - mean;
      q += d * d;
    }
    const float var = block_sum(q, shm) / static_cast<float>(cols);
    const float inv = rsqrtf(var + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float v = (load(x, base + c, t) - mean) * inv * load(scale, c, t);
      if (bias) v += load(bias, c, t);
      store(y, base + c, v, t);
    }
  }
}

// Rows of a multiple of 8 elements, at most kWarpRowMax: one warp per row, 8 elements per 16-byte
// load (fp16/bf16) or two float4 (fp32), the row kept in registers for the two passes (mean,
// centered variance) — each element read from memory once. Element k * 256 + lane * 8 + j is
// lane `lane`'s vector k (the last vector of a row that is not a multiple of 256 is masked off
// on the lanes past its end). Scale and bias are loaded (raw, 16 bytes each) together with the
// row, before the reductions, so their latency overlaps the row's instead of following the
// shuffles (docs/decisions/0082). Warp shuffles replace the block's shared-memory reductions. The
// same formula as layernorm_kernel; the sums run in another order (float rounding differs in the
// last bits).
constexpr int kWarpRowMax = 2048;  // elements of a row one warp keeps in registers (up to 64 per lane)

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The 16 * sizeof(T) / 2 bytes of 8 elements of T, as loaded (converted to float later).
template <typename T>
struct Raw8 {
  uint4 u[sizeof(T) / 2];
};
template <typename T>
__device__ __forceinline__ Raw8<T> raw8(const void* p, int64_t i) {
  Raw8<T> r;
  const uint4* q = reinterpret_cast<const uint4*>(static_cast<const T*>(p) + i);
#pragma unroll
  for (int k = 0; k < static_cast<int>(sizeof(T) / 2); ++k) r.u[k] = q[k];
  return r;
}

// N = ceil(cols / 256) vectors of 8 per lane, a compile-time count so the row stays in registers.
// The row is held as loaded (raw 16-byte vectors: 4 registers per 8 halves) and converted to
// float on each pass, which halves the registers an fp16 / bf16 row takes. Scale / bias raw in
// registers beside it where that still fits 4 blocks of 256 threads per SM (64 registers: fp16 /
// bf16 rows up to 768, fp32 up to 256 — BERT's, GPT-2's and ViT's 768 among them, whose 4096 -
// 6304 rows then run in one or two resident waves); wider rows load them after the reductions.
template <typename T, int N>
constexpr bool kLnPreload = N * sizeof(T) <= 6;

template <typename T, int N>
__global__ void __launch_bounds__(256, kLnPreload<T, N> ? 4 : 1) layernorm_warp_kernel(
    const void* x, const void* scale, const void* bias, void* y, int64_t rows, int64_t cols, float eps) {
  constexpr bool kPreload = kLnPreload<T, N>;
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
    const int64_t base = r * cols;
    Raw8<T> xraw[N];
    Raw8<T> graw[kPreload ? N : 1], braw[kPreload ? N : 1];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int64_t c = k * 256 + lane * 8;
      if (c < cols) {
        xraw[k] = raw8<T>(x, base + c);
        if (kPreload) {
          graw[kPreload ? k : 0] = raw8<T>(scale, c);
          if (bias) braw[kPreload ? k : 0] = raw8<T>(bias, c);
        }
      }
    }
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < N; ++k)
      if (k * 256 + lane * 8 < cols) {
        float v[8];
        Vec8<T>::ld(&xraw[k], 0, v);
#pragma unroll
        for (int j = 0; j < 8; ++j) s += v[j];
      }
    const float mean = warp_sum(s) / static_cast<float>(cols);
    float q = 0.f;
#pragma unroll
    for (int k = 0; k < N; ++k)
      if (k * 256 + lane * 8 < cols) {
        float v[8];
        Vec8<T>::ld(&xraw[k], 0, v);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float d = v[j] - mean;
          q += d * d;
        }
      }
    const float inv = rsqrtf(warp_sum(q) / static_cast<float>(cols) + eps);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int64_t c = k * 256 + lane * 8;
      if (c >= cols) continue;
      float v[8], g[8], b[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}, o[8];
      Vec8<T>::ld(&xraw[k], 0, v);
      if (kPreload) {
        Vec8<T>::ld(&graw[kPreload ? k : 0], 0, g);
        if (bias) Vec8<T>::ld(&braw[kPreload ? k : 0], 0, b);
      } else {
        Vec8<T>::ld(scale, c, g);
        if (bias) Vec8<T>::ld(bias, c, b);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) o[j] = (v[j] - mean) * inv * g[j] + b[j];
      Vec8<T>::st(y, base + c, o);
    }
  }
}

template <typename T>
void launch_layernorm_warp(const void* x, const void* scale, const void* bias, void* y, int64_t rows, int64_t cols,
                           float eps, unsigned g, cudaStream_t stream) {
  switch ((cols + 255) / 256) {
    case 1: layernorm_warp_kernel<T, 1><<<g, kThreads, 0, stream>>>(x, scale, bias, y, rows, cols, eps); break;
    case 2: layernorm_warp_kernel<T, 2><<<g, kThreads, 0, stream>>>(x, scale, bias, y, rows, cols, eps); break;
    case 3: layernorm_warp_kernel<T, 3><<<g, kThreads, 0, stream>>>(x, scale, bias, y, rows, cols, eps); break;
    case 4: layernorm_warp_kernel<T, 4><<<g, kThreads, 0, stream>>>(x, scale, bias, y, rows, cols, eps); break;
    case 5: case 6: layernorm_warp_kernel<T, 6><<<g, kThreads, 0, stream>>>(x, scale, bias, y, rows, cols, eps); break;
    default: layernorm_warp_kernel<T, 8><<<g, kThreads, 0, stream>>>(x, scale, bias, y, rows, cols, eps); break;
  }
}

// ---------------------------------------------------------------- reductions
__device__ __forceinline__ float red_init(ReduceKind k) {
  switch (k) {
    case ReduceKind::kMax: return -INFINITY;
    case ReduceKind::kMin: return INFINITY;
    case ReduceKind::kProd: return 1.f;
    default: return 0.f;
  }
}
// The element as the reduction folds it (|x| for L1, x^2 for L2 / SumSquare).
__device__ __forceinline__ float red_pre(ReduceKind k, float x) {
  switch (k) {
    case ReduceKind::kL1: return fabsf(x);
    case ReduceKind::kL2: case ReduceKind::kSumSquare: return x * x;
    default: return x;
  }
}
__device__ __forceinline__ float red_op(ReduceKind k, float a, float b) {
  switch (k) {
    // NaN propagates, as the CPU reference's ReduceMax / ReduceMin (fmaxf / fminf would drop it).
    case ReduceKind::kMax: return (a != a || b != b) ? a + b : fmaxf(a, b);
    case ReduceKind::kMin: return (a != a || b != b) ? a + b : fminf(a, b);
    case ReduceKind::kProd: return a * b;
    default: return a + b;
  }
}
// The output from the folded value over `red` elements.
__device__ __forceinline__ float red_finish(ReduceKind k, float acc, int64_t red) {
  switch (k) {
    case ReduceKind::kMean: return acc / static_cast<float>(red);
    case ReduceKind::kL2: return sqrtf(acc);
    case ReduceKind::kLogSum: return logf(acc);
    default: return acc;
  }
}
// The running maximum of LogSumExp: NaN sticks (the CPU reference's log-sum-exp is NaN then).
__device__ __forceinline__ float lse_max(float m, float x) { return (m != m || x != x) ? m + x : fmaxf(m, x); }
// log(sum(exp(x - m))) + m for a finite maximum m; an infinite or NaN m is the result itself
// (all -inf: -inf, as log(0); a +inf element: +inf).
__device__ __forceinline__ bool lse_trivial(float m) { return !(m == m) || isinf(m); }

// inner == 1: one warp per output row.
__global__ void reduce_rows_kernel(const void* x, void* y, StorageType t, ReduceKind k, int64_t outer, int64_t red) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = threadIdx.x & 31;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32; o < outer; o += warps) {
    if (k == ReduceKind::kLogSumExp) {
      float m = -INFINITY;
      for (int64_t r = lane; r < red; r += 32) m = lse_max(m, load(x, o * red + r, t));
      for (int s = 16; s > 0; s >>= 1) m = lse_max(m, __shfl_xor_sync(0xffffffffu, m, s));
      float acc = 0.f;
      if (!lse_trivial(m))
        for (int64_t r = lane; r < red; r += 32) acc += expf(load(x, o * red + r, t) - m);
      for (int s = 16; s > 0; s >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, s);
      if (lane == 0) store(y, o, lse_trivial(m) ? m : m + logf(acc), t);
      continue;
    }
    float acc = red_init(k);
    for (int64_t r = lane; r < red; r += 32) acc = red_op(k, acc, red_pre(k, load(x, o * red + r, t)));
    for (int s = 16; s > 0; s >>= 1) acc = red_op(k, acc, __shfl_xor_sync(0xffffffffu, acc, s));
    if (lane == 0) store(y, o, red_finish(k, acc, red), t);
  }
}

// General: one thread per (outer, inner) output, walking the reduced axis (coalesced over inner).
__global__ void reduce_mid_kernel(const void* x, void* y, StorageType t, ReduceKind k, int64_t outer, int64_t red,
                                  int64_t inner) {
  const int64_t total = outer * inner;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = i / inner, in = i % inner;
    if (k == ReduceKind::kLogSumExp) {
      float m = -INFINITY;
      for (int64_t r = 0; r < red; ++r) m = lse_max(m, load(x, (o * red + r) * inner + in, t));
      float acc = 0.f;
      if (!lse_trivial(m))
        for (int64_t r = 0; r < red; ++r) acc += expf(load(x, (o * red + r) * inner + in, t) - m);
      store(y, i, lse_trivial(m) ? m : m + logf(acc), t);
      continue;
    }
    float acc = red_init(k);
    for (int64_t r = 0; r < red; ++r) acc = red_op(k, acc, red_pre(k, load(x, (o * red + r) * inner + in, t)));
    store(y, i, red_finish(k, acc, red), t);
  }
}

// ---------------------------------------------------------------- Gather
template <typename T>
__global__ void gather_kernel(const T* __restrict__ x, const int64_t* __restrict__ idx, T* __restrict__ y,
                              int64_t outer, int64_t axis_dim, int64_t nidx, int64_t inner) {
  const int64_t total = outer * nidx * inner;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t in = i % inner, j = (i / inner) % nidx, o = i / (inner * nidx);
    y[i] = x[(o * axis_dim + idx[j]) * inner + in];
  }
}

// Runtime indices: normalized on the device; out of range -> zeros (launch_gather_runtime).
template <typename T, typename I>
__global__ void gather_runtime_kernel(const T* __restrict__ x, const I* __restrict__ idx, T* __restrict__ y,
                                      int64_t outer, int64_t axis_dim, int64_t nidx, int64_t inner) {
  const int64_t total = outer * nidx * inner;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t in = i % inner, j = (i / inner) % nidx, o = i / (inner * nidx);
    int64_t k = static_cast<int64_t>(idx[j]);
    if (k < 0) k += axis_dim;
    y[i] = (k >= 0 && k < axis_dim) ? x[(o * axis_dim + k) * inner + in] : T(0);
  }
}

// Runtime indices, rows of 16-byte multiples (an embedding lookup: inner = hidden size): one thread
// per 16-byte chunk of the output, chunk c of output row (o, j) copied from chunk c of source row
// (o, idx[j]) — 16 bytes per load and store instead of one element, and two FastDivmods per chunk
// instead of three 64-bit divisions per element (docs/decisions/0082). Every chunk offset is
// below 2^31 (the launcher checks). Out-of-range indices give zeros, as gather_runtime_kernel.
template <typename I>
__global__ void __launch_bounds__(256) gather_runtime_vec_kernel(const uint4* __restrict__ x, const I* __restrict__ idx,
                                                                 uint4* __restrict__ y, uint32_t total, FastDivmod inner,
                                                                 FastDivmod nidx, int64_t axis_dim) {
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
    uint32_t row, c, o, j;
    inner.divmod(i, row, c);
    nidx.divmod(row, o, j);
    int64_t k = static_cast<int64_t>(idx[j]);
    if (k < 0) k += axis_dim;
    y[i] = (k >= 0 && k < axis_dim) ? x[(static_cast<uint32_t>(o) * axis_dim + k) * inner.d + c] : make_uint4(0, 0, 0, 0);
  }
}

template <typename I>
cudaError_t gather_runtime_as(const void* x, const I* idx, void* y, int elem_bytes, int64_t outer, int64_t axis_dim,
                              int64_t nidx, int64_t inner, unsigned g, cudaStream_t stream) {
  switch (elem_bytes) {
    case 1: gather_runtime_kernel<<<g, kThreads, 0, stream>>>(static_cast<const uint8_t*>(x), idx, static_cast<uint8_t*>(y), outer, axis_dim, nidx, inner); break;
    case 2: gather_runtime_kernel<<<g, kThreads, 0, stream>>>(static_cast<const uint16_t*>(x), idx, static_cast<uint16_t*>(y), outer, axis_dim, nidx, inner); break;
    case 4: gather_runtime_kernel<<<g, kThreads, 0, stream>>>(static_cast<const uint32_t*>(x), idx, static_cast<uint32_t*>(y), outer, axis_dim, nidx, inner); break;
    case 8: gather_runtime_kernel<<<g, kThreads, 0, stream>>>(static_cast<const uint64_t*>(x), idx, static_cast<uint64_t*>(y), outer, axis_dim, nidx, inner); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

// ---------------------------------------------------------------- Pad
__device__ __forceinline__ int64_t pad_coord(int64_t c, int64_t n, PadMode m) {
  if (c >= 0 && c < n) return c;
  if (m == PadMode::kEdge) return c < 0 ? 0 : n - 1;
  if (m == PadMode::kReflect) {
    if (n == 1) return 0;
    const int64_t period = 2 * (n - 1);
    int64_t t = c % period;
    if (t < 0) t += period;
    return t < n ? t : period - t;
  }
  return -1;
}

__global__ void pad_kernel(const void* x, void* y, StorageType t, PadMode m, float value, PadDesc d, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rem = i, off = 0, stride = 1;
    bool outside = false;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t c = rem % d.out_dims[k];
      rem /= d.out_dims[k];
      const int64_t s = pad_coord(c - d.begin[k], d.in_dims[k], m);
      if (s < 0) outside = true;
      off += s * stride;
      stride *= d.in_dims[k];
    }
    store(y, i, outside ? value : load(x, off, t), t);
  }
}

// ---------------------------------------------------------------- Resize
__device__ double resize_coord(double o, double scale, double len, int64_t in, int coord) {
  switch (coord) {
    case 0: return (o + 0.5) / scale - 0.5;
    case 1: return o / scale;
    case 2: return len > 1 ? (o + 0.5) / scale - 0.5 : 0.0;
    case 3: return len == 1 ? 0.0 : o * static_cast<double>(in - 1) / (len - 1);
    default: return (o + 0.5) / scale;
  }
}
__device__ int64_t resize_nearest(double x, int mode, int64_t in) {
  int64_t i;
  if (x == floor(x)) i = static_cast<int64_t>(x);
  else if (mode == 0) i = static_cast<int64_t>(ceil(x - 0.5));
  else if (mode == 1) i = static_cast<int64_t>(floor(x + 0.5));
  else if (mode == 2) i = static_cast<int64_t>(floor(x));
  else i = static_cast<int64_t>(ceil(x));
  return i < 0 ? 0 : (i > in - 1 ? in - 1 : i);
}

__global__ void resize_kernel(const void* x, void* y, StorageType t, ResizeDesc d) {
  const int64_t total = d.nc * d.oh * d.ow;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ox = i % d.ow, oy = (i / d.ow) % d.oh, p = i / (d.ow * d.oh);
    const double fy = resize_coord(static_cast<double>(oy), d.scale_h, d.len_h, d.ih, d.coord);
    const double fx = resize_coord(static_cast<double>(ox), d.scale_w, d.len_w, d.iw, d.coord);
    const int64_t base = p * d.ih * d.iw;
    float v;
    if (!d.linear) {
      v = load(x, base + resize_nearest(fy, d.nearest, d.ih) * d.iw + resize_nearest(fx, d.nearest, d.iw), t);
    } else {
      // Two taps per axis at floor(f), floor(f) + 1 with weights 1 - r, r; indices clamped to
      // the input (the CPU reference's edge handling, exclude_outside = 0).
      const double y0 = floor(fy), x0 = floor(fx);
      const float ry = static_cast<float>(fy - y0), rx = static_cast<float>(fx - x0);
      auto cl = [](int64_t c, int64_t n) { return c < 0 ? 0 : (c > n - 1 ? n - 1 : c); };
      const int64_t ya = cl(static_cast<int64_t>(y0), d.ih), yb = cl(static_cast<int64_t>(y0) + 1, d.ih);
      const int64_t xa = cl(static_cast<int64_t>(x0), d.iw), xb = cl(static_cast<int64_t>(x0) + 1, d.iw);
      const float top = (1.f - rx) * load(x, base + ya * d.iw + xa, t) + rx * load(x, base + ya * d.iw + xb, t);
      const float bot = (1.f - rx) * load(x, base + yb * d.iw + xa, t) + rx * load(x, base + yb * d.iw + xb, t);
      v = (1.f - ry) * top + ry * bot;
    }
    store(y, i, v, t);
  }
}

// ---------------------------------------------------------------- Where, rounding
struct Strides3 {
  int64_t c[kMaxRank];
};

__global__ void where_kernel(const void* c, const void* a, const void* b, void* y, StorageType t, BroadcastDesc d,
                             Strides3 cs, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rem = i, ia = 0, ib = 0, ic = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t q = rem % d.out_dims[k];
      rem /= d.out_dims[k];
      ia += q * d.a_strides[k];
      ib += q * d.b_strides[k];
      ic += q * cs.c[k];
    }
    store(y, i, load(c, ic, t) != 0.f ? load(a, ia, t) : load(b, ib, t), t);
  }
}

__global__ void round_half_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = __half2float(__float2half_rn(x[i]));
}

}  // namespace

// Copies wider elements where the layout allows: when the innermost output dim is contiguous in
// the source (stride 1) and its run, every other stride, the source offset and both pointers are
// multiples of a 16- / 8- / 4-byte vector, each thread moves one vector (a head transpose
// [B, S, H, D] -> [B, H, S, D] moves D-element rows). The bytes copied are the same.
StridedDesc widen(const StridedDesc& d, int elem_bytes, int vec_bytes, const void* src, const void* dst, bool* ok) {
  *ok = false;
  StridedDesc w = d;
  const int r = d.rank;
  if (r < 1 || vec_bytes <= elem_bytes || vec_bytes % elem_bytes) return w;
  const int64_t f = vec_bytes / elem_bytes;
  if (d.src_strides[r - 1] != 1 || d.out_dims[r - 1] % f || d.src_offset % f) return w;
  if (reinterpret_cast<uintptr_t>(src) % vec_bytes || reinterpret_cast<uintptr_t>(dst) % vec_bytes) return w;
  for (int k = 0; k + 1 < r; ++k)
    if (d.out_dims[k] != 1 && d.src_strides[k] % f) return w;
  w.out_dims[r - 1] /= f;
  for (int k = 0; k + 1 < r; ++k) w.src_strides[k] = d.out_dims[k] == 1 ? 0 : d.src_strides[k] / f;
  w.src_offset /= f;
  *ok = true;
  return w;
}

cudaError_t launch_compact_rows(const void* src, void* dst, int elem_bytes, int64_t rows, int64_t src_cols,
                                int64_t dst_cols, cudaStream_t stream) {
  if (rows == 0 || dst_cols == 0) return cudaSuccess;
  if ((elem_bytes != 2 && elem_bytes != 4) || src_cols < dst_cols) return cudaErrorInvalidValue;
  const int64_t total = rows * dst_cols;
  const unsigned g = blocks_for((total * elem_bytes + 15) / 16);
  const bool aligned = reinterpret_cast<uintptr_t>(dst) % 16 == 0;  // else element stores only
  auto* d2 = static_cast<uint16_t*>(dst);
  auto* d4 = static_cast<uint32_t*>(dst);
  const auto* s2 = static_cast<const uint16_t*>(src);
  const auto* s4 = static_cast<const uint32_t*>(src);
  if (elem_bytes == 2 && aligned) compact_rows_kernel<uint16_t, true><<<g, kThreads, 0, stream>>>(s2, d2, total, src_cols, dst_cols);
  else if (elem_bytes == 2) compact_rows_kernel<uint16_t, false><<<g, kThreads, 0, stream>>>(s2, d2, total, src_cols, dst_cols);
  else if (aligned) compact_rows_kernel<uint32_t, true><<<g, kThreads, 0, stream>>>(s4, d4, total, src_cols, dst_cols);
  else compact_rows_kernel<uint32_t, false><<<g, kThreads, 0, stream>>>(s4, d4, total, src_cols, dst_cols);
  return cudaGetLastError();
}

cudaError_t launch_compact_rows_to_f32(const void* src, StorageType src_t, float* dst, int64_t rows, int64_t src_cols,
                                       int64_t dst_cols, cudaStream_t stream) {
  if (rows == 0 || dst_cols == 0) return cudaSuccess;
  if ((src_t != StorageType::kF16 && src_t != StorageType::kBF16) || src_cols < dst_cols) return cudaErrorInvalidValue;
  const int64_t total = rows * dst_cols;
  const unsigned g = blocks_for((total + 3) / 4);
  const bool aligned = reinterpret_cast<uintptr_t>(dst) % 16 == 0;
  if (src_t == StorageType::kF16) {
    const auto* s = static_cast<const __half*>(src);
    if (aligned) compact_rows_f32_kernel<__half, true><<<g, kThreads, 0, stream>>>(s, dst, total, src_cols, dst_cols);
    else compact_rows_f32_kernel<__half, false><<<g, kThreads, 0, stream>>>(s, dst, total, src_cols, dst_cols);
  } else {
    const auto* s = static_cast<const __nv_bfloat16*>(src);
    if (aligned) compact_rows_f32_kernel<__nv_bfloat16, true><<<g, kThreads, 0, stream>>>(s, dst, total, src_cols, dst_cols);
    else compact_rows_f32_kernel<__nv_bfloat16, false><<<g, kThreads, 0, stream>>>(s, dst, total, src_cols, dst_cols);
  }
  return cudaGetLastError();
}

cudaError_t launch_strided_copy(const void* src, void* dst, int elem_bytes, const StridedDesc& d, cudaStream_t stream) {
  int64_t total = 1;
  for (int k = 0; k < d.rank; ++k) total *= d.out_dims[k];
  if (total == 0) return cudaSuccess;
  if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4 && elem_bytes != 8) return cudaErrorInvalidValue;
  // The largest source offset read, for the index width.
  auto span_of = [](const StridedDesc& x) {
    int64_t s = x.src_offset;
    for (int k = 0; k < x.rank; ++k) s += (x.out_dims[k] - 1) * std::max<int64_t>(x.src_strides[k], 0);
    return s + 1;
  };
  // The tiled transpose: the innermost output dim strided in the source, another one contiguous.
  if (d.rank >= 2 && d.src_strides[d.rank - 1] != 1 && d.out_dims[d.rank - 1] >= 8) {
    int q = -1;
    for (int k = d.rank - 2; k >= 0; --k)
      if (d.src_strides[k] == 1 && d.out_dims[k] >= 8) q = k;
    if (q >= 0) {
      TileDesc t;
      t.rank = d.rank;
      t.q = q;
      t.src_offset = d.src_offset;
      int64_t stride = 1;
      for (int k = d.rank - 1; k >= 0; --k) {
        t.dims[k] = d.out_dims[k];
        t.src[k] = d.src_strides[k];
        t.dst[k] = stride;
        stride *= d.out_dims[k];
        if (k != q && k != d.rank - 1) t.batches *= d.out_dims[k];
      }
      const dim3 block(32, 8);
      const dim3 grid(static_cast<unsigned>((t.dims[d.rank - 1] + 31) / 32), static_cast<unsigned>((t.dims[q] + 31) / 32),
                      static_cast<unsigned>(std::min<int64_t>(t.batches, 65535)));
      if (grid.y <= 65535) {
        switch (elem_bytes) {
          case 1: tiled_transpose_kernel<<<grid, block, 0, stream>>>(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), t); break;
          case 2: tiled_transpose_kernel<<<grid, block, 0, stream>>>(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), t); break;
          case 4: tiled_transpose_kernel<<<grid, block, 0, stream>>>(static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), t); break;
          default: tiled_transpose_kernel<<<grid, block, 0, stream>>>(static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst), t); break;
        }
        return cudaGetLastError();
      }
    }
  }
  for (int vec : {16, 8, 4}) {
    bool ok = false;
    const StridedDesc w = widen(d, elem_bytes, vec, src, dst, &ok);
    if (!ok) continue;
    const int64_t wt = total / (vec / elem_bytes);
    if (vec == 16) strided_copy_as<uint4>(src, dst, w, wt, span_of(w), stream);
    else if (vec == 8) strided_copy_as<uint2>(src, dst, w, wt, span_of(w), stream);
    else strided_copy_as<uint32_t>(src, dst, w, wt, span_of(w), stream);
    return cudaGetLastError();
  }
  const int64_t span = span_of(d);
  switch (elem_bytes) {
    case 1: strided_copy_as<uint8_t>(src, dst, d, total, span, stream); break;
    case 2: strided_copy_as<uint16_t>(src, dst, d, total, span, stream); break;
    case 4: strided_copy_as<uint32_t>(src, dst, d, total, span, stream); break;
    default: strided_copy_as<uint64_t>(src, dst, d, total, span, stream); break;
  }
  return cudaGetLastError();
}

cudaError_t launch_layernorm(const void* x, const void* scale, const void* bias, void* y, StorageType t, int64_t rows,
                             int64_t cols, float eps, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(scale) % 16 == 0 && (!bias || reinterpret_cast<uintptr_t>(bias) % 16 == 0);
  if (cols % 8 == 0 && cols <= kWarpRowMax && aligned &&
      (t == StorageType::kF16 || t == StorageType::kBF16 || t == StorageType::kF32)) {
    const int64_t blocks = (rows + kThreads / 32 - 1) / (kThreads / 32);
    const unsigned g = static_cast<unsigned>(std::min<int64_t>(blocks, 65535LL * 16));
    if (t == StorageType::kF16) launch_layernorm_warp<__half>(x, scale, bias, y, rows, cols, eps, g, stream);
    else if (t == StorageType::kBF16) launch_layernorm_warp<__nv_bfloat16>(x, scale, bias, y, rows, cols, eps, g, stream);
    else launch_layernorm_warp<float>(x, scale, bias, y, rows, cols, eps, g, stream);
    return cudaGetLastError();
  }
  const unsigned g = static_cast<unsigned>(std::min<int64_t>(rows, 65535LL * 16));
  layernorm_kernel<<<g, kThreads, 0, stream>>>(x, scale, bias, y, t, rows, cols, eps);
  return cudaGetLastError();
}

cudaError_t launch_reduce(const void* x, void* y, StorageType t, ReduceKind kind, int64_t outer, int64_t red,
                          int64_t inner, cudaStream_t stream) {
  if (outer * inner == 0) return cudaSuccess;
  if (inner == 1) {
    const int64_t blocks = (outer + kThreads / 32 - 1) / (kThreads / 32);
    const unsigned g = static_cast<unsigned>(std::min<int64_t>(blocks, 65535LL * 32));
    reduce_rows_kernel<<<g, kThreads, 0, stream>>>(x, y, t, kind, outer, red);
  } else {
    reduce_mid_kernel<<<blocks_for(outer * inner), kThreads, 0, stream>>>(x, y, t, kind, outer, red, inner);
  }
  return cudaGetLastError();
}

cudaError_t launch_gather(const void* x, const int64_t* idx, void* y, int elem_bytes, int64_t outer, int64_t axis_dim,
                          int64_t nidx, int64_t inner, cudaStream_t stream) {
  const int64_t total = outer * nidx * inner;
  if (total == 0) return cudaSuccess;
  // Rows of 16-byte multiples: the chunk kernel of launch_gather_runtime (the indices are
  // normalized and in range here, so its range check never fires).
  const int64_t row_bytes = inner * elem_bytes;
  if (row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0 &&
      outer * std::max(nidx, axis_dim) * (row_bytes / 16) < (int64_t{1} << 31) && nidx < (int64_t{1} << 31)) {
    const int64_t inner16 = row_bytes / 16, total16 = outer * nidx * inner16;
    gather_runtime_vec_kernel<<<blocks_for_sms(total16, kThreads), kThreads, 0, stream>>>(
        static_cast<const uint4*>(x), idx, static_cast<uint4*>(y), static_cast<uint32_t>(total16),
        FastDivmod(static_cast<uint32_t>(inner16)), FastDivmod(static_cast<uint32_t>(nidx)), axis_dim);
    return cudaGetLastError();
  }
  const unsigned g = blocks_for(total);
  switch (elem_bytes) {
    case 1: gather_kernel<<<g, kThreads, 0, stream>>>(static_cast<const uint8_t*>(x), idx, static_cast<uint8_t*>(y), outer, axis_dim, nidx, inner); break;
    case 2: gather_kernel<<<g, kThreads, 0, stream>>>(static_cast<const uint16_t*>(x), idx, static_cast<uint16_t*>(y), outer, axis_dim, nidx, inner); break;
    case 4: gather_kernel<<<g, kThreads, 0, stream>>>(static_cast<const uint32_t*>(x), idx, static_cast<uint32_t*>(y), outer, axis_dim, nidx, inner); break;
    case 8: gather_kernel<<<g, kThreads, 0, stream>>>(static_cast<const uint64_t*>(x), idx, static_cast<uint64_t*>(y), outer, axis_dim, nidx, inner); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_gather_runtime(const void* x, const void* idx, bool idx_64, void* y, int elem_bytes, int64_t outer,
                                  int64_t axis_dim, int64_t nidx, int64_t inner, cudaStream_t stream) {
  const int64_t total = outer * nidx * inner;
  if (total == 0) return cudaSuccess;
  // 16-byte chunks: rows of a multiple of 16 bytes, aligned pointers, chunk offsets below 2^31.
  const int64_t row_bytes = inner * elem_bytes;
  if (row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0 &&
      outer * std::max(nidx, axis_dim) * (row_bytes / 16) < (int64_t{1} << 31) && nidx < (int64_t{1} << 31)) {
    const int64_t inner16 = row_bytes / 16, total16 = outer * nidx * inner16;
    const unsigned g16 = blocks_for_sms(total16, kThreads);
    const FastDivmod fi(static_cast<uint32_t>(inner16)), fn(static_cast<uint32_t>(nidx));
    if (idx_64)
      gather_runtime_vec_kernel<<<g16, kThreads, 0, stream>>>(static_cast<const uint4*>(x), static_cast<const int64_t*>(idx),
                                                              static_cast<uint4*>(y), static_cast<uint32_t>(total16), fi,
                                                              fn, axis_dim);
    else
      gather_runtime_vec_kernel<<<g16, kThreads, 0, stream>>>(static_cast<const uint4*>(x), static_cast<const int32_t*>(idx),
                                                              static_cast<uint4*>(y), static_cast<uint32_t>(total16), fi,
                                                              fn, axis_dim);
    return cudaGetLastError();
  }
  const unsigned g = blocks_for(total);
  return idx_64 ? gather_runtime_as(x, static_cast<const int64_t*>(idx), y, elem_bytes, outer, axis_dim, nidx, inner, g, stream)
                : gather_runtime_as(x, static_cast<const int32_t*>(idx), y, elem_bytes, outer, axis_dim, nidx, inner, g, stream);
}

cudaError_t launch_pad(const void* x, void* y, StorageType t, PadMode mode, float value, const PadDesc& d,
                       cudaStream_t stream) {
  int64_t total = 1;
  for (int k = 0; k < d.rank; ++k) total *= d.out_dims[k];
  if (total == 0) return cudaSuccess;
  pad_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, t, mode, value, d, total);
  return cudaGetLastError();
}

cudaError_t launch_resize(const void* x, void* y, StorageType t, const ResizeDesc& d, cudaStream_t stream) {
  const int64_t total = d.nc * d.oh * d.ow;
  if (total == 0) return cudaSuccess;
  resize_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, y, t, d);
  return cudaGetLastError();
}

cudaError_t launch_where(const void* c, const void* a, const void* b, void* y, StorageType t, const BroadcastDesc& d,
                         const int64_t* c_strides, cudaStream_t stream) {
  int64_t total = 1;
  for (int k = 0; k < d.rank; ++k) total *= d.out_dims[k];
  if (total == 0) return cudaSuccess;
  Strides3 cs{};
  for (int k = 0; k < d.rank; ++k) cs.c[k] = c_strides[k];
  where_kernel<<<blocks_for(total), kThreads, 0, stream>>>(c, a, b, y, t, d, cs, total);
  return cudaGetLastError();
}

cudaError_t launch_round_to_half(const float* x, float* y, int64_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  round_half_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, y, count);
  return cudaGetLastError();
}

// ---------------------------------------------------------------- NLL / softmax cross-entropy
namespace {

// The loss of column i = (n, d) and its weight (0, 0 when ignored; NaN, NaN for a target out of range).
__device__ __forceinline__ void loss_column(const void* x, const int64_t* target, const void* weight, void* log_prob,
                                            StorageType t, const LossDesc& d, int64_t i, float* loss, float* w) {
  const int64_t nn = i / d.d, j = i % d.d;
  const int64_t base = nn * d.c * d.d + j;
  float shift = 0.f;
  if (d.softmax) {
    float m = -INFINITY;
    for (int64_t c = 0; c < d.c; ++c) m = fmaxf(m, load(x, base + c * d.d, t));
    float s = 0.f;
    for (int64_t c = 0; c < d.c; ++c) s += expf(load(x, base + c * d.d, t) - m);
    shift = m + logf(s);
    if (log_prob)
      for (int64_t c = 0; c < d.c; ++c) store(log_prob, base + c * d.d, load(x, base + c * d.d, t) - shift, t);
  }
  const int64_t cls = target[i];
  if (d.has_ignore && cls == d.ignore_index) {
    *loss = 0.f;
    *w = 0.f;
  } else if (cls < 0 || cls >= d.c) {
    *loss = NAN;
    *w = NAN;
  } else {
    *w = weight ? load(weight, cls, t) : 1.f;
    *loss = -(load(x, base + cls * d.d, t) - shift) * *w;
  }
}

__global__ void nll_none_kernel(const void* x, const int64_t* target, const void* weight, void* y, void* log_prob,
                                StorageType t, LossDesc d) {
  const int64_t total = d.n * d.d;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float l, w;
    loss_column(x, target, weight, log_prob, t, d, i, &l, &w);
    store(y, i, l, t);
  }
}

constexpr int kLossThreads = 1024;

// One block: every column, then a block-wide sum of the losses and the weights.
__global__ void nll_reduce_kernel(const void* x, const int64_t* target, const void* weight, void* y, void* log_prob,
                                  StorageType t, LossDesc d) {
  __shared__ float part_l[kLossThreads / 32], part_w[kLossThreads / 32];
  float sl = 0.f, sw = 0.f;
  for (int64_t i = threadIdx.x; i < d.n * d.d; i += blockDim.x) {
    float l, w;
    loss_column(x, target, weight, log_prob, t, d, i, &l, &w);
    sl += l;
    sw += w;
  }
  for (int s = 16; s > 0; s >>= 1) {
    sl += __shfl_xor_sync(0xffffffffu, sl, s);
    sw += __shfl_xor_sync(0xffffffffu, sw, s);
  }
  if ((threadIdx.x & 31) == 0) {
    part_l[threadIdx.x / 32] = sl;
    part_w[threadIdx.x / 32] = sw;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float tl = 0.f, tw = 0.f;
    for (int k = 0; k < static_cast<int>(blockDim.x / 32); ++k) {
      tl += part_l[k];
      tw += part_w[k];
    }
    store(y, 0, d.reduction == 1 ? tl : tl / tw, t);
  }
}

}  // namespace

cudaError_t launch_nll_loss(const void* x, const int64_t* target, const void* weight, void* y, void* log_prob,
                            StorageType t, const LossDesc& d, cudaStream_t stream) {
  if (d.reduction == 0) {
    if (d.n * d.d == 0) return cudaSuccess;
    nll_none_kernel<<<blocks_for(d.n * d.d), kThreads, 0, stream>>>(x, target, weight, y, log_prob, t, d);
  } else {
    nll_reduce_kernel<<<1, kLossThreads, 0, stream>>>(x, target, weight, y, log_prob, t, d);
  }
  return cudaGetLastError();
}

// ---------------------------------------------------------------- softmax / hardmax over a middle axis
namespace {

__global__ void axis_softmax_kernel(const void* x, void* y, StorageType t, int kind, int64_t outer, int64_t len,
                                    int64_t inner) {
  const int64_t total = outer * inner;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = (i / inner) * len * inner + i % inner;
    float m = -INFINITY;
    int64_t arg = 0;
    for (int64_t k = 0; k < len; ++k) {
      const float v = load(x, base + k * inner, t);
      if (v > m) {
        m = v;
        arg = k;
      }
    }
    if (kind == 2) {
      for (int64_t k = 0; k < len; ++k) store(y, base + k * inner, k == arg ? 1.f : 0.f, t);
      continue;
    }
    float sum = 0.f;
    for (int64_t k = 0; k < len; ++k) sum += expf(load(x, base + k * inner, t) - m);
    if (kind == 0) {
      const float inv = 1.f / sum;
      for (int64_t k = 0; k < len; ++k) store(y, base + k * inner, expf(load(x, base + k * inner, t) - m) * inv, t);
    } else {
      const float lse = logf(sum);
      for (int64_t k = 0; k < len; ++k) store(y, base + k * inner, load(x, base + k * inner, t) - m - lse, t);
    }
  }
}

}  // namespace

cudaError_t launch_axis_softmax(const void* x, void* y, StorageType t, int kind, int64_t outer, int64_t len,
                                int64_t inner, cudaStream_t stream) {
  if (outer * inner == 0) return cudaSuccess;
  axis_softmax_kernel<<<blocks_for(outer * inner), kThreads, 0, stream>>>(x, y, t, kind, outer, len, inner);
  return cudaGetLastError();
}

// ---------------------------------------------------------------- LayerNormalization statistics
namespace {

__global__ void row_moments_kernel(const void* x, void* mean_out, void* inv_out, StorageType t, int64_t rows,
                                   int64_t cols, float eps) {
  __shared__ float shm[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * cols;
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += load(x, base + c, t);
    const float mean = block_sum(s, shm) / static_cast<float>(cols);
    float q = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float d = load(x, base + c, t) - mean;
      q += d * d;
    }
    const float var = block_sum(q, shm) / static_cast<float>(cols);
    if (threadIdx.x == 0) {
      if (mean_out) store(mean_out, r, mean, t);
      if (inv_out) store(inv_out, r, 1.f / sqrtf(var + eps), t);
    }
  }
}

}  // namespace

cudaError_t launch_row_moments(const void* x, void* mean, void* inv_std, StorageType t, int64_t rows, int64_t cols,
                               float eps, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const unsigned g = static_cast<unsigned>(std::min<int64_t>(rows, 65535LL * 16));
  row_moments_kernel<<<g, kThreads, 0, stream>>>(x, mean, inv_std, t, rows, cols, eps);
  return cudaGetLastError();
}

// ---------------------------------------------------------------- EyeLike
namespace {

__global__ void eye_kernel(void* y, StorageType t, int64_t rows, int64_t cols, int64_t k) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store(y, i, (i % cols) - (i / cols) == k ? 1.f : 0.f, t);
}

}  // namespace

cudaError_t launch_eye(void* y, StorageType t, int64_t rows, int64_t cols, int64_t k, cudaStream_t stream) {
  if (rows * cols == 0) return cudaSuccess;
  eye_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(y, t, rows, cols, k);
  return cudaGetLastError();
}

// ---------------------------------------------------------------- fill
namespace {

__global__ void fill_kernel(void* y, StorageType t, int64_t count, float value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store(y, i, value, t);
}

}  // namespace

cudaError_t launch_fill(void* y, StorageType t, int64_t count, float value, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  fill_kernel<<<blocks_for(count), kThreads, 0, stream>>>(y, t, count, value);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
