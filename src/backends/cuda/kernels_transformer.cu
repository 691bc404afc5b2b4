// Kiln's own CUDA kernels of the internal transformer layers: RMSNormalization and the masked
// softmax of the Attention layer (between its two cuBLASLt GEMMs). Formulas and edge cases match
// the CPU reference (src/backends/cpu/ops_fused_transformer.cc); exp and sqrt are the accurate
// (not the __ intrinsic) forms so fp32 storage stays within 1e-4 of that reference.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/kernels_transformer.h"
#include "backends/cuda/storage_access.cuh"

namespace kiln::cuda {
namespace {

// Block-wide sum / max (blockDim.x a multiple of 32, at most 1024): warp shuffles, then one
// value per warp through shared memory. Every thread gets the result.
template <bool kMax>
__device__ float block_reduce(float v, float* shm) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, w) : v + w;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // shm may still be read by a previous call
  if (lane == 0) shm[warp] = v;
  __syncthreads();
  float r = shm[0];
  for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) r = kMax ? fmaxf(r, shm[w]) : r + shm[w];
  return r;
}

// Threads per block for rows of `cols` elements: a multiple of 32, at most 256.
unsigned threads_for(int64_t cols) {
  return static_cast<unsigned>(std::min<int64_t>(256, std::max<int64_t>(32, (cols + 31) / 32 * 32)));
}

unsigned grid_for(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, 65535LL * 16)); }

// ---------------------------------------------------------------- RMSNormalization
__global__ void rms_norm_kernel(const void* x, const void* scale, int64_t scale_n, void* y, StorageType t,
                                int64_t rows, int64_t cols, float eps) {
  __shared__ float shm[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * cols;
    float ss = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = load(x, base + c, t);
      ss += v * v;
    }
    ss = block_reduce<false>(ss, shm);
    const float inv = 1.f / sqrtf(ss / static_cast<float>(cols) + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      store(y, base + c, load(x, base + c, t) * inv * load(scale, scale_n == 1 ? 0 : c, t), t);
  }
}

// The same row in 16-byte vectors (decode shapes: a few rows of 2048..8192 values): each thread
// loads up to kRmsVecs vectors of 8 elements once, keeps them in registers through the reduction
// and writes y from them (x is read once, not twice; no per-element storage-type switch). Needs
// cols % 8 == 0, cols <= blockDim.x * 8 * kRmsVecs, scale [cols] and 16-byte aligned x, y, scale.
constexpr int kRmsVecs = 4;

template <typename T>
__global__ void rms_norm_vec_kernel(const void* x, const void* scale, void* y, int64_t rows, int64_t cols, float eps) {
  __shared__ float shm[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * cols;
    float v[kRmsVecs][8];
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < kRmsVecs; ++k) {
      const int64_t c = (static_cast<int64_t>(threadIdx.x) + static_cast<int64_t>(k) * blockDim.x) * 8;
      if (c < cols) {
        Vec8<T>::ld(x, base + c, v[k]);
#pragma unroll
        for (int j = 0; j < 8; ++j) ss += v[k][j] * v[k][j];
      }
    }
    ss = block_reduce<false>(ss, shm);
    const float inv = 1.f / sqrtf(ss / static_cast<float>(cols) + eps);
#pragma unroll
    for (int k = 0; k < kRmsVecs; ++k) {
      const int64_t c = (static_cast<int64_t>(threadIdx.x) + static_cast<int64_t>(k) * blockDim.x) * 8;
      if (c < cols) {
        float w[8];
        Vec8<T>::ld(scale, c, w);
#pragma unroll
        for (int j = 0; j < 8; ++j) w[j] = v[k][j] * inv * w[j];
        Vec8<T>::st(y, base + c, w);
      }
    }
  }
}

// ---------------------------------------------------------------- attention softmax
// Three passes over the row, each thread on the same columns: (1) mask/causal applied, written
// back to s, row maximum; (2) exp(v - max) written back to s, row sum; (3) P = s / sum. A row
// whose maximum is -inf (every key excluded) is written as zeros.
__global__ void attention_softmax_kernel(float* s, void* p, StorageType pt, const void* mask, AttentionSoftmaxDesc d,
                                         int64_t row0, int64_t nrows) {
  __shared__ float shm[32];
  const int64_t sk = d.sk;
  for (int64_t lr = blockIdx.x; lr < nrows; lr += gridDim.x) {
    const int64_t row = row0 + lr;
    float* srow = s + lr * sk;
    const int64_t pbase = lr * sk;
    const int64_t limit = attention_key_limit(d, row);
    const int64_t moff = d.mask == AttentionMask::kNone ? 0 : attention_mask_row_offset(d, row);
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < sk; j += blockDim.x) {
      float v = srow[j];
      if (d.mask == AttentionMask::kAdditive) {
        v += load(mask, moff + j * d.mask_key_stride, pt);
      } else if (d.mask == AttentionMask::kKeep) {
        if (load(mask, moff + j * d.mask_key_stride, pt) == 0.f) v = -INFINITY;
      }
      if (j > limit) v = -INFINITY;
      srow[j] = v;
      mx = fmaxf(mx, v);
    }
    mx = block_reduce<true>(mx, shm);
    if (mx == -INFINITY) {
      for (int64_t j = threadIdx.x; j < sk; j += blockDim.x) store(p, pbase + j, 0.f, pt);
      continue;
    }
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < sk; j += blockDim.x) {
      const float e = expf(srow[j] - mx);
      srow[j] = e;
      sum += e;
    }
    const float inv = 1.f / block_reduce<false>(sum, shm);
    for (int64_t j = threadIdx.x; j < sk; j += blockDim.x) store(p, pbase + j, srow[j] * inv, pt);
  }
}

// Rows of at most 1024 keys: one warp per row, the row in registers (K values per lane, K a
// compile-time bound), so the scores are read once and P written once (the block kernel above
// writes the masked and exponentiated scores back to s between its passes). The same formulas;
// the max and the sum are reduced across the warp in another order.
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_add(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <int K>
__global__ void attention_softmax_warp_kernel(const float* s, void* p, StorageType pt, const void* mask,
                                              AttentionSoftmaxDesc d, int64_t row0, int64_t nrows) {
  const int lane = threadIdx.x & 31;
  const int64_t sk = d.sk;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (int64_t lr = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + (threadIdx.x >> 5); lr < nrows; lr += warps) {
    const int64_t row = row0 + lr;
    const float* srow = s + lr * sk;
    const int64_t pbase = lr * sk;
    const int64_t limit = attention_key_limit(d, row);
    const int64_t moff = d.mask == AttentionMask::kNone ? 0 : attention_mask_row_offset(d, row);
    float v[K];
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t j = k * 32 + lane;
      float x = -INFINITY;
      if (j < sk) {
        x = srow[j];
        if (d.mask == AttentionMask::kAdditive) {
          x += load(mask, moff + j * d.mask_key_stride, pt);
        } else if (d.mask == AttentionMask::kKeep) {
          if (load(mask, moff + j * d.mask_key_stride, pt) == 0.f) x = -INFINITY;
        }
        if (j > limit) x = -INFINITY;
      }
      v[k] = x;
      mx = fmaxf(mx, x);
    }
    mx = warp_max(mx);
    if (mx == -INFINITY) {
#pragma unroll
      for (int k = 0; k < K; ++k)
        if (k * 32 + lane < sk) store(p, pbase + k * 32 + lane, 0.f, pt);
      continue;
    }
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const float e = k * 32 + lane < sk ? expf(v[k] - mx) : 0.f;
      v[k] = e;
      sum += e;
    }
    const float inv = 1.f / warp_add(sum);
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (k * 32 + lane < sk) store(p, pbase + k * 32 + lane, v[k] * inv, pt);
  }
}

template <int K>
void launch_softmax_warp(float* s, void* p, StorageType pt, const void* mask, const AttentionSoftmaxDesc& d, int64_t row0,
                         int64_t nrows, cudaStream_t stream) {
  constexpr int kWarpsPerBlock = 8;
  const unsigned g = grid_for((nrows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  attention_softmax_warp_kernel<K><<<g, kWarpsPerBlock * 32, 0, stream>>>(s, p, pt, mask, d, row0, nrows);
}

}  // namespace

cudaError_t launch_rms_norm(const void* x, const void* scale, int64_t scale_n, void* y, StorageType t, int64_t rows,
                            int64_t cols, float eps, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const unsigned vec_threads = threads_for((cols + 7) / 8);
  if (cols % 8 == 0 && scale_n == cols && cols <= static_cast<int64_t>(vec_threads) * 8 * kRmsVecs && aligned(x) &&
      aligned(y) && aligned(scale)) {
    switch (t) {
      case StorageType::kF16:
        rms_norm_vec_kernel<__half><<<grid_for(rows), vec_threads, 0, stream>>>(x, scale, y, rows, cols, eps);
        return cudaGetLastError();
      case StorageType::kBF16:
        rms_norm_vec_kernel<__nv_bfloat16><<<grid_for(rows), vec_threads, 0, stream>>>(x, scale, y, rows, cols, eps);
        return cudaGetLastError();
      case StorageType::kF32:
        rms_norm_vec_kernel<float><<<grid_for(rows), vec_threads, 0, stream>>>(x, scale, y, rows, cols, eps);
        return cudaGetLastError();
      default: break;
    }
  }
  rms_norm_kernel<<<grid_for(rows), threads_for(cols), 0, stream>>>(x, scale, scale_n, y, t, rows, cols, eps);
  return cudaGetLastError();
}

cudaError_t launch_attention_softmax(float* s, void* p, StorageType pt, const void* mask, const AttentionSoftmaxDesc& d,
                                     int64_t row0, int64_t nrows, cudaStream_t stream) {
  if (nrows == 0 || d.sk == 0) return cudaSuccess;
  if (d.sk <= 1024) {
    const int64_t per_lane = (d.sk + 31) / 32;
    if (per_lane <= 1) launch_softmax_warp<1>(s, p, pt, mask, d, row0, nrows, stream);
    else if (per_lane <= 2) launch_softmax_warp<2>(s, p, pt, mask, d, row0, nrows, stream);
    else if (per_lane <= 4) launch_softmax_warp<4>(s, p, pt, mask, d, row0, nrows, stream);
    else if (per_lane <= 8) launch_softmax_warp<8>(s, p, pt, mask, d, row0, nrows, stream);
    else if (per_lane <= 16) launch_softmax_warp<16>(s, p, pt, mask, d, row0, nrows, stream);
    else launch_softmax_warp<32>(s, p, pt, mask, d, row0, nrows, stream);
    return cudaGetLastError();
  }
  attention_softmax_kernel<<<grid_for(nrows), threads_for(d.sk), 0, stream>>>(s, p, pt, mask, d, row0, nrows);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
