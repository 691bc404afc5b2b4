// Device helpers shared by Kiln's 8-bit convolution kernels (kernels_conv8.cu: mma.sync;
// sm90a/conv8_wgmma.cu: Hopper wgmma): cp.async, 8-element loads / stores of the plan's storage
// types, and QuantConv's output requantization (ONNX QuantizeLinear: a division by the scale,
// round half to even, saturate; FP8: the nearest E4M3FN value, saturating). Included by .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backends/cuda/kernels_conv8.h"

namespace kiln::cuda::conv8 {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;  // 0: the 16 bytes are zero-filled, nothing is read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Eight consecutive elements [i, i + 8) of a float storage tensor (i a multiple of 8, 16-byte
// aligned rows: K % 8 == 0).
__device__ __forceinline__ void load8(const void* p, int64_t i, StorageType t, float (&v)[8]) {
  if (t == StorageType::kF16 || t == StorageType::kBF16) {
    const uint4 u = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p) + i);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float2 f;
      if (t == StorageType::kF16) {
        __half2 h;
        memcpy(&h, &w[q], 4);
        f = __half22float2(h);
      } else {
        __nv_bfloat162 h;
        memcpy(&h, &w[q], 4);
        f = __bfloat1622float2(h);
      }
      v[2 * q] = f.x;
      v[2 * q + 1] = f.y;
    }
    return;
  }
  const float4 a = *reinterpret_cast<const float4*>(static_cast<const float*>(p) + i);
  const float4 b = *reinterpret_cast<const float4*>(static_cast<const float*>(p) + i + 4);
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}

__device__ __forceinline__ uint8_t quantize8(float v, const Conv8Epilogue& e) {
  const float q = v / e.y_scale;  // a division, as QuantizeLinear (and kernels_quant.cu) do
  if (e.y_fp8) return static_cast<uint8_t>(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3));
  const float r = rintf(q) + static_cast<float>(e.y_zero_point);
  return static_cast<uint8_t>(static_cast<int8_t>(r < -128.f ? -128.f : (r > 127.f ? 127.f : r)));
}

__device__ __forceinline__ void store8(const Conv8Epilogue& e, int64_t i, const float (&v)[8]) {
  if (e.y_8bit) {
    uint32_t w[2] = {0, 0};
#pragma unroll
    for (int q = 0; q < 8; ++q) w[q >> 2] |= static_cast<uint32_t>(quantize8(v[q], e)) << (8 * (q & 3));
    *reinterpret_cast<uint2*>(static_cast<uint8_t*>(e.y) + i) = make_uint2(w[0], w[1]);
    return;
  }
  if (e.y_type == StorageType::kF16 || e.y_type == StorageType::kBF16) {
    uint32_t w[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      if (e.y_type == StorageType::kF16) {
        const __half2 h = __floats2half2_rn(v[2 * q], v[2 * q + 1]);
        memcpy(&w[q], &h, 4);
      } else {
        const __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * q], v[2 * q + 1]);
        memcpy(&w[q], &h, 4);
      }
    }
    *reinterpret_cast<uint4*>(static_cast<uint16_t*>(e.y) + i) = make_uint4(w[0], w[1], w[2], w[3]);
    return;
  }
  float* y = static_cast<float*>(e.y) + i;
  *reinterpret_cast<float4*>(y) = make_float4(v[0], v[1], v[2], v[3]);
  *reinterpret_cast<float4*>(y + 4) = make_float4(v[4], v[5], v[6], v[7]);
}

// The loads of one reduction tile, shared by both kernels: A = kBM im2col rows of the NHWC input
// (one per output pixel), B = kBN rows of the KRSC weight, kChunks 16-byte chunks of each row per
// tile (kBK = 16 * kChunks bytes). Thread t loads chunk column t % kChunks of rows t / kChunks +
// i * (kThreads / kChunks). A chunk is 16 channels of one tap (C % 16 == 0); chunks in the padding,
// past the reduction's end or past M / K are zero-filled. `at(row, chunk)` is the kernel's swizzled
// byte offset of a chunk in its shared-memory tile.
template <int kBM, int kBN, int kThreads, int kChunks>
struct TileLoader {
  static constexpr int kRowsPerPass = kThreads / kChunks;
  static constexpr int kARows = kBM / kRowsPerPass, kBRows = kBN / kRowsPerPass;
  static_assert(kBM % kRowsPerPass == 0 && kBN % kRowsPerPass == 0, "tile rows must cover the threads");
  int64_t a_img[kARows];  // the pixel's image base offset
  int a_ih[kARows], a_iw[kARows];  // its window's top-left corner (may be negative: padding)
  bool a_ok[kARows];
  int chunk, row0;

  __device__ __forceinline__ TileLoader(const Conv8Geometry& g, int64_t m0, int tid)
      : chunk(tid % kChunks), row0(tid / kChunks) {
    const int64_t m_total = g.n * g.oh * g.ow;
#pragma unroll
    for (int i = 0; i < kARows; ++i) {
      const int64_t m = m0 + row0 + i * kRowsPerPass;
      a_ok[i] = m < m_total;
      const int64_t mm = a_ok[i] ? m : 0;
      const int64_t ox = mm % g.ow, t = mm / g.ow;
      const int64_t oy = t % g.oh, b = t / g.oh;
      a_img[i] = b * g.h * g.w * g.c;
      a_ih[i] = static_cast<int>(oy * g.stride_h - g.pad_h);
      a_iw[i] = static_cast<int>(ox * g.stride_w - g.pad_w);
    }
  }

  template <typename At>
  __device__ __forceinline__ void load(const int8_t* x, const int8_t* w, const Conv8Geometry& g, int n0,
                                       int64_t k_red, int64_t kt, uint8_t* sa, uint8_t* sb, At at) const {
    const int64_t kk = kt * (16 * kChunks) + chunk * 16;
    const bool k_ok = kk < k_red;
    const int64_t tap = k_ok ? kk / g.c : 0;
    const int64_t ch = k_ok ? kk - tap * g.c : 0;
    const int r = static_cast<int>(tap / g.s), s = static_cast<int>(tap - (tap / g.s) * g.s);
#pragma unroll
    for (int i = 0; i < kARows; ++i) {
      const int row = row0 + i * kRowsPerPass;
      const int ih = a_ih[i] + r * static_cast<int>(g.dil_h), iw = a_iw[i] + s * static_cast<int>(g.dil_w);
      const bool ok = k_ok && a_ok[i] && ih >= 0 && ih < g.h && iw >= 0 && iw < g.w;
      const int8_t* src = ok ? x + a_img[i] + (static_cast<int64_t>(ih) * g.w + iw) * g.c + ch : x;
      cp_async16(smem_addr(sa + at(row, chunk)), src, ok);
    }
#pragma unroll
    for (int i = 0; i < kBRows; ++i) {
      const int row = row0 + i * kRowsPerPass;
      const int kout = n0 + row;
      const bool ok = k_ok && kout < g.k;
      const int8_t* src = ok ? w + static_cast<int64_t>(kout) * k_red + kk : w;
      cp_async16(smem_addr(sb + at(row, chunk)), src, ok);
    }
  }
};

// The epilogue's staging tile: float [kBM][kBN] in shared memory, each row's 16-byte chunks
// XOR-swizzled by the row (chunk c of row r at c ^ (r & 7)), so the 8 rows a warp's accumulator
// fragment covers at once land in different banks.
template <int kBN>
__device__ __forceinline__ int tile_at(int row, int col) {
  return row * kBN + ((((col >> 2) ^ (row & 7))) << 2) + (col & 3);
}

// Phase 1: an accumulator pair (columns col, col + 1 of Y; lr, lc in the tile) scaled, corrected
// for the zero point and biased, into the tile. K % 8 == 0 and col < K checked by the caller.
template <int kBN, typename Acc>
__device__ __forceinline__ void stage_pair(float* tile, const Conv8Epilogue& e, int lr, int lc, int col, Acc a0,
                                           Acc a1) {
  const float z0 = e.wsum ? static_cast<float>(e.zero_point) * e.wsum[col] : 0.f;
  const float z1 = e.wsum ? static_cast<float>(e.zero_point) * e.wsum[col + 1] : 0.f;
  const float b0 = e.bias ? e.bias[col] : 0.f, b1 = e.bias ? e.bias[col + 1] : 0.f;
  *reinterpret_cast<float2*>(&tile[tile_at<kBN>(lr, lc)]) =
      make_float2((static_cast<float>(a0) - z0) * e.scale[col] + b0, (static_cast<float>(a1) - z1) * e.scale[col + 1] + b1);
}

// Phase 2 (after a barrier): the block walks the tile in row-major runs of 8 channels, adds the
// residual, applies ReLU and stores each run whole (store8). Rows m0 + r >= m_total and columns
// n0 + c >= k are skipped.
template <int kBM, int kBN, int kThreads>
__device__ __forceinline__ void store_tile(const float* tile, const Conv8Epilogue& e, int64_t m0, int n0,
                                           int64_t m_total, int64_t k, int tid) {
  constexpr int kRuns = kBM * kBN / 8;
  for (int run = tid; run < kRuns; run += kThreads) {
    const int lr = run / (kBN / 8), lc = (run % (kBN / 8)) * 8;
    const int64_t m = m0 + lr;
    const int col = n0 + lc;
    if (m >= m_total || col >= k) continue;
    float v[8];
    const float4 lo = *reinterpret_cast<const float4*>(&tile[tile_at<kBN>(lr, lc)]);
    const float4 hi = *reinterpret_cast<const float4*>(&tile[tile_at<kBN>(lr, lc + 4)]);
    v[0] = lo.x; v[1] = lo.y; v[2] = lo.z; v[3] = lo.w; v[4] = hi.x; v[5] = hi.y; v[6] = hi.z; v[7] = hi.w;
    const int64_t idx = m * k + col;
    if (e.residual) {
      float r[8];
      load8(e.residual, idx, e.res_type, r);
#pragma unroll
      for (int q = 0; q < 8; ++q) v[q] += r[q];
    }
    if (e.relu)
#pragma unroll
      for (int q = 0; q < 8; ++q) v[q] = fmaxf(v[q], 0.f);
    store8(e, idx, v);
  }
}

}  // namespace kiln::cuda::conv8
