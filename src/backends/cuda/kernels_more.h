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
// The same compaction of a 16-bit source (src_t kF16 or kBF16) into float32 (each element
// converted exactly): a padded 16-bit GEMM output that is a graph output declared float32
// (docs/decisions/0083). 16-byte stores where dst is 16-byte aligned.
cudaError_t launch_compact_rows_to_f32(const void* src, StorageType src_t, float* dst, int64_t rows, int64_t src_cols,
                                       int64_t dst_cols, cudaStream_t stream);

// ONNX LayerNormalization (opset 17, section "LayerNormalization"): each row of the [rows, cols]
// array is normalized, y = (x - mean) / sqrt(var + eps) * scale + bias (biased variance, fp32
// accumulation); scale and bias are [cols] in the same storage dtype; bias may be null. One warp
// per row (the row in registers) when cols is a multiple of 8 up to 2048 and every pointer is
// 16-byte aligned, else one block per row.
cudaError_t launch_layernorm(const void* x, const void* scale, const void* bias, void* y, StorageType t, int64_t rows,
                             int64_t cols, float eps, cudaStream_t stream);

// ONNX ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1 (sum |x|), ReduceL2
// (sqrt(sum x^2)), ReduceSumSquare (sum x^2), ReduceLogSum (log(sum x)), ReduceLogSumExp
// (log(sum exp x), as m + log(sum exp(x - m)) with m the maximum; -inf when every x is -inf).
enum class ReduceKind : int { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };
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

// ONNX NegativeLogLikelihoodLoss (since 12/13) and SoftmaxCrossEntropyLoss (since 12/13): x is
// [n, c, d] row-major (d = the product of the trailing dims), target [n, d] int64 class indices,
// weight (null: all 1) [c] in storage t. Per (n, d): logp = x[n, :, d], or for `softmax`
// x - (m + log(sum exp(x - m))) over c with m the maximum (written to log_prob when not null,
// [n, c, d]); loss = -logp[target] * weight[target], 0 where target == ignore_index (has_ignore).
// reduction 0 "none": y [n, d] holds each loss; 1 "sum": y[0] = the sum; 2 "mean": y[0] = the sum
// / the sum of the weights of the non-ignored targets (0/0 = NaN, as the spec's formula). A target
// outside [0, c) that is not ignore_index gives NaN (the CPU reference rejects it). sum / mean run
// in one block (float accumulation).
struct LossDesc {
  int64_t n = 0, c = 0, d = 1;
  int reduction = 2;
  bool softmax = false;
  bool has_ignore = false;
  int64_t ignore_index = 0;
};
cudaError_t launch_nll_loss(const void* x, const int64_t* target, const void* weight, void* y, void* log_prob,
                            StorageType t, const LossDesc& d, cudaStream_t stream);

// Softmax (kind 0), LogSoftmax (1) or Hardmax (2) along the middle axis of a [outer, len, inner]
// row-major array (ONNX Softmax-13 / LogSoftmax-13 / Hardmax-13 over one axis; opset < 13's 2-D
// coercion is inner == 1), as the CPU reference: m = the first maximum (comparisons with >, so NaN
// is skipped), softmax exp(x - m) / sum exp(x - m), log-softmax x - m - log(sum), Hardmax 1 at
// the index of m and 0 elsewhere. One thread per (outer, inner) column, float math.
cudaError_t launch_axis_softmax(const void* x, void* y, StorageType t, int kind, int64_t outer, int64_t len,
                                int64_t inner, cudaStream_t stream);

// LayerNormalization's optional outputs Mean and InvStdDev (ONNX LayerNormalization-17): per row
// of a [rows, cols] array, mean = sum / cols and inv_std = 1 / sqrt(sum (x - mean)^2 / cols + eps),
// stored in storage t (either pointer may be null). One block per row, float math.
cudaError_t launch_row_moments(const void* x, void* mean, void* inv_std, StorageType t, int64_t rows, int64_t cols,
                               float eps, cudaStream_t stream);

// ONNX EyeLike: y [rows, cols] with y[i, i + k] = 1 and 0 elsewhere, in storage t (float or
// integer / bool types).
cudaError_t launch_eye(void* y, StorageType t, int64_t rows, int64_t cols, int64_t k, cudaStream_t stream);

// y[i] = value for i < count, in storage t (float, integer or bool types).
cudaError_t launch_fill(void* y, StorageType t, int64_t count, float value, cudaStream_t stream);

}  // namespace kiln::cuda
