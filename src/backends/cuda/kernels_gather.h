// Launchers of Kiln's kernels for the index-driven gathers ONNX GatherND and GatherElements
// (Operators.md sections of those names), and their inverses ScatterElements (and the deprecated
// Scatter) and ScatterND (see the scatter section below): they copy elements of 1, 2, 4 or 8 bytes as bits, so
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
#include "backends/cuda/kernels_more.h"

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

// ---- ScatterElements / Scatter (opset 9-10) / ScatterND (ONNX Operators.md; the CPU reference
// src/backends/cpu/ops_movement_scatter.cc). y starts as a copy of data; each update element is
// then combined into the element its index addresses, in the CPU reference's order (updates in
// row-major order), so duplicate indices give the CPU's result (reduction none: the last one
// wins) deterministically, without atomics: ScatterElements runs one thread per line along the
// axis (only updates of one line can address the same output element) and ScatterND one thread
// per slice offset, each looping over the index tuples in order (a tuple whose slice is one
// element is one serial loop: fine for the index-update graphs ONNX exports, not tuned).
// A run-time index outside its dim — an error in the CPU reference — is skipped (y keeps data
// there); constant indices are checked at build (gather_indexed.h).
enum class ScatterReduce : int { kNone = 0, kAdd, kMul, kMax, kMin };

// x and y hold `count` elements of storage `t`; updates have the shape of indices (ScatterElements:
// d is plan_gather_elements of data and indices) or indices.shape[:-1] + data.shape[m:]
// (ScatterND: d is plan_gather_nd with batch_dims 0). Reductions compute in float for the float
// storage types (rounded back once per update, as the CPU's double does for float32) and wrap in
// the element type for int32 / int64; max / min are std::max / std::min (a NaN in data stays, one
// in updates is dropped, as the CPU reference). Errors: a reduction on bool storage
// (cudaErrorInvalidValue), launch and copy errors.
cudaError_t launch_scatter_elements(const void* x, const void* idx, bool idx_64, const void* upd, void* y,
                                    int64_t count, StorageType t, ScatterReduce r, const GatherElementsDesc& d,
                                    cudaStream_t stream);
cudaError_t launch_scatter_nd(const void* x, const void* idx, bool idx_64, const void* upd, void* y, int64_t count,
                              StorageType t, ScatterReduce r, const GatherNDDesc& d, cudaStream_t stream);

// ---- ReverseSequence (ONNX Operators.md; the CPU reference's reverse_sequence in
// src/backends/cpu/ops_movement_layout.cc): x and y [dims 0, 1, inner...] row-major with the
// batch on dim `batch_axis` (0 or 1) and time on the other: y[b, t] = x[b, len_b - 1 - t] for t <
// len_b, else x[b, t]. Lengths are int32 or int64 (`lens_64`), read on the device; a run-time one
// outside [0, time] — an error in the CPU reference — is clamped into it. Elements of 1, 2, 4 or
// 8 bytes copied as bits. Errors: another element size, launch errors.
cudaError_t launch_reverse_sequence(const void* x, const void* lens, bool lens_64, void* y, int elem_bytes,
                                    int64_t batch, int64_t time, int64_t inner, int batch_axis, cudaStream_t stream);

// ---- Pad of exact tensors (int32 / int64 / bool: ONNX "Pad" modes constant, reflect, edge as
// launch_pad in kernels_more.h, whose float load / store would round integers past 2^24): the
// same coordinate map, elements copied as bits; outside the input (constant mode) the element is
// `value_bits` (the constant's bytes in the element type, little-endian).
cudaError_t launch_pad_bits(const void* x, void* y, int elem_bytes, PadMode mode, uint64_t value_bits,
                            const PadDesc& d, cudaStream_t stream);

// ---- MaxUnpool (ONNX Operators.md "MaxUnpool"; the CPU reference's max_unpool in
// src/backends/cpu/ops_nn_pool.cc): y (zeros) receives x[i] at the flat index indices[i] of the
// default output shape `dflt` (re-raveled into `out` when an output_shape differs). Where several
// i name one element the CPU's last one (largest i) wins: a first pass takes the largest i per
// element with atomicMax into `winner` (int64, y's element count, the layer's scratch value), a
// second writes y from it — deterministic, no float atomics. A run-time index outside [0,
// numel(dflt)) or falling outside `out` — an error in the CPU reference — is skipped.
struct UnpoolDesc {
  int rank = 0;
  int64_t dflt[kMaxRank] = {};  // (x - 1) * stride + kernel - pads, per dim (N and C as x's)
  int64_t out[kMaxRank] = {};   // y's shape
  bool remap = false;           // out != dflt
};
cudaError_t launch_max_unpool(const void* x, const int64_t* indices, int64_t* winner, void* y, int elem_bytes,
                              int64_t in_count, const UnpoolDesc& d, cudaStream_t stream);

}  // namespace kiln::cuda
