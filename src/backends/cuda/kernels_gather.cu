// GatherND and GatherElements (kernels_gather.h): one grid-stride kernel per op, templated on the
// element's bit width (T: uint8/16/32/64_t) and the index type (I: int32/int64); each thread
// computes its output element's source with the header's __host__ __device__ helpers. Semantics
// follow the CPU reference (src/backends/cpu/ops_movement_gather.cc) except for out-of-range
// indices (zeros here, an error there).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backends/cuda/kernels_gather.h"
#include "backends/cuda/launch_config.cuh"
#include "backends/cuda/storage_access.cuh"

namespace kiln::cuda {
namespace {

template <typename T, typename I>
__global__ void gather_nd_kernel(const T* __restrict__ x, const I* __restrict__ idx, T* __restrict__ y, GatherNDDesc d,
                                 int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = gather_nd_source(d, i, idx);
    y[i] = s < 0 ? T(0) : x[s];
  }
}

template <typename T, typename I>
__global__ void gather_elements_kernel(const T* __restrict__ x, const I* __restrict__ idx, T* __restrict__ y,
                                       GatherElementsDesc d, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = gather_elements_source(d, i, idx);
    y[i] = s < 0 ? T(0) : x[s];
  }
}

// Calls f(T{}, I{}) with the element type of `elem_bytes` and the index type.
template <typename F>
cudaError_t with_types(int elem_bytes, bool idx_64, F f) {
  auto by_index = [&](auto t) { return idx_64 ? f(t, int64_t{}) : f(t, int32_t{}); };
  switch (elem_bytes) {
    case 1: return by_index(uint8_t{});
    case 2: return by_index(uint16_t{});
    case 4: return by_index(uint32_t{});
    case 8: return by_index(uint64_t{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_gather_nd(const void* x, const void* idx, bool idx_64, void* y, int elem_bytes, const GatherNDDesc& d,
                             cudaStream_t stream) {
  const int64_t total = d.batches * d.tuples * d.slice;
  if (total == 0) return cudaSuccess;
  if (d.m < 1 || d.m > kMaxRank) return cudaErrorInvalidValue;
  return with_types(elem_bytes, idx_64, [&](auto t, auto it) {
    using T = decltype(t);
    using I = decltype(it);
    gather_nd_kernel<T, I><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<const I*>(idx),
                                                                      static_cast<T*>(y), d, total);
    return cudaGetLastError();
  });
}

cudaError_t launch_gather_elements(const void* x, const void* idx, bool idx_64, void* y, int elem_bytes,
                                   const GatherElementsDesc& d, cudaStream_t stream) {
  if (d.rank < 1 || d.rank > kMaxRank || d.axis < 0 || d.axis >= d.rank) return cudaErrorInvalidValue;
  int64_t total = 1;
  for (int r = 0; r < d.rank; ++r) total *= d.dims[r];
  if (total == 0) return cudaSuccess;
  return with_types(elem_bytes, idx_64, [&](auto t, auto it) {
    using T = decltype(t);
    using I = decltype(it);
    gather_elements_kernel<T, I><<<blocks_for(total), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const I*>(idx), static_cast<T*>(y), d, total);
    return cudaGetLastError();
  });
}

// ---- scatter

namespace {

template <typename T>
__device__ __forceinline__ float to_f(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return static_cast<float>(v);
}
template <typename T>
__device__ __forceinline__ T from_f(float v) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(v);
  else return static_cast<T>(v);
}

// combine(a, b) of the CPU reference: a the element so far, b the update.
template <typename T>
__device__ __forceinline__ T scatter_combine(T a, T b, ScatterReduce r) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (r) {
      case ScatterReduce::kAdd: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      case ScatterReduce::kMul: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case ScatterReduce::kMax: return a < b ? b : a;
      case ScatterReduce::kMin: return b < a ? b : a;
      case ScatterReduce::kNone: break;
    }
    return b;
  } else {
    const float fa = to_f(a), fb = to_f(b);
    switch (r) {
      case ScatterReduce::kAdd: return from_f<T>(fa + fb);
      case ScatterReduce::kMul: return from_f<T>(fa * fb);
      case ScatterReduce::kMax: return fa < fb ? b : a;
      case ScatterReduce::kMin: return fb < fa ? b : a;
      case ScatterReduce::kNone: break;
    }
    return b;
  }
}

// One thread per line along the axis: update i = (o * A + k) * inner + q for k = 0..A-1.
template <typename T, typename I>
__global__ void scatter_elements_kernel(const I* __restrict__ idx, const T* __restrict__ upd, T* __restrict__ y,
                                        GatherElementsDesc d, int64_t lines, int64_t inner, ScatterReduce r) {
  const int64_t a = d.dims[d.axis];
  for (int64_t l = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; l < lines;
       l += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = l / inner, q = l % inner;
    for (int64_t k = 0; k < a; ++k) {
      const int64_t i = (o * a + k) * inner + q;
      const int64_t dst = gather_elements_source(d, i, idx);
      if (dst >= 0) y[dst] = scatter_combine(y[dst], upd[i], r);
    }
  }
}

// One thread per slice offset s, over the tuples in order.
template <typename T, typename I>
__global__ void scatter_nd_kernel(const I* __restrict__ idx, const T* __restrict__ upd, T* __restrict__ y,
                                  GatherNDDesc d, ScatterReduce r) {
  for (int64_t s = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; s < d.slice;
       s += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    for (int64_t t = 0; t < d.tuples; ++t) {
      const int64_t i = t * d.slice + s;
      const int64_t dst = gather_nd_source(d, i, idx);
      if (dst >= 0) y[dst] = scatter_combine(y[dst], upd[i], r);
    }
  }
}

// Calls f(T{}, I{}) with the element type of storage `t` (bool: a byte, reduction none only).
template <typename F>
cudaError_t with_storage(StorageType t, ScatterReduce r, bool idx_64, F f) {
  if (t == StorageType::kBool && r != ScatterReduce::kNone) return cudaErrorInvalidValue;
  return with_storage_type(t, true, [&](auto e) { return idx_64 ? f(e, int64_t{}) : f(e, int32_t{}); });
}

}  // namespace

cudaError_t launch_scatter_elements(const void* x, const void* idx, bool idx_64, const void* upd, void* y,
                                    int64_t count, StorageType t, ScatterReduce r, const GatherElementsDesc& d,
                                    cudaStream_t stream) {
  if (d.rank < 1 || d.rank > kMaxRank || d.axis < 0 || d.axis >= d.rank) return cudaErrorInvalidValue;
  if (r != ScatterReduce::kNone && t == StorageType::kBool) return cudaErrorInvalidValue;
  if (count > 0 && x != y) {
    const cudaError_t e = cudaMemcpyAsync(y, x, static_cast<size_t>(count) * storage_bytes(t),
                                          cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess) return e;
  }
  int64_t total = 1, inner = 1;
  for (int k = 0; k < d.rank; ++k) total *= d.dims[k];
  for (int k = d.axis + 1; k < d.rank; ++k) inner *= d.dims[k];
  if (total == 0) return cudaSuccess;
  const int64_t lines = total / d.dims[d.axis];
  return with_storage(t, r, idx_64, [&](auto e, auto it) {
    using T = decltype(e);
    using I = decltype(it);
    scatter_elements_kernel<T, I><<<blocks_for(lines), kThreads, 0, stream>>>(
        static_cast<const I*>(idx), static_cast<const T*>(upd), static_cast<T*>(y), d, lines, inner, r);
    return cudaGetLastError();
  });
}

cudaError_t launch_scatter_nd(const void* x, const void* idx, bool idx_64, const void* upd, void* y, int64_t count,
                              StorageType t, ScatterReduce r, const GatherNDDesc& d, cudaStream_t stream) {
  if (d.m < 1 || d.m > kMaxRank || d.batches != 1) return cudaErrorInvalidValue;
  if (r != ScatterReduce::kNone && t == StorageType::kBool) return cudaErrorInvalidValue;
  if (count > 0 && x != y) {
    const cudaError_t e = cudaMemcpyAsync(y, x, static_cast<size_t>(count) * storage_bytes(t),
                                          cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess) return e;
  }
  if (d.slice == 0 || d.tuples == 0) return cudaSuccess;
  return with_storage(t, r, idx_64, [&](auto e, auto it) {
    using T = decltype(e);
    using I = decltype(it);
    scatter_nd_kernel<T, I><<<blocks_for(d.slice), kThreads, 0, stream>>>(
        static_cast<const I*>(idx), static_cast<const T*>(upd), static_cast<T*>(y), d, r);
    return cudaGetLastError();
  });
}

// ---- ReverseSequence

namespace {

template <typename T, typename I>
__global__ void reverse_sequence_kernel(const T* __restrict__ x, const I* __restrict__ lens, T* __restrict__ y,
                                        int64_t batch, int64_t time, int64_t inner, int batch_axis, int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t q = i % inner, r = i / inner;
    const int64_t b = batch_axis == 1 ? r % batch : r / time;
    const int64_t t = batch_axis == 1 ? r / batch : r % time;
    const int64_t len = min(max(static_cast<int64_t>(lens[b]), int64_t{0}), time);
    const int64_t st = t < len ? len - 1 - t : t;
    y[i] = x[(batch_axis == 1 ? st * batch + b : b * time + st) * inner + q];
  }
}

}  // namespace

cudaError_t launch_reverse_sequence(const void* x, const void* lens, bool lens_64, void* y, int elem_bytes,
                                    int64_t batch, int64_t time, int64_t inner, int batch_axis, cudaStream_t stream) {
  const int64_t total = batch * time * inner;
  if (total == 0) return cudaSuccess;
  return with_types(elem_bytes, lens_64, [&](auto e, auto it) {
    using T = decltype(e);
    using I = decltype(it);
    reverse_sequence_kernel<T, I><<<blocks_for(total), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const I*>(lens), static_cast<T*>(y), batch, time, inner, batch_axis, total);
    return cudaGetLastError();
  });
}

// ---- Pad of exact tensors

namespace {

// kernels_more.cu's pad_coord: the input coordinate out coordinate `c` reads, -1 outside.
__device__ __forceinline__ int64_t pad_bits_coord(int64_t c, int64_t n, PadMode m) {
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

template <typename T>
__global__ void pad_bits_kernel(const T* __restrict__ x, T* __restrict__ y, PadMode m, T value, PadDesc d,
                                int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rem = i, off = 0, stride = 1;
    bool outside = false;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t c = rem % d.out_dims[k];
      rem /= d.out_dims[k];
      const int64_t s = pad_bits_coord(c - d.begin[k], d.in_dims[k], m);
      if (s < 0) outside = true;
      off += s * stride;
      stride *= d.in_dims[k];
    }
    y[i] = outside ? value : x[off];
  }
}

}  // namespace

cudaError_t launch_pad_bits(const void* x, void* y, int elem_bytes, PadMode mode, uint64_t value_bits,
                            const PadDesc& d, cudaStream_t stream) {
  int64_t total = 1;
  for (int k = 0; k < d.rank; ++k) total *= d.out_dims[k];
  if (total == 0) return cudaSuccess;
  auto go = [&](auto e) {
    using T = decltype(e);
    T v;
    memcpy(&v, &value_bits, sizeof(T));
    pad_bits_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), mode,
                                                                   v, d, total);
    return cudaGetLastError();
  };
  switch (elem_bytes) {
    case 1: return go(uint8_t{});
    case 2: return go(uint16_t{});
    case 4: return go(uint32_t{});
    case 8: return go(uint64_t{});
    default: return cudaErrorInvalidValue;
  }
}

// ---- MaxUnpool

namespace {

// The element of y that input element i's index names, or -1 (out of range).
__device__ __forceinline__ int64_t unpool_target(int64_t k, const UnpoolDesc& d) {
  int64_t total = 1;
  for (int r = 0; r < d.rank; ++r) total *= d.dflt[r];
  if (k < 0 || k >= total) return -1;
  if (!d.remap) return k;
  int64_t pos[kMaxRank];
  for (int r = d.rank - 1; r >= 0; --r) {
    pos[r] = k % d.dflt[r];
    k /= d.dflt[r];
  }
  int64_t o = 0;
  for (int r = 0; r < d.rank; ++r) {
    if (pos[r] >= d.out[r]) return -1;
    o = o * d.out[r] + pos[r];
  }
  return o;
}

__global__ void unpool_winner_kernel(const int64_t* __restrict__ idx, long long* winner, UnpoolDesc d, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = unpool_target(idx[i], d);
    if (t >= 0) atomicMax(winner + t, static_cast<long long>(i));
  }
}

template <typename T>
__global__ void unpool_write_kernel(const T* __restrict__ x, const long long* __restrict__ winner, T* __restrict__ y,
                                    int64_t total) {
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const long long w = winner[o];
    y[o] = w >= 0 ? x[w] : T(0);
  }
}

}  // namespace

cudaError_t launch_max_unpool(const void* x, const int64_t* indices, int64_t* winner, void* y, int elem_bytes,
                              int64_t in_count, const UnpoolDesc& d, cudaStream_t stream) {
  if (d.rank < 1 || d.rank > kMaxRank) return cudaErrorInvalidValue;
  int64_t total = 1;
  for (int r = 0; r < d.rank; ++r) total *= d.out[r];
  if (total == 0) return cudaSuccess;
  cudaError_t e = cudaMemsetAsync(winner, 0xff, static_cast<size_t>(total) * sizeof(int64_t), stream);  // all -1
  if (e != cudaSuccess) return e;
  auto* w = reinterpret_cast<long long*>(winner);
  if (in_count > 0) {
    unpool_winner_kernel<<<blocks_for(in_count), kThreads, 0, stream>>>(indices, w, d, in_count);
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  auto go = [&](auto t) {
    using T = decltype(t);
    unpool_write_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(x), w, static_cast<T*>(y),
                                                                       total);
    return cudaGetLastError();
  };
  switch (elem_bytes) {
    case 1: return go(uint8_t{});
    case 2: return go(uint16_t{});
    case 4: return go(uint32_t{});
    case 8: return go(uint64_t{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace kiln::cuda
