// Launchers of Kiln's own CUDA kernels (pointwise, reformat, softmax, concat). Every launcher
// enqueues on `stream`, never allocates and never synchronizes. Element type codes: `half`
// selects __half storage (compute in float), otherwise float. Shapes are physical (as stored).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kiln::cuda {

constexpr int kMaxRank = 6;

// Broadcast strides for one operand: 0 on broadcast dims. Output is dense.
struct BroadcastDesc {
  int rank = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t a_strides[kMaxRank] = {};
  int64_t b_strides[kMaxRank] = {};
};

enum class PointwiseOp : int {
  kAdd, kSub, kMul, kDiv, kMax, kMin, kPow,                                           // binary
  kRelu, kSigmoid, kTanh, kLeakyRelu, kClip, kHardSigmoid, kHardSwish, kErf, kExp,    // unary
  kSqrt, kNeg, kAbs, kGeluErf, kGeluTanh, kIdentity, kSilu, kReciprocal, kLog, kElu,
};

// y = op(a, b) with broadcasting (binary ops) or y = op(a) (unary; b ignored); alpha/beta are
// the op's attributes (LeakyRelu alpha, Clip min/max, HardSigmoid alpha/beta, Elu alpha).
cudaError_t launch_pointwise(PointwiseOp op, bool half, const void* a, const void* b, void* y,
                             const BroadcastDesc& d, float alpha, float beta, cudaStream_t stream);

// NCHW <-> NHWC reformat with dtype conversion (src/dst each float or half).
cudaError_t launch_reformat(const void* src, bool src_half, bool src_nhwc, void* dst, bool dst_half, bool dst_nhwc,
                            int64_t n, int64_t c, int64_t h, int64_t w, cudaStream_t stream);
// Dense dtype conversion float <-> half (count elements).
cudaError_t launch_convert(const void* src, bool src_half, void* dst, bool dst_half, int64_t count, cudaStream_t stream);

// Softmax (log_softmax when `log`) over the innermost `cols` of a [rows, cols] array.
cudaError_t launch_softmax(const void* x, void* y, bool half, int64_t rows, int64_t cols, bool log, cudaStream_t stream);

// Copies a [outer, inner_in] block array into columns [offset, offset + inner_in) of a
// [outer, inner_out] array (one Concat input).
cudaError_t launch_concat_part(const void* src, void* dst, int elem_bytes, int64_t outer, int64_t inner_in,
                               int64_t inner_out, int64_t offset, cudaStream_t stream);

}  // namespace kiln::cuda
