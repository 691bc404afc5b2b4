// Dtype dispatch for CPU reference kernels: calls `f(T{})` with the C++ storage type of a
// DataType. Float16/BFloat16 are storage-only structs; compute in float via to_float()/
// from_float<T>() (or cast the tensor to float32 with cast_tensor and back).
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/numerics.h"
#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln::cpu {

struct Bool8 { uint8_t v; };  // storage of DataType::kBool (one byte, 0 or 1)

template <typename T> inline double to_double(T v) { return static_cast<double>(v); }
template <> inline double to_double(Float16 v) { return fp16_to_float(v.bits); }
template <> inline double to_double(BFloat16 v) { return bf16_to_float(v.bits); }
template <typename T> inline T from_double(double v) { return static_cast<T>(v); }
template <> inline Float16 from_double(double v) { return Float16{double_to_fp16(v)}; }
template <> inline BFloat16 from_double(double v) { return BFloat16{double_to_bf16(v)}; }

template <typename T> constexpr DataType dtype_of();
template <> constexpr DataType dtype_of<float>() { return DataType::kFloat32; }
template <> constexpr DataType dtype_of<double>() { return DataType::kFloat64; }
template <> constexpr DataType dtype_of<Float16>() { return DataType::kFloat16; }
template <> constexpr DataType dtype_of<BFloat16>() { return DataType::kBFloat16; }
template <> constexpr DataType dtype_of<int8_t>() { return DataType::kInt8; }
template <> constexpr DataType dtype_of<int16_t>() { return DataType::kInt16; }
template <> constexpr DataType dtype_of<int32_t>() { return DataType::kInt32; }
template <> constexpr DataType dtype_of<int64_t>() { return DataType::kInt64; }
template <> constexpr DataType dtype_of<uint8_t>() { return DataType::kUInt8; }
template <> constexpr DataType dtype_of<uint16_t>() { return DataType::kUInt16; }
template <> constexpr DataType dtype_of<uint32_t>() { return DataType::kUInt32; }
template <> constexpr DataType dtype_of<uint64_t>() { return DataType::kUInt64; }
template <> constexpr DataType dtype_of<Bool8>() { return DataType::kBool; }

// float32, float64, float16, bfloat16.
template <typename F>
Status dispatch_float(DataType t, F&& f) {
  switch (t) {
    case DataType::kFloat32: return f(float{});
    case DataType::kFloat64: return f(double{});
    case DataType::kFloat16: return f(Float16{});
    case DataType::kBFloat16: return f(BFloat16{});
    default: return unsupported(std::string("dtype ") + dtype_name(t) + " is not supported here");
  }
}

// Every 8..64-bit integer type (not bool).
template <typename F>
Status dispatch_int(DataType t, F&& f) {
  switch (t) {
    case DataType::kInt8: return f(int8_t{});
    case DataType::kInt16: return f(int16_t{});
    case DataType::kInt32: return f(int32_t{});
    case DataType::kInt64: return f(int64_t{});
    case DataType::kUInt8: return f(uint8_t{});
    case DataType::kUInt16: return f(uint16_t{});
    case DataType::kUInt32: return f(uint32_t{});
    case DataType::kUInt64: return f(uint64_t{});
    default: return unsupported(std::string("dtype ") + dtype_name(t) + " is not supported here");
  }
}

// Floats and integers (not bool, not fp8/4-bit: cast those first).
template <typename F>
Status dispatch_numeric(DataType t, F&& f) {
  if (dtype_is_integer(t) && dtype_bits(t) >= 8) return dispatch_int(t, f);
  return dispatch_float(t, f);
}

// Numeric types and bool: for data movement (gather, concat, ...), any byte-sized layout.
template <typename F>
Status dispatch_all(DataType t, F&& f) {
  if (t == DataType::kBool) return f(Bool8{});
  return dispatch_numeric(t, f);
}

}  // namespace kiln::cpu
