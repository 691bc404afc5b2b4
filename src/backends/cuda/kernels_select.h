// Kiln's kernels for ONNX TopK, OneHot, Compress, NonMaxSuppression and Unique (Operators.md sections of those names),
// written as the CPU reference computes them (src/backends/cpu/ops_reduce_argtopk.cc top_k,
// ops_movement_gather.cc one_hot, ops_movement_select.cc compress). Tensors are row-major and
// viewed as [outer, n, inner] around the op's axis. The output extents (TopK's k, OneHot's depth,
// Compress's kept count) are the lowering's concrete shapes: the factories take them from there
// (a constant operand, or an engine keyed by its input values, docs/decisions/0069), so no kernel
// reads a size from device memory. Every launcher enqueues on `stream`, never allocates and never
// synchronizes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"

namespace kiln::cuda {

// TopK: x [outer, n, inner] in storage `t` (float storage compared as float, int32 / int64 as
// integers) -> values [outer, k, inner] (storage t) and int64 indices. The order is the CPU
// reference's total order — larger first (smaller with !largest), NaN after every number, equal
// values by lower index — so the result is the reference's exactly (sorted; `sorted` = 0 leaves
// the order free and gets the same). One thread per input element counts the elements ordered
// before it along its row (O(n) each: fine for the rows of ONNX graphs and detection heads up to
// a few thousand, not tuned for long rows). Errors: bool storage, launch errors.
cudaError_t launch_topk(const void* x, void* values, int64_t* indices, int64_t outer, int64_t n, int64_t inner,
                        int64_t k, bool largest, StorageType t, cudaStream_t stream);

// OneHot: indices [outer, inner] (float32, int32 or int64: `idx_type` kF32 / kI32 / kI64; a float
// truncated toward zero as the CPU's cast), values [off, on] of `elem_bytes` bytes -> y [outer,
// depth, inner]: on where the (negative: plus depth) index equals the position, else off (an
// index outside [-depth, depth) gives a row of off). Errors: other types / sizes, launch errors.
cudaError_t launch_one_hot(const void* indices, StorageType idx_type, const void* values, void* y, int elem_bytes,
                           int64_t outer, int64_t depth, int64_t inner, cudaStream_t stream);

// Compress: x [outer, n, inner] of `elem_bytes`-byte elements, condition bool [len] (len <= n) ->
// y [outer, kept, inner]: the slices j < len whose condition is true, in order. `kept` is the
// output's extent; a condition with more true entries writes only the first `kept`.
cudaError_t launch_compress(const void* x, const uint8_t* cond, int64_t len, void* y, int elem_bytes, int64_t outer,
                            int64_t n, int64_t inner, int64_t kept, cudaStream_t stream);

// NonMaxSuppression (versions 10 / 11), the CPU reference's greedy selection
// (src/backends/cpu/ops_control_vision.cc non_max_suppression) in double: per (batch, class),
// boxes by descending score (ties: lower index first) above score_threshold (when
// `has_score_threshold`), each dropped when its IoU with a box already kept for that class
// exceeds iou_threshold, at most max_output_boxes_per_class kept. boxes [batches, n, 4] and scores
// [batches, classes, n] float32; max_out int64 [1], iou / score thresholds float32 [1] (null:
// 0); y [count, 3] int64 (batch, class, box) in that order, `count` the output's extent (the
// selection stops there). One thread walks everything (the next candidate found by a scan, the
// kept boxes read back from y): exact and deterministic, O(classes · n²) — fine for the
// conformance graphs and small detection heads, not tuned for thousands of boxes per class.
cudaError_t launch_nms(const float* boxes, const float* scores, const int64_t* max_out, const float* iou,
                       const float* score_threshold, bool has_score_threshold, bool center_point_box, int64_t batches,
                       int64_t classes, int64_t n, int64_t* y, int64_t count, cudaStream_t stream);

// Unique (version 11), the CPU reference's grouping (src/backends/cpu/ops_movement_select.cc
// unique) without a sort: x [outer, n, inner] in storage `t` holds n slices (keys compared in
// (outer, inner) order as float for float storage, as integers for int32 / int64; NaN after
// every number and equal to NaN). A first pass finds each slice's representative (the first
// equal slice) into `rep` (int64 [n], the layer's scratch value); a second ranks each group —
// sorted: by the representatives' lexicographic order, else by first occurrence — and writes y
// [outer, groups, inner], first-occurrence indices, inverse indices [n] and counts [groups]
// (each int64, null when not wanted). `groups` is the output's extent (value-keyed models);
// nothing is written past it. One thread per slice, O(n · n · outer · inner): fine for the
// small tensors Unique sees in ONNX graphs, not tuned.
cudaError_t launch_unique(const void* x, StorageType t, int64_t outer, int64_t n, int64_t inner, bool sorted,
                          int64_t groups, int64_t* rep, void* y, int64_t* first, int64_t* inverse, int64_t* counts,
                          cudaStream_t stream);

// ONNX NonZero (cpu/ops_movement_select.cc): y [rank, count] int64, column j the coordinates of
// the j-th nonzero element of x (row-major order; x of shape dims[0..rank), any storage type t;
// NaN counts as nonzero, -0.0 as zero), `count` the output's extent (the walk stops there). One
// thread walks x: exact and deterministic, not tuned.
struct NonZeroDesc {
  int rank = 1;
  int64_t dims[kMaxRank] = {1};
};
cudaError_t launch_nonzero(const void* x, StorageType t, const NonZeroDesc& d, int64_t* y, int64_t count,
                           cudaStream_t stream);

}  // namespace kiln::cuda
