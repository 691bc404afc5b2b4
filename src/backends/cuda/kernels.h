// Launchers of Kiln's own CUDA kernels (pointwise, fused pointwise programs, reformat, softmax,
// concat, split, conv epilogue). Every launcher enqueues on `stream`, never allocates and never
// synchronizes. Elements are stored as a StorageType (float, __half or __nv_bfloat16) and
// computed in float. Shapes are physical (as stored).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ir/pointwise_opcode.h"

namespace kiln::cuda {

constexpr int kMaxRank = 8;  // the rank the GPU kernels index (ONNX node cases reach 7: NLLLoss over d1..d5)

// How an engine tensor's elements are stored in device memory. The float types (fp32, fp16,
// bf16) hold activations and weights, computed in float by the kernels of this header. kI32 /
// kI64 / kBool hold int32 / int64 / bool tensors exactly (bool: one byte per element, 0 or 1),
// row-major: integer and bool graph inputs, positions, shapes and masks; the kernels of
// kernels_exact.h compute on them, and the lowering gives a node integer or bool storage when its
// output has that dtype (docs/decisions/0051). kF64 holds float64 tensors exactly (IEEE double,
// row-major): like the integer types it is never a float kernel's storage; the exact kernels
// compute on it in double (docs/decisions/0075). kU64 holds uint64 tensors exactly; only the exact
// kernels that take it compute on it, with unsigned semantics (docs/decisions/0075). kI8 / kF8E4M3
// hold 8-bit quantization codes (int8; FP8 E4M3FN bits), one byte per element: the activations
// QuantConv layers pass to each other (docs/decisions/0081); only the QuantConv factory writes and
// reads them (never a float kernel's or an exact kernel's storage).
enum class StorageType : int {
  kF32 = 0, kF16 = 1, kBF16 = 2, kI32 = 3, kI64 = 4, kBool = 5, kI8 = 6, kF8E4M3 = 7, kF64 = 16, kU64 = 17
};
inline int storage_bytes(StorageType t) {
  switch (t) {
    case StorageType::kI64: case StorageType::kF64: case StorageType::kU64: return 8;
    case StorageType::kF32: case StorageType::kI32: return 4;
    case StorageType::kF16: case StorageType::kBF16: return 2;
    case StorageType::kBool: case StorageType::kI8: case StorageType::kF8E4M3: return 1;
  }
  return 4;
}
inline bool storage_is_int(StorageType t) { return t == StorageType::kI32 || t == StorageType::kI64; }
inline bool storage_is_float(StorageType t) {
  return t == StorageType::kF32 || t == StorageType::kF16 || t == StorageType::kBF16;
}
inline const char* storage_name(StorageType t) {
  switch (t) {
    case StorageType::kBool: return "bool";
    case StorageType::kI8: return "int8";
    case StorageType::kF8E4M3: return "fp8e4m3";
    case StorageType::kF16: return "fp16";
    case StorageType::kBF16: return "bf16";
    case StorageType::kI32: return "int32";
    case StorageType::kI64: return "int64";
    case StorageType::kF64: return "fp64";
    case StorageType::kU64: return "uint64";
    case StorageType::kF32: break;
  }
  return "fp32";
}

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
  kSqrt, kNeg, kAbs, kGeluErf, kGeluTanh, kIdentity, kSilu, kReciprocal, kLog, kElu, kSin, kCos,
};

// y = op(a, b) with broadcasting (binary ops) or y = op(a) (unary; b ignored); alpha/beta are
// the op's attributes (LeakyRelu alpha, Clip min/max, HardSigmoid alpha/beta, Elu alpha).
// kGeluErf / kGeluTanh use the fast forms of fast_math.cuh (erf within ~8e-7 absolute of erff on
// the device; docs/decisions/0082). Inputs of the output's shape, a row / channel broadcast or
// one element, 16-byte aligned: 16 bytes per access; other broadcasts: per-element indexing.
cudaError_t launch_pointwise(PointwiseOp op, StorageType t, const void* a, const void* b, void* y,
                             const BroadcastDesc& d, float alpha, float beta, cudaStream_t stream);

// The period of a broadcast operand (host; the vector paths of launch_pointwise and
// launch_fused_pointwise, docs/decisions/0082): with element strides `strides` on an output of
// dims `dims` (rank r, 0 strides on broadcast dims), P such that output element i reads the
// operand's element i mod P — the product of the innermost dims over which the operand is
// contiguous, when every dim outside them has stride 0 or size 1. 1: one element; the output's
// element count: the output's own shape; -1: not periodic (e.g. [B, 1, H] under [B, S, H]).
int64_t broadcast_period(const int64_t* dims, const int64_t* strides, int r);

// One FusedPointwise program on the device (see ir/pointwise_program.h): per output element,
// instruction i computes register i with ir::pw_apply from its operands, and the last register
// is stored. Passed by value as a kernel parameter (about 1.5 KB, under the 4 KB limit).
struct PwDeviceInstr {
  int32_t op;                      // ir::PwOpcode
  int32_t src[ir::kMaxPwArgs];     // >= 0: register; -1 - k: input k; kPwImmediate: imm[a]
  float imm[ir::kMaxPwArgs];
};
constexpr int32_t kPwImmediate = -1000;
struct PwDeviceProgram {
  int rank = 0;                                    // of the physical output (1..kMaxRank)
  int64_t out_dims[kMaxRank] = {};                 // physical (as stored) output dims
  int num_inputs = 0;
  int64_t in_strides[ir::kMaxPwInputs][kMaxRank] = {};  // element strides, 0 on broadcast dims
  int num_instrs = 0;
  PwDeviceInstr instrs[ir::kMaxPwInstrs] = {};
};
struct PwDevicePointers {
  const void* in[ir::kMaxPwInputs] = {};
};

// y = program(inputs) over the dense output; every input and y share one storage type. The
// same vector path as launch_pointwise when every input is periodic (docs/decisions/0082).
cudaError_t launch_fused_pointwise(const PwDeviceProgram& p, const PwDevicePointers& in, void* y, StorageType t,
                                   cudaStream_t stream);

// NCHW <-> NHWC reformat with dtype conversion. The source is [n, c, h, w] (logical); the
// destination has `dst_c` >= c channels, those from c on written as zeros (channel padding
// for tensor-core convolutions; dst_c == c for a plain reformat).
cudaError_t launch_reformat(const void* src, StorageType src_t, bool src_nhwc, void* dst, StorageType dst_t, bool dst_nhwc,
                            int64_t n, int64_t c, int64_t h, int64_t w, int64_t dst_c, cudaStream_t stream);
// Dense dtype conversion (count elements); an integer source converts exactly up to 2^24
// (fp32) / 2^11 (fp16) and rounds to nearest beyond; an integer destination truncates.
cudaError_t launch_convert(const void* src, StorageType src_t, void* dst, StorageType dst_t, int64_t count,
                           cudaStream_t stream);
// One thread that waits `ns` nanoseconds of the GPU's global timer (%globaltimer, PTX ISA
// "Special registers"), holding `stream` while the host enqueues work behind it (the per-layer
// profiler: the layers then run back to back, not at the host's launch rate).
cudaError_t launch_spin(unsigned long long ns, cudaStream_t stream);

// Softmax (log_softmax when `log`) over the innermost `cols` of a [rows, cols] array: one warp
// per row (row in registers) when cols is a multiple of 8 up to 1024 and x, y are 16-byte
// aligned, else one block per row.
cudaError_t launch_softmax(const void* x, void* y, StorageType t, int64_t rows, int64_t cols, bool log, cudaStream_t stream);

// Copies a [outer, inner_in] block array into columns [offset, offset + inner_in) of a
// [outer, inner_out] array (one Concat input).
cudaError_t launch_concat_part(const void* src, void* dst, int elem_bytes, int64_t outer, int64_t inner_in,
                               int64_t inner_out, int64_t offset, cudaStream_t stream);
// Copies columns [offset, offset + inner_out) of a [outer, inner_in] array into a dense
// [outer, inner_out] array (one Split output).
cudaError_t launch_split_part(const void* src, void* dst, int elem_bytes, int64_t outer, int64_t inner_in,
                              int64_t inner_out, int64_t offset, cudaStream_t stream);

// 2-D max/average pooling of a logical [n, c, h, w] tensor (NCHW or NHWC storage, same for y)
// into [n, c, oh, ow]; symmetric pads; average divides by kh*kw when count_include_pad, else by
// the in-bounds count.
struct PoolDesc {
  bool max = true, count_include_pad = false, nhwc = false;
  int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1;
};
cudaError_t launch_pool(const void* x, void* y, StorageType t, const PoolDesc& d, cudaStream_t stream);

// Convolution epilogue in place on y (`count` elements, channel = innermost index when `nhwc`,
// else (i / spatial) % channels): y = act(y + bias[ch] (+ z)), act given as a pointwise op
// (kIdentity for none) with its alpha/beta. bias has `channels` elements of type t; z (may be
// null) has y's shape and layout.
cudaError_t launch_bias_act(void* y, const void* bias, const void* z, StorageType t, int64_t count, int64_t channels,
                            int64_t spatial, bool nhwc, PointwiseOp act, float alpha, float beta, cudaStream_t stream);

}  // namespace kiln::cuda
