// Kiln's own CUDA kernels: broadcast pointwise ops, fused pointwise programs (ir::pw_apply, the
// formulas of the CPU reference), layout/dtype reformat (with channel padding), softmax, concat,
// split, conv bias/residual/activation epilogue. Formulas follow the ONNX operator definitions of
// the corresponding ops. Storage float/__half/__nv_bfloat16, math float.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "backends/cuda/fast_math.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch_config.cuh"
#include "backends/cuda/storage_access.cuh"

namespace kiln::cuda {
namespace {

__device__ __forceinline__ float apply(PointwiseOp op, float a, float b, float alpha, float beta) {
  switch (op) {
    case PointwiseOp::kAdd: return a + b;
    case PointwiseOp::kSub: return a - b;
    case PointwiseOp::kMul: return a * b;
    case PointwiseOp::kDiv: return a / b;
    case PointwiseOp::kMax: return fmaxf(a, b);
    case PointwiseOp::kMin: return fminf(a, b);
    case PointwiseOp::kPow: return powf(a, b);
    case PointwiseOp::kRelu: return fmaxf(a, 0.f);
    case PointwiseOp::kSigmoid: return 1.f / (1.f + __expf(-a));
    case PointwiseOp::kTanh: return tanhf(a);
    case PointwiseOp::kLeakyRelu: return a < 0.f ? alpha * a : a;
    case PointwiseOp::kClip: return fminf(fmaxf(a, alpha), beta);
    case PointwiseOp::kHardSigmoid: return fminf(fmaxf(alpha * a + beta, 0.f), 1.f);
    case PointwiseOp::kHardSwish: return a * fminf(fmaxf(a / 6.f + 0.5f, 0.f), 1.f);
    case PointwiseOp::kErf: return erff(a);
    case PointwiseOp::kExp: return __expf(a);
    case PointwiseOp::kSqrt: return sqrtf(a);
    case PointwiseOp::kNeg: return -a;
    case PointwiseOp::kAbs: return fabsf(a);
    // fast_math.cuh: A&S 7.1.26 erf (5e-7 absolute vs erff on the device), tanh as a logistic.
    case PointwiseOp::kGeluErf: return fast_gelu_erf(a);
    case PointwiseOp::kGeluTanh: return fast_gelu_tanh(a);
    case PointwiseOp::kIdentity: return a;
    case PointwiseOp::kSilu: return a / (1.f + __expf(-a));
    case PointwiseOp::kReciprocal: return 1.f / a;
    case PointwiseOp::kLog: return logf(a);
    case PointwiseOp::kElu: return a < 0.f ? alpha * (__expf(a) - 1.f) : a;
    // The accurate forms: RoPE angles (position x frequency) reach hundreds of radians, where
    // __sinf / __cosf lose their accuracy.
    case PointwiseOp::kSin: return sinf(a);
    case PointwiseOp::kCos: return cosf(a);
  }
  return a;
}

// Idx: uint32_t when every offset fits (the output has < 2^31 elements; broadcast inputs are no
// larger): 32-bit division is several times cheaper than 64-bit, and it runs per dim per element.
template <typename Idx>
__global__ void pointwise_kernel(PointwiseOp op, StorageType st, const void* a, const void* b, void* y, BroadcastDesc d,
                                 int64_t total, float alpha, float beta) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Idx rem = static_cast<Idx>(i), ia = 0, ib = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const Idx dim = static_cast<Idx>(d.out_dims[k]);
      const Idx idx = rem % dim;
      rem /= dim;
      ia += idx * static_cast<Idx>(d.a_strides[k]);
      ib += idx * static_cast<Idx>(d.b_strides[k]);
    }
    const float va = load(a, ia, st);
    const float vb = b ? load(b, ib, st) : 0.f;
    store(y, i, apply(op, va, vb, alpha, beta), st);
  }
}

// The program on one element's inputs x (in float), in registers: the value of its last instruction.
__device__ __forceinline__ float run_program(const PwDeviceProgram& p, const float* x) {
  float r[ir::kMaxPwInstrs];
  for (int j = 0; j < p.num_instrs; ++j) {
    const PwDeviceInstr& in = p.instrs[j];
    float a[ir::kMaxPwArgs];
    for (int q = 0; q < ir::kMaxPwArgs; ++q) {
      const int32_t s = in.src[q];
      a[q] = s >= 0 ? r[s] : (s == kPwImmediate ? in.imm[q] : x[-1 - s]);
    }
    r[j] = ir::pw_apply(static_cast<ir::PwOpcode>(in.op), a[0], a[1], a[2]);
  }
  return r[p.num_instrs - 1];
}

// One thread per output element (grid-stride): broadcast offsets of every input from the output
// index, then the program in registers (float), then one store.
template <typename Idx>
__global__ void fused_pointwise_kernel(PwDeviceProgram p, PwDevicePointers ptrs, void* y, StorageType st, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Idx off[ir::kMaxPwInputs] = {};
    Idx rem = static_cast<Idx>(i);
    for (int d = p.rank - 1; d >= 0; --d) {
      const Idx dim = static_cast<Idx>(p.out_dims[d]);
      const Idx idx = rem % dim;
      rem /= dim;
      for (int k = 0; k < p.num_inputs; ++k) off[k] += idx * static_cast<Idx>(p.in_strides[k][d]);
    }
    float x[ir::kMaxPwInputs];
    for (int k = 0; k < p.num_inputs; ++k) x[k] = load(ptrs.in[k], off[k], st);
    store(y, i, run_program(p, x), st);
  }
}

// Element access with the storage type known at compile time (the flat fast paths below).
template <typename T>
struct Elem;
template <>
struct Elem<float> {
  static __device__ __forceinline__ float ld(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
  static __device__ __forceinline__ void st(void* p, int64_t i, float v) { static_cast<float*>(p)[i] = v; }
};
template <>
struct Elem<__half> {
  static __device__ __forceinline__ float ld(const void* p, int64_t i) { return __half2float(static_cast<const __half*>(p)[i]); }
  static __device__ __forceinline__ void st(void* p, int64_t i, float v) { static_cast<__half*>(p)[i] = __float2half_rn(v); }
};
template <>
struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float ld(const void* p, int64_t i) {
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
  static __device__ __forceinline__ void st(void* p, int64_t i, float v) {
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  }
};

// Flat fast paths: every input is either the output's shape, contiguous (offset = output index),
// or one element (offset 0) — no index arithmetic per element, the storage type a template
// parameter. The same loads and formulas as the general kernels, so the same values.
template <typename T>
__global__ void pointwise_flat_kernel(PointwiseOp op, const void* a, const void* b, bool b_scalar, void* y, int64_t total,
                                      float alpha, float beta) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float va = Elem<T>::ld(a, i);
    const float vb = b ? Elem<T>::ld(b, b_scalar ? 0 : i) : 0.f;
    Elem<T>::st(y, i, apply(op, va, vb, alpha, beta));
  }
}

template <typename T>
__global__ void fused_pointwise_flat_kernel(PwDeviceProgram p, PwDevicePointers ptrs, uint32_t scalar_mask, void* y,
                                            int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float x[ir::kMaxPwInputs];
    for (int k = 0; k < p.num_inputs; ++k) x[k] = Elem<T>::ld(ptrs.in[k], (scalar_mask >> k) & 1u ? 0 : i);
    Elem<T>::st(y, i, run_program(p, x));
  }
}

// The vector paths, 16 bytes per access (docs/decisions/0082). Every input is either one element
// (read once, kPwScalar) or "periodic": its physical shape is a contiguous suffix of the
// output's (leading dims 1 or broadcast), so element i of the output reads element i mod P of it,
// P the product of that suffix — P = total for an input of the output's shape, P = S*H for a
// [S, H] row table under [B, S, H], P = H for a [H] channel vector. Each thread takes groups of
// V = 16 / sizeof(T) consecutive output elements; when every periodic P is a multiple of V (or
// the output's total), a group never wraps inside an input and is one aligned 16-byte load per
// input and one 16-byte store. Offsets: 32-bit FastDivmod (the launcher requires total < 2^31).
// U = kVecUnroll groups per thread per step keep 32 bytes of each input in flight (the fixed-op
// kernel; the program kernel takes one). Elements past the last
// whole group run one by one. The same loads, formulas and rounding per element as the scalar
// kernels above, so the same values.
template <typename T>
__device__ __forceinline__ float elem_of(const uint4& u, int j) {
  return Elem<T>::ld(&u, j);
}

constexpr int kVecUnroll = 2;
// FusedPointwise: one group per step — its interpreter (run_program) keeps the program's
// registers and inputs in local memory already; a second group's 8 raw inputs would spill too.
constexpr int kFusedUnroll = 1;

// One input of the vector kernels: its period (FastDivmod of P; P = 1: one element).
struct PeriodicIn {
  FastDivmod mod;
  bool scalar = false;
};

__device__ __forceinline__ uint32_t wrap(const PeriodicIn& in, uint32_t i) {
  uint32_t q, r;
  in.mod.divmod(i, q, r);
  return r;
}

// OP >= 0: the op as a template constant (the hot ops: the switch folds away and the kernel keeps
// only its formula); -1: `rop` at run time.
template <typename T, int OP>
__global__ void __launch_bounds__(256) pointwise_vec_kernel(PointwiseOp rop, const void* a, const void* b, PeriodicIn pa,
                                                            PeriodicIn pb, void* y, uint32_t total, float alpha, float beta) {
  const PointwiseOp op = OP >= 0 ? static_cast<PointwiseOp>(OP) : rop;
  constexpr int V = 16 / sizeof(T);
  const uint32_t groups = total / V;
  const uint32_t stride = gridDim.x * blockDim.x;
  const uint32_t first = blockIdx.x * blockDim.x + threadIdx.x;
  const float as = pa.scalar ? Elem<T>::ld(a, 0) : 0.f;
  const float bs = b && pb.scalar ? Elem<T>::ld(b, 0) : 0.f;
  for (uint32_t g0 = first; g0 < groups; g0 += kVecUnroll * stride) {
    uint4 ua[kVecUnroll], ub[kVecUnroll];
#pragma unroll
    for (int u = 0; u < kVecUnroll; ++u) {
      const uint32_t g = g0 + u * stride;
      if (g >= groups) break;
      if (!pa.scalar) ua[u] = reinterpret_cast<const uint4*>(a)[wrap(pa, g * V) / V];
      if (b && !pb.scalar) ub[u] = reinterpret_cast<const uint4*>(b)[wrap(pb, g * V) / V];
    }
#pragma unroll
    for (int u = 0; u < kVecUnroll; ++u) {
      const uint32_t g = g0 + u * stride;
      if (g >= groups) break;
      uint4 uy;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const float va = pa.scalar ? as : elem_of<T>(ua[u], j);
        const float vb = b ? (pb.scalar ? bs : elem_of<T>(ub[u], j)) : 0.f;
        Elem<T>::st(&uy, j, apply(op, va, vb, alpha, beta));
      }
      reinterpret_cast<uint4*>(y)[g] = uy;
    }
  }
  for (uint32_t i = groups * V + first; i < total; i += stride) {
    const float va = Elem<T>::ld(a, pa.scalar ? 0 : wrap(pa, i));
    const float vb = b ? Elem<T>::ld(b, pb.scalar ? 0 : wrap(pb, i)) : 0.f;
    Elem<T>::st(y, i, apply(op, va, vb, alpha, beta));
  }
}

struct PeriodicIns {
  PeriodicIn in[ir::kMaxPwInputs];
};

template <typename T>
__global__ void __launch_bounds__(256) fused_pointwise_vec_kernel(PwDeviceProgram p, PwDevicePointers ptrs,
                                                                  PeriodicIns per, void* y, uint32_t total) {
  constexpr int V = 16 / sizeof(T);
  const uint32_t groups = total / V;
  const uint32_t stride = gridDim.x * blockDim.x;
  const uint32_t first = blockIdx.x * blockDim.x + threadIdx.x;
  float sc[ir::kMaxPwInputs];  // the one-element inputs, read once
#pragma unroll
  for (int k = 0; k < ir::kMaxPwInputs; ++k) sc[k] = k < p.num_inputs && per.in[k].scalar ? Elem<T>::ld(ptrs.in[k], 0) : 0.f;
  for (uint32_t g0 = first; g0 < groups; g0 += kFusedUnroll * stride) {
    uint4 raw[kFusedUnroll][ir::kMaxPwInputs];
#pragma unroll
    for (int u = 0; u < kFusedUnroll; ++u) {
      const uint32_t g = g0 + u * stride;
      if (g >= groups) break;
#pragma unroll
      for (int k = 0; k < ir::kMaxPwInputs; ++k)
        if (k < p.num_inputs && !per.in[k].scalar)
          raw[u][k] = reinterpret_cast<const uint4*>(ptrs.in[k])[wrap(per.in[k], g * V) / V];
    }
#pragma unroll
    for (int u = 0; u < kFusedUnroll; ++u) {
      const uint32_t g = g0 + u * stride;
      if (g >= groups) break;
      uint4 uy;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        float x[ir::kMaxPwInputs];
#pragma unroll
        for (int k = 0; k < ir::kMaxPwInputs; ++k)
          if (k < p.num_inputs) x[k] = per.in[k].scalar ? sc[k] : elem_of<T>(raw[u][k], j);
        Elem<T>::st(&uy, j, run_program(p, x));
      }
      reinterpret_cast<uint4*>(y)[g] = uy;
    }
  }
  for (uint32_t i = groups * V + first; i < total; i += stride) {
    float x[ir::kMaxPwInputs];
    for (int k = 0; k < p.num_inputs; ++k) x[k] = Elem<T>::ld(ptrs.in[k], per.in[k].scalar ? 0 : wrap(per.in[k], i));
    Elem<T>::st(y, i, run_program(p, x));
  }
}


// Idx: uint32_t when every index fits (32-bit division is several times cheaper than 64-bit).
template <typename Idx>
__global__ void reformat_kernel(const void* src, StorageType src_t, bool snhwc, void* dst, StorageType dst_t, bool dnhwc,
                                Idx n, Idx c, Idx h, Idx w, Idx dc) {
  const Idx total = n * dc * h * w;
  for (Idx i = blockIdx.x * static_cast<Idx>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<Idx>(gridDim.x) * blockDim.x) {
    // i indexes the destination.
    Idx nn, cc, hh, ww, r = i;
    if (dnhwc) { cc = r % dc; r /= dc; ww = r % w; r /= w; hh = r % h; nn = r / h; }
    else { ww = r % w; r /= w; hh = r % h; r /= h; cc = r % dc; nn = r / dc; }
    if (cc >= c) {  // padding channel
      store(dst, i, 0.f, dst_t);
      continue;
    }
    const Idx s = snhwc ? ((nn * h + hh) * w + ww) * c + cc : ((nn * c + cc) * h + hh) * w + ww;
    store(dst, i, load(src, s, src_t), dst_t);
  }
}

// NCHW -> NHWC with few channels (a network's input: C = 3, padded to dc <= 16): one thread per
// pixel reads its C values (coalesced across threads, one plane each) and writes its dc
// contiguous channels, zeros past C. One 32-bit division per pixel instead of four per element.
__global__ void pixels_to_nhwc_kernel(const void* src, StorageType src_t, void* dst, StorageType dst_t, uint32_t n,
                                      uint32_t c, uint32_t hw, uint32_t dc) {
  const uint32_t pixels = n * hw;
  for (uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < pixels; p += gridDim.x * blockDim.x) {
    const uint32_t nn = p / hw, q = p - nn * hw;
    for (uint32_t cc = 0; cc < dc; ++cc)
      store(dst, static_cast<int64_t>(p) * dc + cc, cc < c ? load(src, (nn * c + cc) * hw + q, src_t) : 0.f, dst_t);
  }
}

__global__ void convert_kernel(const void* src, StorageType src_t, void* dst, StorageType dst_t, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    store(dst, i, load(src, i, src_t), dst_t);
}

// Float storage conversions, 8 elements per thread (16- or 32-byte loads and stores) where the
// count is a multiple of 8 and the pointers 16-byte aligned: the same roundings as convert_kernel.
template <typename S, typename D>
__global__ void convert8_kernel(const void* src, void* dst, int64_t groups) {
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v[8];
    Vec8<S>::ld(src, g * 8, v);
    Vec8<D>::st(dst, g * 8, v);
  }
}

// One block per row; the row is reduced in shared memory (max, then sum of exp).
__global__ void softmax_kernel(const void* x, void* y, StorageType st, int64_t cols, bool log) {
  extern __shared__ float red[];
  const int64_t row = blockIdx.x;
  const int64_t base = row * cols;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, load(x, base + j, st));
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += __expf(load(x, base + j, st) - m);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  sum = red[0];
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float v = load(x, base + j, st) - m;
    store(y, base + j, log ? v - logf(sum) : __expf(v) / sum, st);
  }
}

// Rows of at most kSoftmaxWarpMax elements, a multiple of 8, 16-byte aligned: one warp per row,
// the row in registers (N vectors of 8 per lane, element k * 256 + lane * 8 + j, the last vector
// masked off past cols), read once, written once; warp shuffles instead of shared memory and
// __syncthreads. The same formula as softmax_kernel (max, sum of __expf(x - max), then
// __expf(x - max) / sum or x - max - logf(sum)); the sums run in another order.
constexpr int kSoftmaxWarpMax = 1024;

__device__ __forceinline__ float warp_max_f(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum_f(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T, int N>
__global__ void __launch_bounds__(256) softmax_warp_kernel(const void* x, void* y, uint32_t rows, uint32_t cols, bool log) {
  const int lane = threadIdx.x & 31;
  const uint32_t warps = gridDim.x * (blockDim.x >> 5);
  for (uint32_t r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
    const int64_t base = static_cast<int64_t>(r) * cols;
    float v[N * 8];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const uint32_t c = k * 256 + lane * 8;
      if (c < cols) {
        Vec8<T>::ld(x, base + c, v + k * 8);
#pragma unroll
        for (int j = 0; j < 8; ++j) m = fmaxf(m, v[k * 8 + j]);
      }
    }
    m = warp_max_f(m);
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < N; ++k)
      if (k * 256 + lane * 8 < cols) {
#pragma unroll
        for (int j = 0; j < 8; ++j) sum += __expf(v[k * 8 + j] - m);
      }
    sum = warp_sum_f(sum);
    const float lsum = logf(sum);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const uint32_t c = k * 256 + lane * 8;
      if (c < cols) {
        float o[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float d = v[k * 8 + j] - m;
          o[j] = log ? d - lsum : __expf(d) / sum;
        }
        Vec8<T>::st(y, base + c, o);
      }
    }
  }
}

template <typename T>
void softmax_warp(const void* x, void* y, int64_t rows, int64_t cols, bool log, cudaStream_t stream) {
  // 8 rows (warps) per block; at most 4 waves of 8 resident blocks per SM, the rest by grid stride.
  const auto grid = static_cast<unsigned>(std::min<int64_t>((rows + 7) / 8, int64_t{sm_count()} * 8 * 4));
  const auto r = static_cast<uint32_t>(rows), c = static_cast<uint32_t>(cols);
  switch ((cols + 255) / 256) {
    case 1: softmax_warp_kernel<T, 1><<<grid, 256, 0, stream>>>(x, y, r, c, log); break;
    case 2: softmax_warp_kernel<T, 2><<<grid, 256, 0, stream>>>(x, y, r, c, log); break;
    case 3: softmax_warp_kernel<T, 3><<<grid, 256, 0, stream>>>(x, y, r, c, log); break;
    default: softmax_warp_kernel<T, 4><<<grid, 256, 0, stream>>>(x, y, r, c, log); break;
  }
}

__global__ void concat_kernel(const char* src, char* dst, int eb, int64_t outer, int64_t inner_in, int64_t inner_out,
                              int64_t offset) {
  const int64_t total = outer * inner_in;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = i / inner_in, k = i % inner_in;
    const char* s = src + i * eb;
    char* d = dst + (o * inner_out + offset + k) * eb;
    for (int b = 0; b < eb; ++b) d[b] = s[b];
  }
}

__global__ void bias_act_kernel(void* y, const void* bias, const void* z, StorageType t, int64_t count, int64_t channels,
                                int64_t spatial, bool nhwc, PointwiseOp act, float alpha, float beta) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = nhwc ? i % channels : (i / spatial) % channels;
    float v = load(y, i, t) + load(bias, ch, t);
    if (z) v += load(z, i, t);
    store(y, i, apply(act, v, 0.f, alpha, beta), t);
  }
}

__global__ void pool_kernel(const void* x, void* y, StorageType t, PoolDesc d) {
  const int64_t total = d.n * d.c * d.oh * d.ow;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t nn, cc, oy, ox, r = i;  // i indexes y in its storage order
    if (d.nhwc) { cc = r % d.c; r /= d.c; ox = r % d.ow; r /= d.ow; oy = r % d.oh; nn = r / d.oh; }
    else { ox = r % d.ow; r /= d.ow; oy = r % d.oh; r /= d.oh; cc = r % d.c; nn = r / d.c; }
    float acc = d.max ? -INFINITY : 0.f;
    int64_t count = 0;
    for (int64_t ky = 0; ky < d.kh; ++ky) {
      const int64_t iy = oy * d.stride_h - d.pad_h + ky;
      if (iy < 0 || iy >= d.h) continue;
      for (int64_t kx = 0; kx < d.kw; ++kx) {
        const int64_t ix = ox * d.stride_w - d.pad_w + kx;
        if (ix < 0 || ix >= d.w) continue;
        const int64_t s = d.nhwc ? ((nn * d.h + iy) * d.w + ix) * d.c + cc : ((nn * d.c + cc) * d.h + iy) * d.w + ix;
        const float v = load(x, s, t);
        acc = d.max ? fmaxf(acc, v) : acc + v;
        ++count;
      }
    }
    if (!d.max) acc /= static_cast<float>(d.count_include_pad ? d.kh * d.kw : (count > 0 ? count : 1));
    store(y, i, acc, t);
  }
}

__global__ void split_kernel(const char* src, char* dst, int eb, int64_t outer, int64_t inner_in, int64_t inner_out,
                             int64_t offset) {
  const int64_t total = outer * inner_out;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = i / inner_out, k = i % inner_out;
    const char* s = src + (o * inner_in + offset + k) * eb;
    char* d = dst + i * eb;
    for (int b = 0; b < eb; ++b) d[b] = s[b];
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

int grid_for(int64_t total, int block) {
  int64_t g = (total + block - 1) / block;
  return static_cast<int>(g < 1 ? 1 : (g > 65535 * 8 ? 65535 * 8 : g));
}

// 8 elements per thread between float storage types (see convert8_kernel); false when it does not apply.
bool convert8(const void* src, StorageType src_t, void* dst, StorageType dst_t, int64_t count, cudaStream_t stream) {
  auto is_float = [](StorageType t) { return t == StorageType::kF32 || t == StorageType::kF16 || t == StorageType::kBF16; };
  if (count % 8 || !is_float(src_t) || !is_float(dst_t) || src_t == dst_t || reinterpret_cast<uintptr_t>(src) % 16 ||
      reinterpret_cast<uintptr_t>(dst) % 16)
    return false;
  const int64_t groups = count / 8;
  const int grid = grid_for(groups, 256);
  if (src_t == StorageType::kF32 && dst_t == StorageType::kF16) convert8_kernel<float, __half><<<grid, 256, 0, stream>>>(src, dst, groups);
  else if (src_t == StorageType::kF32) convert8_kernel<float, __nv_bfloat16><<<grid, 256, 0, stream>>>(src, dst, groups);
  else if (src_t == StorageType::kF16 && dst_t == StorageType::kF32) convert8_kernel<__half, float><<<grid, 256, 0, stream>>>(src, dst, groups);
  else if (src_t == StorageType::kF16) convert8_kernel<__half, __nv_bfloat16><<<grid, 256, 0, stream>>>(src, dst, groups);
  else if (dst_t == StorageType::kF32) convert8_kernel<__nv_bfloat16, float><<<grid, 256, 0, stream>>>(src, dst, groups);
  else convert8_kernel<__nv_bfloat16, __half><<<grid, 256, 0, stream>>>(src, dst, groups);
  return true;
}


}  // namespace

namespace {

bool float_storage(StorageType t) { return t == StorageType::kF32 || t == StorageType::kF16 || t == StorageType::kBF16; }

// The vector kernels' view of an input (broadcast_period; see pointwise_vec_kernel): false when the
// input is not periodic, its period is not a multiple of v (and not the whole output), or it is
// not 16-byte aligned.
bool periodic_input(const void* ptr, const int64_t* dims, const int64_t* strides, int rank, int64_t total, int v,
                    PeriodicIn* out) {
  const int64_t period = broadcast_period(dims, strides, rank);
  if (period < 0) return false;
  if (period == 1) {
    out->scalar = true;
    return true;
  }
  if ((period % v != 0 && period != total) || !aligned16(ptr)) return false;
  out->mod = FastDivmod(static_cast<uint32_t>(period));
  return true;
}

// Blocks for the vector kernels: one thread per kVecUnroll groups of 16 bytes (at least one
// thread for the tail), at most 4 resident waves.
unsigned vec_blocks(int64_t total, int v) {
  const int64_t groups = total / v;
  return blocks_for_sms(std::max<int64_t>((groups + kVecUnroll - 1) / kVecUnroll, 1), 256);
}

template <typename T>
void pointwise_vec(PointwiseOp op, const void* a, const void* b, const PeriodicIn& pa, const PeriodicIn& pb, void* y,
                   uint32_t total, float alpha, float beta, cudaStream_t stream) {
  const unsigned grid = vec_blocks(total, 16 / sizeof(T));
  switch (op) {
#define KILN_PW_HOT(O)                                                                                           \
  case PointwiseOp::O:                                                                                           \
    pointwise_vec_kernel<T, static_cast<int>(PointwiseOp::O)><<<grid, 256, 0, stream>>>(op, a, b, pa, pb, y, total, \
                                                                                       alpha, beta);           \
    return;
    KILN_PW_HOT(kAdd)
    KILN_PW_HOT(kSub)
    KILN_PW_HOT(kMul)
    KILN_PW_HOT(kDiv)
    KILN_PW_HOT(kRelu)
    KILN_PW_HOT(kSigmoid)
    KILN_PW_HOT(kSilu)
    KILN_PW_HOT(kGeluErf)
    KILN_PW_HOT(kGeluTanh)
#undef KILN_PW_HOT
    default: pointwise_vec_kernel<T, -1><<<grid, 256, 0, stream>>>(op, a, b, pa, pb, y, total, alpha, beta);
  }
}

}  // namespace

int64_t broadcast_period(const int64_t* dims, const int64_t* strides, int r) {
  int64_t contiguous = 1;
  int d = r - 1;
  for (; d >= 0; --d) {
    if (dims[d] == 1) continue;
    if (strides[d] != contiguous) break;
    contiguous *= dims[d];
  }
  for (; d >= 0; --d)
    if (dims[d] != 1 && strides[d] != 0) return -1;
  return contiguous;
}

cudaError_t launch_pointwise(PointwiseOp op, StorageType st, const void* a, const void* b, void* y, const BroadcastDesc& d,
                             float alpha, float beta, cudaStream_t stream) {
  int64_t total = 1;
  for (int k = 0; k < d.rank; ++k) total *= d.out_dims[k];
  if (total == 0) return cudaSuccess;
  // The vector path: every input periodic (the output's shape, a row / channel broadcast, one
  // element) and 16-byte aligned, fewer than 2^31 elements.
  if (float_storage(st) && total < (int64_t{1} << 31) && aligned16(y)) {
    const int v = st == StorageType::kF32 ? 4 : 8;
    PeriodicIn pa, pb;
    if (periodic_input(a, d.out_dims, d.a_strides, d.rank, total, v, &pa) &&
        (!b || periodic_input(b, d.out_dims, d.b_strides, d.rank, total, v, &pb))) {
      const auto n = static_cast<uint32_t>(total);
      if (st == StorageType::kF16) pointwise_vec<__half>(op, a, b, pa, pb, y, n, alpha, beta, stream);
      else if (st == StorageType::kBF16) pointwise_vec<__nv_bfloat16>(op, a, b, pa, pb, y, n, alpha, beta, stream);
      else pointwise_vec<float>(op, a, b, pa, pb, y, n, alpha, beta, stream);
      return cudaGetLastError();
    }
  }
  // Flat when a is the output's contiguous shape and b is absent, the same, or one element.
  bool a_full = true, b_full = true, b_scalar = true;
  int64_t contiguous = 1;
  for (int k = d.rank - 1; k >= 0; --k) {
    if (d.out_dims[k] != 1) {
      a_full &= d.a_strides[k] == contiguous;
      b_full &= d.b_strides[k] == contiguous;
      b_scalar &= d.b_strides[k] == 0;
    }
    contiguous *= d.out_dims[k];
  }
  if (a_full && (!b || b_full || b_scalar) && float_storage(st)) {
    const bool bs = b && !b_full;
    if (st == StorageType::kF16)
      pointwise_flat_kernel<__half><<<grid_for(total, 256), 256, 0, stream>>>(op, a, b, bs, y, total, alpha, beta);
    else if (st == StorageType::kBF16)
      pointwise_flat_kernel<__nv_bfloat16><<<grid_for(total, 256), 256, 0, stream>>>(op, a, b, bs, y, total, alpha, beta);
    else
      pointwise_flat_kernel<float><<<grid_for(total, 256), 256, 0, stream>>>(op, a, b, bs, y, total, alpha, beta);
    return cudaGetLastError();
  }
  if (total < (int64_t{1} << 31))
    pointwise_kernel<uint32_t><<<grid_for(total, 256), 256, 0, stream>>>(op, st, a, b, y, d, total, alpha, beta);
  else
    pointwise_kernel<int64_t><<<grid_for(total, 256), 256, 0, stream>>>(op, st, a, b, y, d, total, alpha, beta);
  return cudaGetLastError();
}

cudaError_t launch_fused_pointwise(const PwDeviceProgram& p, const PwDevicePointers& in, void* y, StorageType t,
                                   cudaStream_t stream) {
  if (p.num_instrs < 1 || p.num_instrs > ir::kMaxPwInstrs || p.num_inputs > ir::kMaxPwInputs) return cudaErrorInvalidValue;
  int64_t total = 1;
  for (int k = 0; k < p.rank; ++k) total *= p.out_dims[k];
  if (total == 0) return cudaSuccess;
  // The vector path: every input periodic (the output's shape, a [S, H] row table under [B, S, H]
  // — BERT's position embeddings —, a [H] channel vector, one element) and 16-byte aligned.
  if (float_storage(t) && total < (int64_t{1} << 31) && aligned16(y)) {
    const int v = t == StorageType::kF32 ? 4 : 8;
    PeriodicIns per;
    bool ok = true;
    for (int k = 0; k < p.num_inputs && ok; ++k)
      ok = periodic_input(in.in[k], p.out_dims, p.in_strides[k], p.rank, total, v, &per.in[k]);
    if (ok) {
      const unsigned grid = blocks_for_sms(std::max<int64_t>(total / v, 1), 256);
      const auto n = static_cast<uint32_t>(total);
      if (t == StorageType::kF16) fused_pointwise_vec_kernel<__half><<<grid, 256, 0, stream>>>(p, in, per, y, n);
      else if (t == StorageType::kBF16) fused_pointwise_vec_kernel<__nv_bfloat16><<<grid, 256, 0, stream>>>(p, in, per, y, n);
      else fused_pointwise_vec_kernel<float><<<grid, 256, 0, stream>>>(p, in, per, y, n);
      return cudaGetLastError();
    }
  }
  // Flat when every input is the output's contiguous shape or a single element.
  bool flat = float_storage(t);
  uint32_t scalar_mask = 0;
  for (int k = 0; k < p.num_inputs && flat; ++k) {
    bool full = true, scalar = true;
    int64_t contiguous = 1;
    for (int d = p.rank - 1; d >= 0; --d) {
      if (p.out_dims[d] != 1) {
        full &= p.in_strides[k][d] == contiguous;
        scalar &= p.in_strides[k][d] == 0;
      }
      contiguous *= p.out_dims[d];
    }
    if (!full && scalar) scalar_mask |= 1u << k;
    flat = full || scalar;
  }
  if (flat) {
    if (t == StorageType::kF16)
      fused_pointwise_flat_kernel<__half><<<grid_for(total, 256), 256, 0, stream>>>(p, in, scalar_mask, y, total);
    else if (t == StorageType::kBF16)
      fused_pointwise_flat_kernel<__nv_bfloat16><<<grid_for(total, 256), 256, 0, stream>>>(p, in, scalar_mask, y, total);
    else
      fused_pointwise_flat_kernel<float><<<grid_for(total, 256), 256, 0, stream>>>(p, in, scalar_mask, y, total);
    return cudaGetLastError();
  }
  if (total < (int64_t{1} << 31))
    fused_pointwise_kernel<uint32_t><<<grid_for(total, 256), 256, 0, stream>>>(p, in, y, t, total);
  else
    fused_pointwise_kernel<int64_t><<<grid_for(total, 256), 256, 0, stream>>>(p, in, y, t, total);
  return cudaGetLastError();
}

cudaError_t launch_reformat(const void* src, StorageType src_t, bool src_nhwc, void* dst, StorageType dst_t,
                            bool dst_nhwc, int64_t n, int64_t c, int64_t h, int64_t w, int64_t dst_c, cudaStream_t stream) {
  if (dst_c < c) return cudaErrorInvalidValue;
  const int64_t total = n * dst_c * h * w;
  if (total == 0) return cudaSuccess;
  const bool small = total < (int64_t{1} << 31);
  // Same element order (same layout, or a layout-free shape) and no padding: a dtype conversion.
  if (dst_c == c && (src_nhwc == dst_nhwc || h * w == 1 || c == 1) &&
      convert8(src, src_t, dst, dst_t, total, stream))
    return cudaGetLastError();
  if (small && !src_nhwc && dst_nhwc && dst_c <= 16) {
    pixels_to_nhwc_kernel<<<grid_for(n * h * w, 256), 256, 0, stream>>>(
        src, src_t, dst, dst_t, static_cast<uint32_t>(n), static_cast<uint32_t>(c), static_cast<uint32_t>(h * w),
        static_cast<uint32_t>(dst_c));
  } else if (small) {
    reformat_kernel<uint32_t><<<grid_for(total, 256), 256, 0, stream>>>(
        src, src_t, src_nhwc, dst, dst_t, dst_nhwc, static_cast<uint32_t>(n), static_cast<uint32_t>(c),
        static_cast<uint32_t>(h), static_cast<uint32_t>(w), static_cast<uint32_t>(dst_c));
  } else {
    reformat_kernel<int64_t><<<grid_for(total, 256), 256, 0, stream>>>(src, src_t, src_nhwc, dst, dst_t, dst_nhwc, n, c,
                                                                       h, w, dst_c);
  }
  return cudaGetLastError();
}

namespace {
__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}
}  // namespace

cudaError_t launch_spin(unsigned long long ns, cudaStream_t stream) {
  spin_kernel<<<1, 1, 0, stream>>>(ns);
  return cudaGetLastError();
}

cudaError_t launch_convert(const void* src, StorageType src_t, void* dst, StorageType dst_t, int64_t count,
                           cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (convert8(src, src_t, dst, dst_t, count, stream)) return cudaGetLastError();
  convert_kernel<<<grid_for(count, 256), 256, 0, stream>>>(src, src_t, dst, dst_t, count);
  return cudaGetLastError();
}

cudaError_t launch_softmax(const void* x, void* y, StorageType st, int64_t rows, int64_t cols, bool log, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (float_storage(st) && cols % 8 == 0 && cols <= kSoftmaxWarpMax && rows < (int64_t{1} << 31) && aligned16(x) &&
      aligned16(y)) {
    if (st == StorageType::kF16) softmax_warp<__half>(x, y, rows, cols, log, stream);
    else if (st == StorageType::kBF16) softmax_warp<__nv_bfloat16>(x, y, rows, cols, log, stream);
    else softmax_warp<float>(x, y, rows, cols, log, stream);
    return cudaGetLastError();
  }
  const int block = 256;
  softmax_kernel<<<static_cast<unsigned>(rows), block, block * sizeof(float), stream>>>(x, y, st, cols, log);
  return cudaGetLastError();
}

cudaError_t launch_concat_part(const void* src, void* dst, int elem_bytes, int64_t outer, int64_t inner_in,
                               int64_t inner_out, int64_t offset, cudaStream_t stream) {
  const int64_t total = outer * inner_in;
  if (total == 0) return cudaSuccess;
  concat_kernel<<<grid_for(total, 256), 256, 0, stream>>>(static_cast<const char*>(src), static_cast<char*>(dst),
                                                          elem_bytes, outer, inner_in, inner_out, offset);
  return cudaGetLastError();
}

cudaError_t launch_pool(const void* x, void* y, StorageType t, const PoolDesc& d, cudaStream_t stream) {
  const int64_t total = d.n * d.c * d.oh * d.ow;
  if (total == 0) return cudaSuccess;
  if (d.kh <= 0 || d.kw <= 0 || d.stride_h <= 0 || d.stride_w <= 0) return cudaErrorInvalidValue;
  pool_kernel<<<grid_for(total, 256), 256, 0, stream>>>(x, y, t, d);
  return cudaGetLastError();
}

cudaError_t launch_bias_act(void* y, const void* bias, const void* z, StorageType t, int64_t count, int64_t channels,
                            int64_t spatial, bool nhwc, PointwiseOp act, float alpha, float beta, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (channels <= 0 || spatial <= 0 || !bias) return cudaErrorInvalidValue;
  bias_act_kernel<<<grid_for(count, 256), 256, 0, stream>>>(y, bias, z, t, count, channels, spatial, nhwc, act, alpha,
                                                            beta);
  return cudaGetLastError();
}

cudaError_t launch_split_part(const void* src, void* dst, int elem_bytes, int64_t outer, int64_t inner_in,
                              int64_t inner_out, int64_t offset, cudaStream_t stream) {
  const int64_t total = outer * inner_out;
  if (total == 0) return cudaSuccess;
  split_kernel<<<grid_for(total, 256), 256, 0, stream>>>(static_cast<const char*>(src), static_cast<char*>(dst),
                                                         elem_bytes, outer, inner_in, inner_out, offset);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
