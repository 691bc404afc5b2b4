// Launchers of Kiln's kernels on exactly typed tensors (issue 11): bool masks, int32/int64
// positions and shapes, and the float predicates / comparisons that produce masks. Unlike the
// float kernels (kernels.h), these compute in the element type itself: integer arithmetic wraps
// as two's complement, bools are stored one byte per element as 0/1 (StorageType::kBool), and
// float inputs of comparisons are compared as stored. Tensors are row-major (logical order).
// Every launcher enqueues on `stream`, never allocates and never synchronizes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"
#include "backends/cuda/kernels_more.h"

namespace kiln::cuda {

// The elementwise ops of launch_exact_elementwise, by the ONNX operator they implement
// (Operators.md sections of the same names).
enum class ExactOp : int {
  // a OP b on int32 / int64 / float storage / bool (Equal only) inputs; bool output.
  kEqual, kLess, kLessOrEqual, kGreater, kGreaterOrEqual,
  // logical ops on bool inputs (nonzero = true); bool output. kNot is unary.
  kAnd, kOr, kXor, kNot,
  // unary predicates on float storage; bool output. IsInf's detect_positive / detect_negative
  // select kIsInf (both), kIsPosInf or kIsNegInf.
  kIsNaN, kIsInf, kIsPosInf, kIsNegInf,
  // integer arithmetic on int32 / int64 / uint64 (unsigned Div / Mod / Min / Max), output in the
  // input type, two's-complement wrap-around;
  // the same ops on float64 in IEEE double (Mod / Fmod: std::fmod, then the divisor's sign for
  // Mod; Min / Max propagate NaN; Pow: pow), docs/decisions/0075.
  // Div truncates toward zero (ONNX Div on integers, C semantics); Mod takes the divisor's sign
  // (fmod = 0, Python's %), Fmod the dividend's (fmod = 1). A zero divisor — an error in the CPU
  // reference, undefined in ONNX — gives 0 here; MIN / -1 wraps to MIN. Neg and Abs are unary.
  // Pow: a^b by squaring, wrapping; a negative b gives the truncated real result (1 for a == 1,
  // +-1 for a == -1, else 0), as the CPU reference's integer Pow.
  kAdd, kSub, kMul, kDiv, kMod, kFmod, kNeg, kAbs, kMin, kMax, kPow,
  // BitShift LEFT / RIGHT on uint64 (docs/decisions/0075): a shift by 64 or more gives 0.
  kShl, kShr,
};
bool exact_op_is_unary(ExactOp op);
// Whether the op writes bool (comparisons, logical ops, predicates); else the input type.
bool exact_op_is_predicate(ExactOp op);
const char* exact_op_name(ExactOp op);

// y = op(a, b) over the dense output d.out_dims with broadcast strides d.a_strides /
// d.b_strides (elements; 0 on broadcast dims); b is ignored by unary ops. `in_t` is the type of
// a and b; y is bool (exact_op_is_predicate) or in_t. An (op, type) pair outside the lists
// above returns cudaErrorInvalidValue.
cudaError_t launch_exact_elementwise(ExactOp op, StorageType in_t, const void* a, const void* b, void* y,
                                     const BroadcastDesc& d, cudaStream_t stream);

// ONNX Where with a condition computed at run time: y = c ? a : b, c a bool tensor; a, b and y
// share an element size of 1, 2, 4 or 8 bytes (the bits are copied, so one kernel serves every
// type). c_strides broadcasts c like d.a_strides / d.b_strides.
struct SelectDesc {
  BroadcastDesc d;
  int64_t c_strides[kMaxRank] = {};
};
cudaError_t launch_select(const void* c, const void* a, const void* b, void* y, int elem_bytes, const SelectDesc& s,
                          cudaStream_t stream);

// ONNX Cast between any two of fp32, fp64, fp16, bf16, int32, int64 and bool, `count` elements:
// to bool is x != 0 (NaN is true); from bool is 0 / 1; float to integer truncates toward zero
// (out-of-range values saturate, NaN gives 0: the CUDA conversion instructions); integer to
// integer keeps the low bits; to fp32 / fp16 / bf16 rounds to nearest even (from fp64 once, not
// through fp32).
cudaError_t launch_cast(const void* x, StorageType xt, void* y, StorageType yt, int64_t count, cudaStream_t stream);
// float64 -> int32 / int64 as the CPU reference's integer Pow with a float exponent stores its
// result (saturating_int: NaN gives 0, out-of-range values the type's bound, others truncate).
// cudaErrorInvalidValue for another output type.
cudaError_t launch_saturating_cast(const double* x, void* y, StorageType yt, int64_t count, cudaStream_t stream);

// ONNX Range: y[i] = start + i * delta for i < count, start and delta device scalars of type
// t (int32 / int64: computed in t, wrapping; float types: in double, then rounded to t).
cudaError_t launch_range(const void* start, const void* delta, void* y, StorageType t, int64_t count, cudaStream_t stream);

// ONNX CumSum along the middle axis of a [outer, n, inner] array: running sums from the start
// (or from the end when `reverse`), each output leaving its own element out when `exclusive`.
// Integers accumulate in int64 (wrapping, stored in t); float storage accumulates in float.
cudaError_t launch_cumsum(const void* x, void* y, StorageType t, int64_t outer, int64_t n, int64_t inner,
                          bool exclusive, bool reverse, cudaStream_t stream);

// ONNX Trilu over a [batch, rows, cols] array: element (i, j) is kept when j - i >= k (upper)
// or j - i <= k (lower), else zero bytes; any element size of 1, 2, 4 or 8 bytes. k is read from
// the device scalar `k_dev` when it is not null (a k computed at run time), else it is `k`.
cudaError_t launch_trilu(const void* x, void* y, int elem_bytes, int64_t batch, int64_t rows, int64_t cols, int64_t k,
                         const int64_t* k_dev, bool upper, cudaStream_t stream);

// ONNX ArgMax / ArgMin along the middle axis of a [outer, n, inner] array of type t (float
// storage compared in float, int32 / int64 exactly): y[o, i] = the index of the largest
// (`max`) or smallest value, the first one unless `last`; NaN counts as the extreme (numpy, the
// CPU reference). y is int64. n >= 1.
cudaError_t launch_arg_extreme(const void* x, StorageType t, int64_t* y, int64_t outer, int64_t n, int64_t inner, bool max,
                               bool last, cudaStream_t stream);

// Integer reductions (ONNX ReduceSum / ReduceMax / ReduceMin on int32 / int64) over the middle
// axis of a [outer, red, inner] array: sums wrap in two's complement; red == 0 gives 0 for a sum
// and the type's lowest / highest value for max / min (the identities). `max`: 1 max, -1 min,
// 0 sum.
cudaError_t launch_int_reduce(const void* x, void* y, StorageType t, int max, int64_t outer, int64_t red, int64_t inner,
                              cudaStream_t stream);

// float64 reductions (every ReduceKind, ONNX Reduce* on a double tensor; docs/decisions/0075)
// over the middle axis of a [outer, red, inner] array of doubles, accumulated in double in
// order, one thread per output, as the CPU reference computes them: Max / Min propagate NaN,
// LogSumExp is m + log(sum(exp(x - m))) for a finite maximum m (else m), Mean divides by red.
cudaError_t launch_f64_reduce(const double* x, double* y, ReduceKind kind, int64_t outer, int64_t red, int64_t inner,
                              cudaStream_t stream);

}  // namespace kiln::cuda
