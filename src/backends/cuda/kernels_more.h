// Launchers of Kiln's own CUDA kernels for the transformer / data-movement ops: LayerNorm,
// reductions, strided copies (Transpose, Slice, Expand, Split), Gather, Pad, Resize, Where and
// the fp16 rounding of Cast. Tensors are row-major (logical order); element storage is a float
// StorageType (`t`: float, __half or __nv_bfloat16), compute in float. Every launcher enqueues
// on `stream`, never allocates and never synchronizes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"

namespace kiln::cuda {

// dst[i0..ir] = src[src_offset + sum_k i_k * src_strides[k]] over the dense output `out_dims`
// (strides in elements, may be 0 for broadcast or negative for reversed slices).
struct StridedDesc {
  int rank = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t src_strides[kMaxRank] = {};
  int64_t src_offset = 0;
};
// Element size 1, 2, 4 or 8 bytes (the copy does not interpret the bits).
cudaError_t launch_strided_copy(const void* src, void* dst, int elem_bytes, const StridedDesc& d, cudaStream_t stream);

// dst[r, c] = src[r, c] for r < rows, c < dst_cols: the first dst_cols columns of each row of a
// row-major [rows, src_cols] array (src_cols >= dst_cols) into a dense [rows, dst_cols] one. The
// GEMM of an N that is not a multiple of 8 writes its output with the padded leading dim src_cols
// (16-byte aligned rows, the fast cuBLASLt kernels) and this makes it dense. Element size 2 or 4
// bytes; 16-byte stores where dst is 16-byte aligned (arena values are), element stores otherwise.
cudaError_t launch_compact_rows(const void* src, void* dst, int elem_bytes, int64_t rows, int64_t src_cols,
                                int64_t dst_cols, cudaStream_t stream);

// ONNX LayerNormalization (opset 17, section "LayerNormalization"): each row of the [rows, cols]
// array is normalized, y = (x - mean) / sqrt(var + eps) * scale + bias (biased variance, fp32
// accumulation); scale and bias are [cols] in the same storage dtype; bias may be null.
cudaError_t launch_layernorm(const void* x, const void* scale, const void* bias, void* y, StorageType t, int64_t rows,
                             int64_t cols, float eps, cudaStream_t stream);

enum class ReduceKind : int { kSum, kMean, kMax, kMin };
// y[o, i] = reduce_r x[o, r, i] over the middle axis of a [outer, red, inner] array (fp32
// accumulation). One warp per output when inner == 1 (the last-axis case), else one thread.
cudaError_t launch_reduce(const void* x, void* y, StorageType t, ReduceKind kind, int64_t outer, int64_t red,
                          int64_t inner, cudaStream_t stream);

// ONNX Gather (section "Gather"): y[o, j, i] = x[o, idx[j], i] for x [outer, axis_dim, inner];
// idx holds non-negative int64 indices < axis_dim (normalized on the host). Elements of 1, 2, 4
// or 8 bytes (bits copied: float, integer and bool tensors).
cudaError_t launch_gather(const void* x, const int64_t* idx, void* y, int elem_bytes, int64_t outer, int64_t axis_dim,
                          int64_t nidx, int64_t inner, cudaStream_t stream);
// The same with indices computed at run time (token ids from a graph input): int32 or int64
// (`idx_64`), read on the device. A negative index i counts from the end (i + axis_dim, as
// ONNX); an index still outside [0, axis_dim) — which ONNX leaves undefined and the CPU
// reference rejects — writes zeros to its output slice (never reads out of bounds).
cudaError_t launch_gather_runtime(const void* x, const void* idx, bool idx_64, void* y, int elem_bytes, int64_t outer,
                                  int64_t axis_dim, int64_t nidx, int64_t inner, cudaStream_t stream);

enum class PadMode : int { kConstant, kReflect, kEdge };
// ONNX Pad (section "Pad"): out coordinate o_k maps to input o_k - begin[k]; outside the input
// it takes `value` (constant), the mirrored coordinate without repeating the edge (reflect) or
// the clamped one (edge). begin may be negative (cropping).
struct PadDesc {
  int rank = 0;
  int64_t in_dims[kMaxRank] = {};
  int64_t out_dims[kMaxRank] = {};
  int64_t begin[kMaxRank] = {};
};
cudaError_t launch_pad(const void* x, void* y, StorageType t, PadMode mode, float value, const PadDesc& d,
                       cudaStream_t stream);

// ONNX Resize (section "Resize", opset 11+) of the two innermost axes of an NCHW array.
// coord: 0 half_pixel, 1 asymmetric, 2 pytorch_half_pixel, 3 align_corners, 4 tf_half_pixel_for_nn.
// nearest: 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil. scale_* and len_* are the
// spec's per-axis scale and length_resized (in * scale, or the requested size).
struct ResizeDesc {
  int64_t nc = 0, ih = 0, iw = 0, oh = 0, ow = 0;
  double scale_h = 1, scale_w = 1, len_h = 1, len_w = 1;
  bool linear = false;
  int coord = 0;
  int nearest = 0;
};
cudaError_t launch_resize(const void* x, void* y, StorageType t, const ResizeDesc& d, cudaStream_t stream);

// ONNX Where (section "Where") with broadcasting: y = c != 0 ? a : b; the condition is stored
// as 0/1 in the same storage dtype (c_strides broadcast like a_strides/b_strides).
cudaError_t launch_where(const void* c, const void* a, const void* b, void* y, StorageType t, const BroadcastDesc& d,
                         const int64_t* c_strides, cudaStream_t stream);

// y = float(half(x)) elementwise (ONNX Cast to float16 when storage is float32).
cudaError_t launch_round_to_half(const float* x, float* y, int64_t count, cudaStream_t stream);

}  // namespace kiln::cuda
