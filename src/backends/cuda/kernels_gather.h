// Launchers of Kiln's kernels for the index-driven gathers ONNX GatherND and GatherElements
// (Operators.md sections of those names): they copy elements of 1, 2, 4 or 8 bytes as bits, so
// one kernel per op serves fp32 / fp16 / bf16 storage, int32, int64 and bool. Indices are int32
// or int64, read on the device, negative ones counted from the end of their dim. An index still
// outside its dim — an error in the CPU reference, undefined in ONNX — makes the kernel write
// zero bytes (0, +0.0, false) to what it addresses and never read out of bounds (as Gather with
// run-time indices, kernels_more.h launch_gather_runtime): a kernel cannot fail the run.
// Tensors are row-major. The per-element index arithmetic is __host__ __device__ so host tests
// replay the planned descriptors with the kernels' own code. Every launcher enqueues on
// `stream`, never allocates and never synchronizes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"

namespace kiln::cuda {

// Index `v` into a dim of extent `dim`: negative counts from the end; -1 when outside.
__host__ __device__ inline int64_t gather_wrap_index(int64_t v, int64_t dim) {
  if (v < 0) v += dim;
  return v >= 0 && v < dim ? v : -1;
}

// GatherND with batch_dims b and index tuples of length m: data [B..., D_0..D_{m-1}, S...],
// indices [B..., T..., m], y [B..., T..., S...] seen as [batches, tuples, slice] with
// batches = prod(B), tuples = prod(T), slice = prod(S).
struct GatherNDDesc {
  int64_t batches = 1, tuples = 1, slice = 1;
  int64_t batch_stride = 0;       // elements of data per batch entry (prod of data dims from b on)
  int m = 0;                      // index tuple length, 1..kMaxRank
  int64_t dims[kMaxRank] = {};    // D_0..D_{m-1}: the extents the tuple indexes
  int64_t strides[kMaxRank] = {}; // their element strides in data
};

// The data element output element `i` copies, or -1 when a component of its tuple is outside
// its dim (the output element is then zero). `idx` is the whole indices tensor.
template <typename I>
__host__ __device__ inline int64_t gather_nd_source(const GatherNDDesc& d, int64_t i, const I* idx) {
  const int64_t s = i % d.slice;
  const int64_t bt = i / d.slice;  // batch * tuples + tuple
  const I* row = idx + bt * d.m;
  int64_t off = (bt / d.tuples) * d.batch_stride + s;
  for (int j = 0; j < d.m; ++j) {
    const int64_t k = gather_wrap_index(static_cast<int64_t>(row[j]), d.dims[j]);
    if (k < 0) return -1;
    off += k * d.strides[j];
  }
  return off;
}

// GatherElements along `axis`: y and indices share the shape `dims` (rank 1..kMaxRank, each
// dim no larger than data's except along axis); y[p] = data[p with p[axis] = indices[p]].
struct GatherElementsDesc {
  int rank = 0;
  int axis = 0;
  int64_t axis_dim = 0;             // data's extent along axis
  int64_t dims[kMaxRank] = {};      // the indices' (= y's) shape
  int64_t x_strides[kMaxRank] = {}; // data's element strides
};

// The data element output element `i` copies, or -1 when indices[i] is outside axis_dim.
template <typename I>
__host__ __device__ inline int64_t gather_elements_source(const GatherElementsDesc& d, int64_t i, const I* idx) {
  const int64_t k = gather_wrap_index(static_cast<int64_t>(idx[i]), d.axis_dim);
  if (k < 0) return -1;
  int64_t off = 0;
  for (int r = d.rank - 1; r >= 0; --r) {
    const int64_t q = i % d.dims[r];
    i /= d.dims[r];
    off += (r == d.axis ? k : q) * d.x_strides[r];
  }
  return off;
}

// y [batches * tuples * slice] from x by d; idx int64 (`idx_64`) or int32. Errors: an element
// size other than 1, 2, 4, 8 (cudaErrorInvalidValue), launch errors.
cudaError_t launch_gather_nd(const void* x, const void* idx, bool idx_64, void* y, int elem_bytes, const GatherNDDesc& d,
                             cudaStream_t stream);
// y [prod(d.dims)] from x by d; idx int64 (`idx_64`) or int32, of y's shape. Errors as above.
cudaError_t launch_gather_elements(const void* x, const void* idx, bool idx_64, void* y, int elem_bytes,
                                   const GatherElementsDesc& d, cudaStream_t stream);

}  // namespace kiln::cuda
