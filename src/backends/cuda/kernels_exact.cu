// Kernels on exactly typed tensors (kernels_exact.h): one broadcast-elementwise template serves
// every comparison, logical op, float predicate and integer arithmetic op (the op is a functor,
// the element type a template parameter); select, cast, range, cumsum and trilu are one template
// each. Semantics follow the CPU reference kernels (src/backends/cpu/ops_elementwise_binary.cc,
// ops_elementwise_unary.cc, ops_movement_shape.cc, ops_movement_layout.cc, ops_reduce_argtopk.cc).
// Bool is uint8_t 0/1; float64 is double, computed in double (docs/decisions/0075). Grid-stride
// loops over 64-bit indices.
#include <limits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "backends/cuda/kernels_exact.h"
#include "backends/cuda/launch_config.cuh"
#include "backends/cuda/storage_access.cuh"

namespace kiln::cuda {
namespace {

using Bool = uint8_t;

// A value as compared / converted: 16-bit floats widen to float (exact), the rest as they are.
template <typename T>
__device__ __forceinline__ auto wide(T x) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(x);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(x);
  else return x;
}

// A double rounds to half / bfloat16 once (as the CPU reference's Cast does), not through float.
// uint64 follows the CPU's Cast exactly: to a float type through double (load_as_double); from a
// float through int64 (double_to_int64: NaN and out-of-range values give INT64_MIN), then its bits.
template <typename Y, typename X>
__device__ __forceinline__ Y convert(X x) {
  const auto v = wide(x);
  constexpr bool kDouble = std::is_same_v<std::remove_const_t<decltype(v)>, double>;
  constexpr bool kFloatSrc = !std::is_integral_v<std::remove_const_t<decltype(v)>>;
  if constexpr (std::is_same_v<X, uint64_t> && !std::is_integral_v<Y>) {
    return convert<Y>(static_cast<double>(x));
  } else if constexpr (std::is_same_v<Y, uint64_t> && kFloatSrc) {
    const double d = static_cast<double>(v);
    const bool out = d != d || d >= 9.2233720368547758e18 || d < -9.2233720368547758e18;
    return out ? uint64_t{1} << 63 : static_cast<uint64_t>(static_cast<int64_t>(d));  // INT64_MIN's bits
  } else if constexpr (std::is_same_v<Y, Bool>) return v != 0 ? Bool{1} : Bool{0};
  else if constexpr (std::is_same_v<Y, __half> && kDouble) return __double2half(v);
  else if constexpr (std::is_same_v<Y, __nv_bfloat16> && kDouble) return __double2bfloat16(v);
  else if constexpr (std::is_same_v<Y, __half>) return __float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<Y, __nv_bfloat16>) return __float2bfloat16_rn(static_cast<float>(v));
  else return static_cast<Y>(v);
}

// ---------------------------------------------------------------- elementwise functors
template <typename T> using Unsigned = std::make_unsigned_t<T>;

struct EqualF { template <typename T> __device__ Bool operator()(T a, T b) const { return wide(a) == wide(b); } };
struct LessF { template <typename T> __device__ Bool operator()(T a, T b) const { return wide(a) < wide(b); } };
struct LessEqF { template <typename T> __device__ Bool operator()(T a, T b) const { return wide(a) <= wide(b); } };
struct GreaterF { template <typename T> __device__ Bool operator()(T a, T b) const { return wide(a) > wide(b); } };
struct GreaterEqF { template <typename T> __device__ Bool operator()(T a, T b) const { return wide(a) >= wide(b); } };
struct AndF { __device__ Bool operator()(Bool a, Bool b) const { return (a != 0) && (b != 0); } };
struct OrF { __device__ Bool operator()(Bool a, Bool b) const { return (a != 0) || (b != 0); } };
struct XorF { __device__ Bool operator()(Bool a, Bool b) const { return (a != 0) != (b != 0); } };
struct NotF { __device__ Bool operator()(Bool a, Bool) const { return a == 0; } };
// A float predicate's operand: a double as it is (1e300 is finite), anything else as float.
template <typename T>
__device__ __forceinline__ auto as_fp(T a) {
  if constexpr (std::is_same_v<T, double>) return a;
  else return static_cast<float>(wide(a));
}
struct IsNaNF { template <typename T> __device__ Bool operator()(T a, T) const { return isnan(as_fp(a)); } };
struct IsInfF {
  int sign;  // 0: both, 1: +inf only, -1: -inf only
  template <typename T> __device__ Bool operator()(T a, T) const {
    const auto v = as_fp(a);
    return isinf(v) && (sign == 0 || (sign > 0) == (v > 0));
  }
};
// The arithmetic functors serve int32 / int64 (wrapping through the unsigned type) and double
// (IEEE arithmetic; Min / Max propagate NaN as the CPU reference's numpy-style Max / Min).
template <typename T> constexpr bool kIsDouble = std::is_same_v<T, double>;
struct AddF { template <typename T> __device__ T operator()(T a, T b) const { if constexpr (kIsDouble<T>) return a + b; else return static_cast<T>(static_cast<Unsigned<T>>(a) + static_cast<Unsigned<T>>(b)); } };
struct SubF { template <typename T> __device__ T operator()(T a, T b) const { if constexpr (kIsDouble<T>) return a - b; else return static_cast<T>(static_cast<Unsigned<T>>(a) - static_cast<Unsigned<T>>(b)); } };
struct MulF { template <typename T> __device__ T operator()(T a, T b) const { if constexpr (kIsDouble<T>) return a * b; else return static_cast<T>(static_cast<Unsigned<T>>(a) * static_cast<Unsigned<T>>(b)); } };
struct NegF { template <typename T> __device__ T operator()(T a, T) const { if constexpr (kIsDouble<T>) return -a; else return static_cast<T>(Unsigned<T>(0) - static_cast<Unsigned<T>>(a)); } };
struct AbsF { template <typename T> __device__ T operator()(T a, T) const { if constexpr (kIsDouble<T>) return fabs(a); else if constexpr (std::is_signed_v<T>) return a < 0 ? NegF{}(a, a) : a; else return a; } };
struct MinF { template <typename T> __device__ T operator()(T a, T b) const { if constexpr (kIsDouble<T>) { if (a != a || b != b) return a + b; } return b < a ? b : a; } };
struct MaxF { template <typename T> __device__ T operator()(T a, T b) const { if constexpr (kIsDouble<T>) { if (a != a || b != b) return a + b; } return a < b ? b : a; } };
struct DivF {
  template <typename T> __device__ T operator()(T a, T b) const {
    if constexpr (kIsDouble<T>) return a / b;
    if (b == 0) return 0;
    if (std::is_signed_v<T> && b == T(-1)) return NegF{}(a, a);
    return a / b;
  }
};
struct PowF {
  template <typename T> __device__ T operator()(T a, T b) const {
    if constexpr (kIsDouble<T>) {
      // An integral exponent up to 1024 by squaring: exact while the powers are representable
      // (glibc's pow, the CPU reference's, is; CUDA's may be an ulp off, which an integer Pow's
      // truncation would show: 3^2 as 8.999...). Else pow.
      if (b == trunc(b) && fabs(b) <= 1024) {
        double r = 1, x = a;
        for (int64_t e = static_cast<int64_t>(fabs(b)); e; e >>= 1) {
          if (e & 1) r *= x;
          x *= x;
        }
        return b < 0 ? 1 / r : r;
      }
      return pow(a, b);
    } else {
      return int_pow(a, b);
    }
  }
  template <typename T> __device__ T int_pow(T a, T b) const {
    if (std::is_signed_v<T> && b < T(0)) {
      if (a == 1) return 1;
      if (a == T(-1)) return (b % 2) ? T(-1) : T(1);
      return 0;
    }
    Unsigned<T> r = 1, x = static_cast<Unsigned<T>>(a);
    for (T e = b; e; e >>= 1) {
      if (e & 1) r *= x;
      x *= x;
    }
    return static_cast<T>(r);
  }
};
// BitShift (unsigned types; a shift by the bit width or more gives 0, as the CPU reference).
struct ShlF { template <typename T> __device__ T operator()(T a, T b) const { return static_cast<uint64_t>(b) >= sizeof(T) * 8 ? T(0) : static_cast<T>(static_cast<Unsigned<T>>(a) << b); } };
struct ShrF { template <typename T> __device__ T operator()(T a, T b) const { return static_cast<uint64_t>(b) >= sizeof(T) * 8 ? T(0) : static_cast<T>(static_cast<Unsigned<T>>(a) >> b); } };
struct ModF {
  bool c_style;  // fmod = 1: the dividend's sign
  template <typename T> __device__ T operator()(T a, T b) const {
    T r;
    if constexpr (kIsDouble<T>) {
      r = fmod(a, b);  // the CPU reference's std::fmod (a zero divisor gives NaN)
    } else {
      if (b == 0 || (std::is_signed_v<T> && b == T(-1))) return 0;
      r = a % b;
    }
    if constexpr (std::is_signed_v<T>)  // unsigned operands share the sign
      if (!c_style && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    return r;
  }
};

template <typename T, typename R, typename F>
__global__ void elementwise_kernel(const T* __restrict__ a, const T* __restrict__ b, R* __restrict__ y, BroadcastDesc d,
                                   int64_t total, F f) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rem = i, ia = 0, ib = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t q = rem % d.out_dims[k];
      rem /= d.out_dims[k];
      ia += q * d.a_strides[k];
      ib += q * d.b_strides[k];
    }
    y[i] = f(a[ia], b ? b[ib] : a[ia]);
  }
}

template <typename T, typename R, typename F>
cudaError_t run(const void* a, const void* b, void* y, const BroadcastDesc& d, int64_t total, F f, cudaStream_t s) {
  elementwise_kernel<T, R, F><<<blocks_for(total), kThreads, 0, s>>>(static_cast<const T*>(a), static_cast<const T*>(b),
                                                                     static_cast<R*>(y), d, total, f);
  return cudaGetLastError();
}

// Calls f(T{}) with the C++ type of storage `t`: every type but bool, or (with_any) bool too.
template <typename F>
cudaError_t with_numeric(StorageType t, F f) {
  return with_storage_type(t, false, f);
}
template <typename F>
cudaError_t with_any(StorageType t, F f) {
  return with_storage_type(t, true, f);
}

template <typename F>
cudaError_t comparison(StorageType t, const void* a, const void* b, void* y, const BroadcastDesc& d, int64_t n, F f,
                       cudaStream_t s) {
  return with_numeric(t, [&](auto tag) { return run<decltype(tag), Bool>(a, b, y, d, n, f, s); });
}
template <typename F>
cudaError_t float_predicate(StorageType t, const void* a, void* y, const BroadcastDesc& d, int64_t n, F f, cudaStream_t s) {
  if (storage_is_int(t) || t == StorageType::kBool || t == StorageType::kU64) return cudaErrorInvalidValue;
  return with_numeric(t, [&](auto tag) { return run<decltype(tag), Bool>(a, nullptr, y, d, n, f, s); });
}
// int32 / int64 and float64 arithmetic.
template <typename F>
cudaError_t integer(StorageType t, const void* a, const void* b, void* y, const BroadcastDesc& d, int64_t n, F f,
                    cudaStream_t s) {
  if (t == StorageType::kI32) return run<int32_t, int32_t>(a, b, y, d, n, f, s);
  if (t == StorageType::kI64) return run<int64_t, int64_t>(a, b, y, d, n, f, s);
  if (t == StorageType::kF64) return run<double, double>(a, b, y, d, n, f, s);
  if (t == StorageType::kU64) return run<uint64_t, uint64_t>(a, b, y, d, n, f, s);
  return cudaErrorInvalidValue;
}
template <typename F>
cudaError_t logical(StorageType t, const void* a, const void* b, void* y, const BroadcastDesc& d, int64_t n, F f,
                    cudaStream_t s) {
  if (t != StorageType::kBool) return cudaErrorInvalidValue;
  return run<Bool, Bool>(a, b, y, d, n, f, s);
}

// ---------------------------------------------------------------- select, cast, range, cumsum, trilu
template <typename T>
__global__ void select_kernel(const Bool* __restrict__ c, const T* __restrict__ a, const T* __restrict__ b,
                              T* __restrict__ y, SelectDesc s, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rem = i, ia = 0, ib = 0, ic = 0;
    for (int k = s.d.rank - 1; k >= 0; --k) {
      const int64_t q = rem % s.d.out_dims[k];
      rem /= s.d.out_dims[k];
      ia += q * s.d.a_strides[k];
      ib += q * s.d.b_strides[k];
      ic += q * s.c_strides[k];
    }
    y[i] = c[ic] ? a[ia] : b[ib];
  }
}

template <typename X, typename Y>
__global__ void cast_kernel(const X* __restrict__ x, Y* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = convert<Y>(x[i]);
}

template <typename T>
__global__ void range_kernel(const T* start, const T* delta, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (std::is_integral_v<T>)
      y[i] = static_cast<T>(static_cast<Unsigned<T>>(*start) + static_cast<Unsigned<T>>(i) * static_cast<Unsigned<T>>(*delta));
    else
      y[i] = convert<T>(static_cast<double>(wide(*start)) + static_cast<double>(i) * static_cast<double>(wide(*delta)));
  }
}

template <typename T>
__global__ void cumsum_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t n, int64_t inner,
                              bool exclusive, bool reverse) {
  using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, std::conditional_t<kIsDouble<T>, double, float>>;
  for (int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; col < outer * inner;
       col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = (col / inner) * n * inner + col % inner;
    Acc acc = 0;
    for (int64_t step = 0; step < n; ++step) {
      const int64_t at = base + (reverse ? n - 1 - step : step) * inner;
      const Acc cur = static_cast<Acc>(wide(x[at]));
      if (exclusive) y[at] = convert<T>(acc);
      if constexpr (std::is_integral_v<T>) acc = static_cast<Acc>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(cur));
      else acc += cur;
      if (!exclusive) y[at] = convert<T>(acc);
    }
  }
}

template <typename T>
__global__ void trilu_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t total, int64_t rows, int64_t cols,
                             int64_t k, const int64_t* k_dev, bool upper) {
  if (k_dev) k = *k_dev;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i % cols, r = (i / cols) % rows;
    const bool keep = upper ? j - r >= k : j - r <= k;
    y[i] = keep ? x[i] : T{0};
  }
}

// One (value, index) candidate of an arg reduction is better than another: NaN first (numpy),
// then the larger (`max`) or smaller value, then on equal values the lower index (the higher with
// `last`). A total order, so any reduction tree gives arg_extreme_kernel's sequential answer.
template <typename W>
__device__ __forceinline__ bool arg_better(W a, int64_t ka, W b, int64_t kb, bool max, bool last) {
  const bool na = a != a, nb = b != b;
  if (na != nb) return na;
  if (!na && a != b) return max ? a > b : a < b;
  return last ? ka > kb : ka < kb;
}

constexpr int kArgRowsThreads = 1024;
constexpr int64_t kArgRowsMin = 1024;  // row length from which a block per row beats a thread per row

// One candidate of a row, folded into (best, best_k) by arg_better (which orders ties by index, so
// the order the candidates come in does not matter).
template <typename W>
__device__ __forceinline__ void arg_take(W c, int64_t k, W& best, int64_t& best_k, bool max, bool last) {
  if (best_k < 0 || arg_better(c, k, best, best_k, max, last)) {
    best = c;
    best_k = k;
  }
}

// inner == 1: y[o] = the arg extreme of row o (n contiguous values); a block of 1024 threads per row.
// Each thread reads 16-byte vectors (8 fp16/bf16 or 4 fp32/int32 values; the row's unaligned head and
// tail one by one), so a 128,256-entry fp16 logits row takes 16 loads per thread instead of 500
// dependent ones (H200, 8 rows: 0.19 ms before), then a shared-memory tree.
template <typename T>
__global__ void arg_extreme_rows_kernel(const T* __restrict__ x, int64_t* __restrict__ y, int64_t outer, int64_t n,
                                        bool max, bool last) {
  using W = decltype(wide(T()));
  constexpr int kVec = 16 / sizeof(T);
  __shared__ W sv[kArgRowsThreads];
  __shared__ int64_t sk[kArgRowsThreads];
  for (int64_t row = blockIdx.x; row < outer; row += gridDim.x) {
    const T* p = x + row * n;
    W best = wide(p[0]);
    int64_t best_k = -1;
    // Elements before the first 16-byte boundary, then whole vectors, then the tail.
    const int64_t lead = static_cast<int64_t>((16 - reinterpret_cast<uintptr_t>(p) % 16) % 16) / static_cast<int64_t>(sizeof(T));
    const int64_t head = lead < n ? lead : n;
    const int64_t vecs = reinterpret_cast<uintptr_t>(p) % sizeof(T) == 0 ? (n - head) / kVec : 0;
    for (int64_t k = threadIdx.x; k < head; k += blockDim.x) arg_take(wide(p[k]), k, best, best_k, max, last);
    const uint4* pv = reinterpret_cast<const uint4*>(p + head);
    for (int64_t v = threadIdx.x; v < vecs; v += blockDim.x) {
      const uint4 raw = pv[v];
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int i = 0; i < kVec; ++i) arg_take(wide(e[i]), head + v * kVec + i, best, best_k, max, last);
    }
    for (int64_t k = head + vecs * kVec + threadIdx.x; k < n; k += blockDim.x)
      arg_take(wide(p[k]), k, best, best_k, max, last);
    sv[threadIdx.x] = best;
    sk[threadIdx.x] = best_k;
    __syncthreads();
    for (int half = kArgRowsThreads / 2; half > 0; half /= 2) {
      if (static_cast<int>(threadIdx.x) < half && sk[threadIdx.x + half] >= 0 &&
          (sk[threadIdx.x] < 0 ||
           arg_better(sv[threadIdx.x + half], sk[threadIdx.x + half], sv[threadIdx.x], sk[threadIdx.x], max, last))) {
        sv[threadIdx.x] = sv[threadIdx.x + half];
        sk[threadIdx.x] = sk[threadIdx.x + half];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) y[row] = sk[0];
    __syncthreads();
  }
}

template <typename T>
__global__ void arg_extreme_kernel(const T* __restrict__ x, int64_t* __restrict__ y, int64_t outer, int64_t n,
                                   int64_t inner, bool max, bool last) {
  for (int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; col < outer * inner;
       col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T* p = x + (col / inner) * n * inner + col % inner;
    auto best = wide(p[0]);
    int64_t best_k = 0;
    for (int64_t k = 1; k < n; ++k) {
      const auto c = wide(p[k * inner]);
      if (c != c) {  // NaN (never true for integers)
        if (best == best || last) best_k = k;
        if (best == best) best = c;
        continue;
      }
      if (best != best) continue;
      if ((max ? c > best : c < best) || (last && c == best)) {
        best = c;
        best_k = k;
      }
    }
    y[col] = best_k;
  }
}

template <typename T>
__global__ void int_reduce_kernel(const T* __restrict__ x, T* __restrict__ y, int max, int64_t outer, int64_t red,
                                  int64_t inner) {
  for (int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; col < outer * inner;
       col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T* p = x + (col / inner) * red * inner + col % inner;
    Unsigned<T> sum = 0;
    const T lowest = static_cast<T>(Unsigned<T>(1) << (sizeof(T) * 8 - 1));  // two's complement MIN
    T ext = max > 0 ? lowest : static_cast<T>(~lowest);
    for (int64_t k = 0; k < red; ++k) {
      const T v = p[k * inner];
      sum += static_cast<Unsigned<T>>(v);
      ext = max > 0 ? (v > ext ? v : ext) : (v < ext ? v : ext);
    }
    y[col] = max == 0 ? static_cast<T>(sum) : ext;
  }
}

// float64 reductions: one thread per output, in order (launch_f64_reduce).
__global__ void f64_reduce_kernel(const double* __restrict__ x, double* __restrict__ y, ReduceKind k, int64_t outer,
                                  int64_t red, int64_t inner) {
  for (int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; col < outer * inner;
       col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double* p = x + (col / inner) * red * inner + col % inner;
    if (k == ReduceKind::kLogSumExp) {
      double m = -INFINITY;
      for (int64_t r = 0; r < red; ++r) {
        const double v = p[r * inner];
        m = (m != m || v != v) ? m + v : fmax(m, v);
      }
      if (m != m || isinf(m)) {
        y[col] = m;
        continue;
      }
      double acc = 0;
      for (int64_t r = 0; r < red; ++r) acc += exp(p[r * inner] - m);
      y[col] = m + log(acc);
      continue;
    }
    double acc = k == ReduceKind::kMax ? -INFINITY : (k == ReduceKind::kMin ? INFINITY : (k == ReduceKind::kProd ? 1.0 : 0.0));
    for (int64_t r = 0; r < red; ++r) {
      double v = p[r * inner];
      switch (k) {
        case ReduceKind::kMax: acc = (acc != acc || v != v) ? acc + v : fmax(acc, v); break;
        case ReduceKind::kMin: acc = (acc != acc || v != v) ? acc + v : fmin(acc, v); break;
        case ReduceKind::kProd: acc *= v; break;
        case ReduceKind::kL1: acc += fabs(v); break;
        case ReduceKind::kL2: case ReduceKind::kSumSquare: acc += v * v; break;
        default: acc += v; break;
      }
    }
    if (k == ReduceKind::kMean) acc /= static_cast<double>(red);
    else if (k == ReduceKind::kL2) acc = sqrt(acc);
    else if (k == ReduceKind::kLogSum) acc = log(acc);
    y[col] = acc;
  }
}

template <typename F>
cudaError_t with_bytes(int elem_bytes, F f) {
  switch (elem_bytes) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    default: return cudaErrorInvalidValue;
  }
}

int64_t total_of(const BroadcastDesc& d) {
  int64_t total = 1;
  for (int k = 0; k < d.rank; ++k) total *= d.out_dims[k];
  return total;
}

}  // namespace

bool exact_op_is_unary(ExactOp op) {
  return op == ExactOp::kNot || op == ExactOp::kIsNaN || op == ExactOp::kIsInf || op == ExactOp::kIsPosInf ||
         op == ExactOp::kIsNegInf || op == ExactOp::kNeg || op == ExactOp::kAbs;
}

bool exact_op_is_predicate(ExactOp op) { return static_cast<int>(op) <= static_cast<int>(ExactOp::kIsNegInf); }

const char* exact_op_name(ExactOp op) {
  switch (op) {
    case ExactOp::kEqual: return "equal";
    case ExactOp::kLess: return "less";
    case ExactOp::kLessOrEqual: return "less_or_equal";
    case ExactOp::kGreater: return "greater";
    case ExactOp::kGreaterOrEqual: return "greater_or_equal";
    case ExactOp::kAnd: return "and";
    case ExactOp::kOr: return "or";
    case ExactOp::kXor: return "xor";
    case ExactOp::kNot: return "not";
    case ExactOp::kIsNaN: return "isnan";
    case ExactOp::kIsInf: return "isinf";
    case ExactOp::kIsPosInf: return "isinf+";
    case ExactOp::kIsNegInf: return "isinf-";
    case ExactOp::kAdd: return "add";
    case ExactOp::kSub: return "sub";
    case ExactOp::kMul: return "mul";
    case ExactOp::kDiv: return "div";
    case ExactOp::kMod: return "mod";
    case ExactOp::kFmod: return "fmod";
    case ExactOp::kNeg: return "neg";
    case ExactOp::kAbs: return "abs";
    case ExactOp::kMin: return "min";
    case ExactOp::kMax: return "max";
    case ExactOp::kPow: return "pow";
    case ExactOp::kShl: return "shl";
    case ExactOp::kShr: return "shr";
  }
  return "?";
}

cudaError_t launch_exact_elementwise(ExactOp op, StorageType t, const void* a, const void* b, void* y,
                                     const BroadcastDesc& d, cudaStream_t s) {
  const int64_t n = total_of(d);
  if (n == 0) return cudaSuccess;
  if (exact_op_is_unary(op)) b = nullptr;
  switch (op) {
    case ExactOp::kEqual:
      if (t == StorageType::kBool) return run<Bool, Bool>(a, b, y, d, n, EqualF{}, s);
      return comparison(t, a, b, y, d, n, EqualF{}, s);
    case ExactOp::kLess: return comparison(t, a, b, y, d, n, LessF{}, s);
    case ExactOp::kLessOrEqual: return comparison(t, a, b, y, d, n, LessEqF{}, s);
    case ExactOp::kGreater: return comparison(t, a, b, y, d, n, GreaterF{}, s);
    case ExactOp::kGreaterOrEqual: return comparison(t, a, b, y, d, n, GreaterEqF{}, s);
    case ExactOp::kAnd: return logical(t, a, b, y, d, n, AndF{}, s);
    case ExactOp::kOr: return logical(t, a, b, y, d, n, OrF{}, s);
    case ExactOp::kXor: return logical(t, a, b, y, d, n, XorF{}, s);
    case ExactOp::kNot: return logical(t, a, b, y, d, n, NotF{}, s);
    case ExactOp::kIsNaN: return float_predicate(t, a, y, d, n, IsNaNF{}, s);
    case ExactOp::kIsInf: return float_predicate(t, a, y, d, n, IsInfF{0}, s);
    case ExactOp::kIsPosInf: return float_predicate(t, a, y, d, n, IsInfF{1}, s);
    case ExactOp::kIsNegInf: return float_predicate(t, a, y, d, n, IsInfF{-1}, s);
    case ExactOp::kAdd: return integer(t, a, b, y, d, n, AddF{}, s);
    case ExactOp::kSub: return integer(t, a, b, y, d, n, SubF{}, s);
    case ExactOp::kMul: return integer(t, a, b, y, d, n, MulF{}, s);
    case ExactOp::kDiv: return integer(t, a, b, y, d, n, DivF{}, s);
    case ExactOp::kMod: return integer(t, a, b, y, d, n, ModF{false}, s);
    case ExactOp::kFmod: return integer(t, a, b, y, d, n, ModF{true}, s);
    case ExactOp::kNeg: return integer(t, a, b, y, d, n, NegF{}, s);
    case ExactOp::kAbs: return integer(t, a, b, y, d, n, AbsF{}, s);
    case ExactOp::kMin: return integer(t, a, b, y, d, n, MinF{}, s);
    case ExactOp::kMax: return integer(t, a, b, y, d, n, MaxF{}, s);
    case ExactOp::kPow: return integer(t, a, b, y, d, n, PowF{}, s);
    case ExactOp::kShl:
      if (t != StorageType::kU64) return cudaErrorInvalidValue;
      return run<uint64_t, uint64_t>(a, b, y, d, n, ShlF{}, s);
    case ExactOp::kShr:
      if (t != StorageType::kU64) return cudaErrorInvalidValue;
      return run<uint64_t, uint64_t>(a, b, y, d, n, ShrF{}, s);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_select(const void* c, const void* a, const void* b, void* y, int elem_bytes, const SelectDesc& sd,
                          cudaStream_t s) {
  const int64_t n = total_of(sd.d);
  if (n == 0) return cudaSuccess;
  return with_bytes(elem_bytes, [&](auto tag) {
    using T = decltype(tag);
    select_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const Bool*>(c), static_cast<const T*>(a),
                                                        static_cast<const T*>(b), static_cast<T*>(y), sd, n);
    return cudaGetLastError();
  });
}

cudaError_t launch_cast(const void* x, StorageType xt, void* y, StorageType yt, int64_t count, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return with_any(xt, [&](auto xtag) {
    return with_any(yt, [&](auto ytag) {
      using X = decltype(xtag);
      using Y = decltype(ytag);
      cast_kernel<X, Y><<<blocks_for(count), kThreads, 0, s>>>(static_cast<const X*>(x), static_cast<Y*>(y), count);
      return cudaGetLastError();
    });
  });
}

// The CPU reference's saturating_int (an integer Pow with a float exponent): NaN gives 0, values
// at or past the type's bounds give the bound, others truncate toward zero.
template <typename Y>
__global__ void saturating_cast_kernel(const double* __restrict__ x, Y* __restrict__ y, int64_t n, Y lo, Y hi) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = x[i];
    Y r;
    if (v != v) r = Y(0);
    else if (v <= static_cast<double>(lo)) r = lo;
    else if (v >= static_cast<double>(hi)) r = hi;
    else r = static_cast<Y>(v);
    y[i] = r;
  }
}

cudaError_t launch_saturating_cast(const double* x, void* y, StorageType yt, int64_t count, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  if (yt == StorageType::kI32)
    saturating_cast_kernel<int32_t><<<blocks_for(count), kThreads, 0, s>>>(
        x, static_cast<int32_t*>(y), count, std::numeric_limits<int32_t>::lowest(), std::numeric_limits<int32_t>::max());
  else if (yt == StorageType::kI64)
    saturating_cast_kernel<int64_t><<<blocks_for(count), kThreads, 0, s>>>(
        x, static_cast<int64_t*>(y), count, std::numeric_limits<int64_t>::lowest(), std::numeric_limits<int64_t>::max());
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t launch_range(const void* start, const void* delta, void* y, StorageType t, int64_t count, cudaStream_t s) {
  if (count == 0) return cudaSuccess;
  return with_numeric(t, [&](auto tag) {
    using T = decltype(tag);
    range_kernel<T><<<blocks_for(count), kThreads, 0, s>>>(static_cast<const T*>(start), static_cast<const T*>(delta),
                                                           static_cast<T*>(y), count);
    return cudaGetLastError();
  });
}

cudaError_t launch_cumsum(const void* x, void* y, StorageType t, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                          bool reverse, cudaStream_t s) {
  if (outer * n * inner == 0) return cudaSuccess;
  return with_numeric(t, [&](auto tag) {
    using T = decltype(tag);
    cumsum_kernel<T><<<blocks_for(outer * inner), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), outer,
                                                                   n, inner, exclusive, reverse);
    return cudaGetLastError();
  });
}

cudaError_t launch_arg_extreme(const void* x, StorageType t, int64_t* y, int64_t outer, int64_t n, int64_t inner, bool max,
                               bool last, cudaStream_t s) {
  if (outer * inner == 0) return cudaSuccess;
  if (n < 1) return cudaErrorInvalidValue;
  return with_numeric(t, [&](auto tag) {
    using T = decltype(tag);
    if (inner == 1 && n >= kArgRowsMin) {  // long contiguous rows (an LLM's logits): a block per row
      const int64_t grid = std::min<int64_t>(outer, 65535);
      arg_extreme_rows_kernel<T><<<static_cast<unsigned>(grid), kArgRowsThreads, 0, s>>>(static_cast<const T*>(x), y, outer,
                                                                                        n, max, last);
      return cudaGetLastError();
    }
    arg_extreme_kernel<T><<<blocks_for(outer * inner), kThreads, 0, s>>>(static_cast<const T*>(x), y, outer, n, inner,
                                                                        max, last);
    return cudaGetLastError();
  });
}

cudaError_t launch_int_reduce(const void* x, void* y, StorageType t, int max, int64_t outer, int64_t red, int64_t inner,
                              cudaStream_t s) {
  if (outer * inner == 0) return cudaSuccess;
  if (t == StorageType::kI32) {
    int_reduce_kernel<int32_t><<<blocks_for(outer * inner), kThreads, 0, s>>>(
        static_cast<const int32_t*>(x), static_cast<int32_t*>(y), max, outer, red, inner);
  } else if (t == StorageType::kI64) {
    int_reduce_kernel<int64_t><<<blocks_for(outer * inner), kThreads, 0, s>>>(
        static_cast<const int64_t*>(x), static_cast<int64_t*>(y), max, outer, red, inner);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_f64_reduce(const double* x, double* y, ReduceKind kind, int64_t outer, int64_t red, int64_t inner,
                              cudaStream_t s) {
  if (outer * inner == 0) return cudaSuccess;
  f64_reduce_kernel<<<blocks_for(outer * inner), kThreads, 0, s>>>(x, y, kind, outer, red, inner);
  return cudaGetLastError();
}

cudaError_t launch_trilu(const void* x, void* y, int elem_bytes, int64_t batch, int64_t rows, int64_t cols, int64_t k,
                         const int64_t* k_dev, bool upper, cudaStream_t s) {
  const int64_t total = batch * rows * cols;
  if (total == 0) return cudaSuccess;
  return with_bytes(elem_bytes, [&](auto tag) {
    using T = decltype(tag);
    trilu_kernel<T><<<blocks_for(total), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), total, rows,
                                                          cols, k, k_dev, upper);
    return cudaGetLastError();
  });
}

}  // namespace kiln::cuda
