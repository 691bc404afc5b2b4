// GatherND and GatherElements (kernels_gather.h): one grid-stride kernel per op, templated on the
// element's bit width (T: uint8/16/32/64_t) and the index type (I: int32/int64); each thread
// computes its output element's source with the header's __host__ __device__ helpers. Semantics
// follow the CPU reference (src/backends/cpu/ops_movement_gather.cc) except for out-of-range
// indices (zeros here, an error there).
#include <algorithm>

#include "backends/cuda/kernels_gather.h"
#include "backends/cuda/launch_config.cuh"

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

}  // namespace kiln::cuda
