// Helpers shared by the reduce family's files (ops_reduce*.cc): accumulator types, integer
// tensor reading (axes, K, axis inputs) and axis normalization. Internal to the CPU backend.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/dispatch.h"

namespace kiln::cpu {

// Per-family sub-registrations, called from register_reduce_kernels (ops_reduce.cc).
void register_argtopk_kernels(KernelRegistry& r);  // ops_reduce_argtopk.cc: ArgMax, ArgMin, TopK, CumSum
void register_loss_kernels(KernelRegistry& r);     // ops_reduce_loss.cc: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// The type a reduction over T accumulates in: float for float/fp16/bf16, double for double,
// 64-bit integers (of T's signedness) for integers, so int8/int16/int32 sums do not wrap early.
template <typename T>
using AccOf = std::conditional_t<
    kIsHalf<T> || std::is_same_v<T, float>, float,
    std::conditional_t<std::is_same_v<T, double>, double,
                       std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>>;

template <typename A, typename T>
inline A load_as(T v) {
  if constexpr (kIsHalf<T>) return static_cast<A>(half_to_float(v));
  else return static_cast<A>(v);
}

template <typename T, typename A>
inline T store_as(A v) {
  if constexpr (std::is_same_v<T, Float16>) return Float16{float_to_fp16(static_cast<float>(v))};
  else if constexpr (std::is_same_v<T, BFloat16>) return BFloat16{float_to_bf16(static_cast<float>(v))};
  else return static_cast<T>(v);
}

// Integer accumulators wrap (two's complement, as the narrower storage types would) instead of
// hitting signed-overflow UB on extreme data; float accumulators add and multiply normally.
template <typename A>
inline A acc_add(A a, A b) {
  if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else return a + b;
}
template <typename A>
inline A acc_mul(A a, A b) {
  if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else return a * b;
}

// Maps axis from [-rank, rank) to [0, rank); false when out of range.
inline bool normalize_axis(int64_t& axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  return true;
}

// The values of an int32/int64 tensor (axes, K, axis inputs); fails on other dtypes.
inline StatusOr<std::vector<int64_t>> read_int_values(const KernelContext& ctx, const Tensor& t, const char* what) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DataType::kInt64) {
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.data<int64_t>()[i];
  } else if (t.dtype() == DataType::kInt32) {
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.data<int32_t>()[i];
  } else {
    return ctx.fail(std::string(what) + " must be int32 or int64, got " + dtype_name(t.dtype()));
  }
  return v;
}

}  // namespace kiln::cpu
