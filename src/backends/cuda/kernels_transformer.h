// Launchers of Kiln's own CUDA kernels for the internal transformer layers (ops.def): the
// RMSNormalization row kernel and the masked softmax between attention's two GEMMs. Tensors are
// row-major; elements are stored as a StorageType and computed in float. Every launcher enqueues
// on `stream`, never allocates and never synchronizes. The index helpers are __host__ __device__
// so host code (tests) can check the planned descriptors with the kernels' own arithmetic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"

namespace kiln::cuda {

// RMSNormalization ("Root Mean Square Layer Normalization", Zhang & Sennrich 2019, eq. 4; ONNX
// opset 23): each row of the [rows, cols] array becomes y = x / sqrt(mean(x^2) + eps) * scale,
// with scale [cols] (scale_n == cols) or one value (scale_n == 1) in the storage type; sum of
// squares in fp32. One block per row (up to 256 threads); rows of cols % 8 == 0 up to 8192 values
// with a [cols] scale and 16-byte aligned operands are read once in 16-byte vectors kept in
// registers (decode-step rows), others element by element.
cudaError_t launch_rms_norm(const void* x, const void* scale, int64_t scale_n, void* y, StorageType t, int64_t rows,
                            int64_t cols, float eps, cudaStream_t stream);

enum class AttentionMask : int {
  kNone = 0,
  kAdditive = 1,  // float mask added to the scores
  kKeep = 2,      // bool mask stored as 0/1 in the storage type: 0 excludes the key
};

// The score rows of one Attention layer: rows are indexed over the score dims without the key
// dim, [*, Hq, Sq] (rank <= kMaxRank), each row holds Sk keys. The mask (if any) reads
// row `r` at mask_row_offset(d, r) + j * mask_key_stride (numpy broadcasting: stride 0 on
// broadcast dims).
struct AttentionSoftmaxDesc {
  int64_t sq = 0, sk = 0;
  bool causal = false;  // key j excluded for query i when j > i + sk - sq (bottom-right aligned)
  AttentionMask mask = AttentionMask::kNone;
  int rank = 0;                              // of row_dims
  int64_t row_dims[kMaxRank] = {};           // [*, Hq, Sq]
  int64_t mask_row_strides[kMaxRank] = {};   // elements, 0 on broadcast dims
  int64_t mask_key_stride = 0;               // elements
};

// Element offset of row `row`'s first key in the mask.
__host__ __device__ inline int64_t attention_mask_row_offset(const AttentionSoftmaxDesc& d, int64_t row) {
  int64_t off = 0;
  for (int k = d.rank - 1; k >= 0; --k) {
    off += (row % d.row_dims[k]) * d.mask_row_strides[k];
    row /= d.row_dims[k];
  }
  return off;
}

// Keys j <= this limit are visible to row `row` (the causal bound; sk - 1 when not causal). A
// negative limit means every key is excluded: the row's output is zeros.
__host__ __device__ inline int64_t attention_key_limit(const AttentionSoftmaxDesc& d, int64_t row) {
  if (!d.causal) return d.sk - 1;
  const int64_t i = row % d.sq;
  const int64_t lim = i + d.sk - d.sq;
  return lim < d.sk - 1 ? lim : d.sk - 1;
}

// Softmax over each row of the fp32 scores s [nrows, sk] (already scaled: scale * Q K^T), with
// the mask and causal exclusion applied; rows [row0, row0 + nrows) of the descriptor's row
// space. Writes P [nrows, sk] in storage type `pt` (p may equal s when pt is fp32: every element
// is read and written by the same thread). s is overwritten (it holds exp() between passes).
// Rows whose keys are all excluded give zeros (docs/decisions/0006-attention-op.md).
cudaError_t launch_attention_softmax(float* s, void* p, StorageType pt, const void* mask, const AttentionSoftmaxDesc& d,
                                     int64_t row0, int64_t nrows, cudaStream_t stream);

}  // namespace kiln::cuda
