// Kernels on narrow integer values computed wide (kernels_qint.h, docs/decisions/0076): the
// quantization ops, Cast to a narrow type, integer Clip and BitShift, and the int32 matmul /
// convolution of MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv with their
// requantization. Float steps use the _rn intrinsics so that no multiply-add is contracted: the
// CPU reference rounds each step (cpu/ops_elementwise_quantize.cc, ops_nn_gemm.cc,
// ops_nn_conv_int.cc). One thread per output element (naive: these ops are rare in inference
// graphs that reach the GPU; a tuned int8 path is QuantLinear's, docs/decisions/0055).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/kernels_qint.h"
#include "backends/cuda/launch_config.cuh"

namespace kiln::cuda {
namespace {

// Grid-stride loops: the first index of this thread and the stride.
__device__ __forceinline__ int64_t first_index() { return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__device__ __forceinline__ int64_t quant_index(const QuantAxis& a, int64_t i) {
  return a.per_axis ? (i / a.inner) % a.dim : 0;
}

// clamp(rint(v) + z, lo, hi) with NaN -> 0 (the CPU's to_int: nearbyint, a double sum, std::clamp).
__device__ __forceinline__ int32_t round_add_clamp(float v, double z, double lo, double hi) {
  const double q = static_cast<double>(rintf(v)) + z;
  if (q != q) return 0;
  return static_cast<int32_t>(q < lo ? lo : (hi < q ? hi : q));
}

__global__ void quantize_kernel(const float* x, const float* scale, const int32_t* zp, int32_t* y, NarrowType q,
                                QuantAxis a) {
  const double lo = static_cast<double>(q.lo()), hi = static_cast<double>(q.hi());
  for (int64_t i = first_index(); i < a.count; i += grid_stride()) {
    const int64_t c = quant_index(a, i);
    y[i] = round_add_clamp(__fdiv_rn(x[i], scale[c]), zp ? static_cast<double>(zp[c]) : 0.0, lo, hi);
  }
}

__global__ void dequantize_kernel(const int32_t* x, const float* scale, const int32_t* zp, float* y, QuantAxis a) {
  for (int64_t i = first_index(); i < a.count; i += grid_stride()) {
    const int64_t c = quant_index(a, i);
    const float z = zp ? static_cast<float>(zp[c]) : 0.f;
    y[i] = __fmul_rn(__fsub_rn(static_cast<float>(x[i]), z), scale[c]);
  }
}

constexpr int kDqThreads = 1024;

__global__ void dynamic_quantize_kernel(const float* x, int64_t count, int32_t* y, float* y_scale, int32_t* y_zp) {
  __shared__ float smin[kDqThreads], smax[kDqThreads];
  float mn = 0.f, mx = 0.f;
  // std::min(mn, v) keeps mn unless v < mn (NaN never taken); min and max of the other values
  // do not depend on the order.
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const float v = x[i];
    mn = v < mn ? v : mn;
    mx = mx < v ? v : mx;
  }
  smin[threadIdx.x] = mn;
  smax[threadIdx.x] = mx;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float a = smin[threadIdx.x + s], b = smax[threadIdx.x + s];
      smin[threadIdx.x] = a < smin[threadIdx.x] ? a : smin[threadIdx.x];
      smax[threadIdx.x] = smax[threadIdx.x] < b ? b : smax[threadIdx.x];
    }
    __syncthreads();
  }
  mn = smin[0];
  mx = smax[0];
  const float scale = __fdiv_rn(__fsub_rn(mx, mn), 255.f);
  const bool ok = scale > 0.f && isfinite(scale);
  float zp = 0.f;
  if (ok) {
    zp = rintf(__fsub_rn(0.f, __fdiv_rn(mn, scale)));
    zp = zp < 0.f ? 0.f : (255.f < zp ? 255.f : zp);
  }
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    int32_t v = 0;
    if (ok) {
      const float q = __fadd_rn(rintf(__fdiv_rn(x[i], scale)), zp);
      v = q != q ? 0 : static_cast<int32_t>(q < 0.f ? 0.f : (255.f < q ? 255.f : q));
    }
    y[i] = v;
  }
  if (threadIdx.x == 0) {
    *y_scale = scale;
    *y_zp = static_cast<int32_t>(zp);
  }
}

template <typename X>
__device__ __forceinline__ int64_t to_int64(X x) {
  if constexpr (std::is_same_v<X, int32_t> || std::is_same_v<X, int64_t>) {
    return static_cast<int64_t>(x);
  } else {
    double v;
    if constexpr (std::is_same_v<X, __half>) v = __half2float(x);
    else if constexpr (std::is_same_v<X, __nv_bfloat16>) v = __bfloat162float(x);
    else v = static_cast<double>(x);
    // core/numerics.cc double_to_int64: NaN and out-of-range values give INT64_MIN.
    if (v != v || v >= 9.2233720368547758e18 || v < -9.2233720368547758e18) return INT64_MIN;
    return static_cast<int64_t>(v);
  }
}

__device__ __forceinline__ int64_t wrap_to(int64_t v, NarrowType q) {
  const uint64_t mask = (uint64_t{1} << q.bits) - 1;
  const uint64_t u = static_cast<uint64_t>(v) & mask;
  if (q.is_signed && (u >> (q.bits - 1)) != 0) return static_cast<int64_t>(u | ~mask);
  return static_cast<int64_t>(u);
}

template <typename X, typename Y>
__global__ void cast_to_narrow_kernel(const X* x, Y* y, NarrowType q, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) { y[i] = static_cast<Y>(wrap_to(to_int64(x[i]), q)); }
}

template <typename T>
__global__ void int_clip_kernel(const T* x, const T* lo, const T* hi, T* y, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    const T v = x[i];
    const T a = lo && v < *lo ? *lo : v;
    y[i] = hi && *hi < a ? *hi : a;
  }
}

template <typename T>
__global__ void bit_shift_kernel(const T* a, const T* b, T* y, NarrowType q, bool left, BroadcastDesc d, int64_t total) {
  const uint64_t mask = (uint64_t{1} << q.bits) - 1;
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    int64_t rem = i, ia = 0, ib = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t p = rem % d.out_dims[k];
      rem /= d.out_dims[k];
      ia += p * d.a_strides[k];
      ib += p * d.b_strides[k];
    }
    const uint64_t x = static_cast<uint64_t>(a[ia]) & mask, s = static_cast<uint64_t>(b[ib]) & mask;
    y[i] = static_cast<T>(s >= static_cast<uint64_t>(q.bits) ? 0 : ((left ? x << s : x >> s) & mask));
  }
}

__global__ void int_matmul_kernel(const int32_t* a, const int32_t* za, const int32_t* b, const int32_t* zb, int32_t* acc,
                                  IntMatMulDesc d, int64_t total) {
  for (int64_t o = first_index(); o < total; o += grid_stride()) {
    const int64_t j = o % d.n, i = (o / d.n) % d.m;
    int64_t rem = o / (d.n * d.m), am = 0, bm = 0;
    for (int r = d.batch_rank - 1; r >= 0; --r) {
      const int64_t p = rem % d.batch_dims[r];
      rem /= d.batch_dims[r];
      am += p * d.a_bstrides[r];
      bm += p * d.b_bstrides[r];
    }
    const int32_t* pa = a + (am * d.m + i) * d.k;
    const int32_t* pb = b + bm * d.k * d.n + j;
    const int32_t zai = za ? za[d.za_per_row ? i : 0] : 0, zbj = zb ? zb[d.zb_per_col ? j : 0] : 0;
    uint32_t s = 0;  // wraps like the CPU's int32 sums (order-free modulo 2^32)
    for (int64_t k = 0; k < d.k; ++k)
      s += static_cast<uint32_t>(pa[k] - zai) * static_cast<uint32_t>(pb[k * d.n] - zbj);
    acc[o] = static_cast<int32_t>(s);
  }
}

__global__ void int_conv_kernel(const int32_t* x, const int32_t* zx, const int32_t* w, const int32_t* zw, int32_t* acc,
                                IntConvDesc d, int64_t total) {
  const int64_t cg = d.c / d.group, mg = d.m / d.group;
  for (int64_t o = first_index(); o < total; o += grid_stride()) {
    int64_t rem = o;
    const int64_t ox = rem % d.out[2]; rem /= d.out[2];
    const int64_t oy = rem % d.out[1]; rem /= d.out[1];
    const int64_t oz = rem % d.out[0]; rem /= d.out[0];
    const int64_t m = rem % d.m, n = rem / d.m;
    const int64_t g = m / mg;
    const int32_t zxv = zx ? zx[0] : 0, zwv = zw ? zw[d.zw_per_channel ? m : 0] : 0;
    uint32_t s = 0;
    for (int64_t ci = 0; ci < cg; ++ci) {
      const int64_t c = g * cg + ci;
      const int32_t* px = x + (n * d.c + c) * d.in[0] * d.in[1] * d.in[2];
      const int32_t* pw = w + (m * cg + ci) * d.kernel[0] * d.kernel[1] * d.kernel[2];
      for (int64_t kz = 0; kz < d.kernel[0]; ++kz) {
        const int64_t iz = oz * d.stride[0] - d.pad_begin[0] + kz * d.dilation[0];
        if (iz < 0 || iz >= d.in[0]) continue;
        for (int64_t ky = 0; ky < d.kernel[1]; ++ky) {
          const int64_t iy = oy * d.stride[1] - d.pad_begin[1] + ky * d.dilation[1];
          if (iy < 0 || iy >= d.in[1]) continue;
          for (int64_t kx = 0; kx < d.kernel[2]; ++kx) {
            const int64_t ix = ox * d.stride[2] - d.pad_begin[2] + kx * d.dilation[2];
            if (ix < 0 || ix >= d.in[2]) continue;
            const int32_t xv = px[(iz * d.in[1] + iy) * d.in[2] + ix] - zxv;
            const int32_t wv = pw[(kz * d.kernel[1] + ky) * d.kernel[2] + kx] - zwv;
            s += static_cast<uint32_t>(xv) * static_cast<uint32_t>(wv);
          }
        }
      }
    }
    acc[o] = static_cast<int32_t>(s);
  }
}

__global__ void requantize_kernel(const int32_t* acc, const int32_t* bias, const float* s1, const float* s2,
                                  const float* sy, const int32_t* zy, int32_t* y, RequantDesc d) {
  const double lo = static_cast<double>(d.q.lo()), hi = static_cast<double>(d.q.hi());
  for (int64_t i = first_index(); i < d.count; i += grid_stride()) {
    const int64_t c1 = d.s1_per ? (i / d.s1_div) % d.s1_mod : 0, ch = (i / d.s2_div) % d.s2_mod, c2 = d.s2_per ? ch : 0;
    const int32_t v = static_cast<int32_t>(static_cast<uint32_t>(acc[i]) + static_cast<uint32_t>(bias ? bias[ch] : 0));
    const float scale = __fdiv_rn(__fmul_rn(s1[c1], s2[c2]), sy[0]);
    y[i] = round_add_clamp(__fmul_rn(__int2float_rn(v), scale), static_cast<double>(zy[0]), lo, hi);
  }
}

}  // namespace

cudaError_t launch_quantize_linear(const float* x, const float* scale, const int32_t* zp, int32_t* y, NarrowType q,
                                   const QuantAxis& a, cudaStream_t stream) {
  if (a.count == 0) return cudaSuccess;
  quantize_kernel<<<blocks_for(a.count), kThreads, 0, stream>>>(x, scale, zp, y, q, a);
  return cudaGetLastError();
}

cudaError_t launch_dequantize_linear(const int32_t* x, const float* scale, const int32_t* zp, float* y,
                                     const QuantAxis& a, cudaStream_t stream) {
  if (a.count == 0) return cudaSuccess;
  dequantize_kernel<<<blocks_for(a.count), kThreads, 0, stream>>>(x, scale, zp, y, a);
  return cudaGetLastError();
}

cudaError_t launch_dynamic_quantize_linear(const float* x, int64_t count, int32_t* y, float* y_scale, int32_t* y_zp,
                                           cudaStream_t stream) {
  dynamic_quantize_kernel<<<1, kDqThreads, 0, stream>>>(x, count, y, y_scale, y_zp);
  return cudaGetLastError();
}

cudaError_t launch_cast_to_narrow(const void* x, StorageType xt, void* y, StorageType yt, NarrowType q, int64_t count,
                                  cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (yt != StorageType::kI32 && yt != StorageType::kI64) return cudaErrorInvalidValue;
  auto run = [&](auto* px) {
    using X = std::remove_cv_t<std::remove_pointer_t<decltype(px)>>;
    if (yt == StorageType::kI32)
      cast_to_narrow_kernel<X, int32_t><<<blocks_for(count), kThreads, 0, stream>>>(px, static_cast<int32_t*>(y), q, count);
    else
      cast_to_narrow_kernel<X, int64_t><<<blocks_for(count), kThreads, 0, stream>>>(px, static_cast<int64_t*>(y), q, count);
    return cudaGetLastError();
  };
  switch (xt) {
    case StorageType::kF32: return run(static_cast<const float*>(x));
    case StorageType::kF16: return run(static_cast<const __half*>(x));
    case StorageType::kBF16: return run(static_cast<const __nv_bfloat16*>(x));
    case StorageType::kI32: return run(static_cast<const int32_t*>(x));
    case StorageType::kI64: return run(static_cast<const int64_t*>(x));
    case StorageType::kBool: case StorageType::kI8: case StorageType::kF8E4M3: return cudaErrorInvalidValue;
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_int_clip(const void* x, const void* lo, const void* hi, void* y, StorageType t, int64_t count,
                            cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (t == StorageType::kI32)
    int_clip_kernel<int32_t><<<blocks_for(count), kThreads, 0, stream>>>(
        static_cast<const int32_t*>(x), static_cast<const int32_t*>(lo), static_cast<const int32_t*>(hi),
        static_cast<int32_t*>(y), count);
  else if (t == StorageType::kI64)
    int_clip_kernel<int64_t><<<blocks_for(count), kThreads, 0, stream>>>(
        static_cast<const int64_t*>(x), static_cast<const int64_t*>(lo), static_cast<const int64_t*>(hi),
        static_cast<int64_t*>(y), count);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t launch_bit_shift(const void* a, const void* b, void* y, StorageType t, NarrowType q, bool left,
                             const BroadcastDesc& d, cudaStream_t stream) {
  int64_t total = 1;
  for (int k = 0; k < d.rank; ++k) total *= d.out_dims[k];
  if (total == 0) return cudaSuccess;
  if (t == StorageType::kI32)
    bit_shift_kernel<int32_t><<<blocks_for(total), kThreads, 0, stream>>>(
        static_cast<const int32_t*>(a), static_cast<const int32_t*>(b), static_cast<int32_t*>(y), q, left, d, total);
  else if (t == StorageType::kI64)
    bit_shift_kernel<int64_t><<<blocks_for(total), kThreads, 0, stream>>>(
        static_cast<const int64_t*>(a), static_cast<const int64_t*>(b), static_cast<int64_t*>(y), q, left, d, total);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t launch_int_matmul(const int32_t* a, const int32_t* za, const int32_t* b, const int32_t* zb, int32_t* acc,
                              const IntMatMulDesc& d, cudaStream_t stream) {
  int64_t total = d.m * d.n;
  for (int r = 0; r < d.batch_rank; ++r) total *= d.batch_dims[r];
  if (total == 0) return cudaSuccess;
  int_matmul_kernel<<<blocks_for(total), kThreads, 0, stream>>>(a, za, b, zb, acc, d, total);
  return cudaGetLastError();
}

cudaError_t launch_int_conv(const int32_t* x, const int32_t* zx, const int32_t* w, const int32_t* zw, int32_t* acc,
                            const IntConvDesc& d, cudaStream_t stream) {
  const int64_t total = d.n * d.m * d.out[0] * d.out[1] * d.out[2];
  if (total == 0) return cudaSuccess;
  if (d.group < 1 || d.c % d.group != 0 || d.m % d.group != 0) return cudaErrorInvalidValue;
  int_conv_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, zx, w, zw, acc, d, total);
  return cudaGetLastError();
}

cudaError_t launch_requantize(const int32_t* acc, const int32_t* bias, const float* s1, const float* s2, const float* sy,
                              const int32_t* zy, int32_t* y, const RequantDesc& d, cudaStream_t stream) {
  if (d.count == 0) return cudaSuccess;
  requantize_kernel<<<blocks_for(d.count), kThreads, 0, stream>>>(acc, bias, s1, s2, sy, zy, y, d);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
