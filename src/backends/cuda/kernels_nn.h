// Launchers of Kiln's kernels for the N-D layers beside cuDNN's convolutions (issue 11 item 1,
// docs/decisions/0070): the pad / crop + bias copy around a convolution, N-D pooling, inference
// BatchNormalization, normalization over an axis set (InstanceNormalization,
// MeanVarianceNormalization) and LRN. Tensors are row-major (logical order, N and C first, then up
// to 3 spatial dims); element storage is a float StorageType `t` (fp32, fp16, bf16), compute in
// float. Every launcher enqueues on `stream`, never allocates and never synchronizes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"

namespace kiln::cuda {

// Spatial geometry of a window op with up to 3 spatial dims; unused dims are 1 (pads 0).
struct WindowGeom {
  int64_t in[3] = {1, 1, 1};
  int64_t out[3] = {1, 1, 1};
  int64_t kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1};
  int64_t dilation[3] = {1, 1, 1};
  int64_t pad_begin[3] = {0, 0, 0};
  int64_t pad_end[3] = {0, 0, 0};
};

// dst[p, i0, i1, i2] = src[p, i0 - off0, i1 - off1, i2 - off2] where that index is inside src's
// [src_dims], else 0; then + bias[p % channels] when bias is not null. p runs over `planes`
// (N * C). src == dst with equal dims and zero offsets adds the bias in place. Used for the
// explicit zero padding before a convolution (off = pad_begin) and the crop of a transposed
// convolution's full output (off = -pad_begin; output_padding positions read zeros).
cudaError_t launch_window_copy(const void* src, void* dst, StorageType t, int64_t planes, int64_t channels,
                               const int64_t src_dims[3], const int64_t dst_dims[3], const int64_t off[3],
                               const void* bias, cudaStream_t stream);

// ONNX MaxPool / AveragePool over the planes (N * C) of x [planes, in...] -> y [planes, out...]:
// window position k of output o reads input o * stride - pad_begin + k * dilation per dim;
// positions outside the input are skipped. Average divides by the in-bounds count, or with
// `count_include_pad` by the count of positions inside [-pad_begin, in + pad_end) (ONNX
// AveragePool; a window with no in-bounds position gives 0). Max of no position gives -inf.
// `indices` (int64, may be null): MaxPool's Indices, the row-major flat index into x of the max.
// `col_major_indices` (MaxPool storage_order = 1): the spatial part of each index is column-major.
cudaError_t launch_pool_nd(const void* x, void* y, int64_t* indices, StorageType t, int64_t planes, const WindowGeom& g,
                           bool max, bool count_include_pad, bool col_major_indices, cudaStream_t stream);

// ONNX BatchNormalization (inference): y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + b[c],
// c = (i / inner) % channels over x [outer, channels, inner]; the four parameter vectors are
// [channels] in storage t.
cudaError_t launch_batch_norm(const void* x, const void* scale, const void* b, const void* mean, const void* var,
                              void* y, StorageType t, int64_t count, int64_t channels, int64_t inner, float eps,
                              cudaStream_t stream);

// Normalization of each group of elements sharing the indices of the kept dims (the others,
// `red`, are reduced): up to kMaxRank dims. Group g's elements are those with the kept-dims
// flat index g; its mean and (biased) variance are taken in float by two passes.
struct NormAxesDesc {
  int keep_rank = 0, red_rank = 0;
  int64_t keep_dims[kMaxRank] = {}, keep_strides[kMaxRank] = {};  // element strides in x
  int64_t red_dims[kMaxRank] = {}, red_strides[kMaxRank] = {};
  int64_t groups = 1, group_size = 1;
  // InstanceNormalization: y = (x - mean) / sqrt(var + eps) * scale[g % channels] + bias[...].
  // MeanVarianceNormalization (scale null): y = (x - mean) / (sqrt(var) + eps).
  bool eps_inside_sqrt = true;
  int64_t channels = 1;
};
// Per-group statistics a normalization may also write (BatchNormalization in training mode, one
// group per channel; every pointer may be null; all in storage t, one value per group):
// running = in * momentum + batch * (1 - momentum) for the mean and the biased variance, and the
// batch mean / variance themselves (opsets < 14's saved_mean / saved_var).
struct NormStats {
  const void* mean_in = nullptr;
  const void* var_in = nullptr;
  void* running_mean = nullptr;
  void* running_var = nullptr;
  void* batch_mean = nullptr;
  void* batch_var = nullptr;
  float momentum = 0.9f;
};
cudaError_t launch_norm_axes(const void* x, const void* scale, const void* bias, void* y, StorageType t,
                             const NormAxesDesc& d, float eps, cudaStream_t stream, const NormStats& stats = {});

// ONNX LRN over x [n, c, inner]: y = x / (bias + alpha / size * sum of x^2 over channels
// [c - floor((size-1)/2), c + ceil((size-1)/2)] clipped to [0, c))^beta.
cudaError_t launch_lrn(const void* x, void* y, StorageType t, int64_t n, int64_t c, int64_t inner, int64_t size,
                       float alpha, float beta, float bias, cudaStream_t stream);

// ONNX GridSample (opset 16; 20 renames the modes) of x [n, c, h, w] at grid [n, ho, wo, 2]
// ((x, y) in [-1, 1]) -> y [n, c, ho, wo], as the CPU reference computes it (coordinates in
// double): mode 0 bilinear, 1 nearest (round half to even), 2 bicubic (A = -0.75); padding 0
// zeros, 1 border, 2 reflection; align_corners maps -1 / 1 to the corner pixels' centres.
// A NaN coordinate gives 0.
struct GridSampleDesc {
  int64_t n = 0, c = 0, h = 0, w = 0, ho = 0, wo = 0;
  StorageType grid_type = StorageType::kF32;  // the grid's storage (x and y are in t)
  int mode = 0, padding = 0;
  bool align_corners = false;
};
cudaError_t launch_grid_sample(const void* x, const void* grid, void* y, StorageType t, const GridSampleDesc& d,
                               cudaStream_t stream);

}  // namespace kiln::cuda
