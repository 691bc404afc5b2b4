// Bit-faithful element formats and per-element conversions between any two dtypes.
// Sources:
//   fp16: IEEE 754-2008 binary16; bf16: the upper 16 bits of binary32, rounded to nearest even.
//   fp8 E4M3FN / E5M2: OCP 8-bit Floating Point Specification (OFP8) rev 1.0 (2023);
//     overflow rules follow the ONNX Cast operator (opset 19) "saturate" table.
//   fp4 E2M1: OCP Microscaling Formats (MX) v1.0 sec. 5.3.3 (values 0,0.5,1,1.5,2,3,4,6; no inf/NaN).
//   nf4: QLoRA (Dettmers et al. 2023) appendix E codebook.
// All float -> narrow conversions round to nearest, ties to even.
#pragma once

#include <cstdint>

#include "kiln/types.h"

namespace kiln {

struct Float16 {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};

float fp16_to_float(uint16_t h);
uint16_t float_to_fp16(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);
// From double, rounded once (a float64 -> float32 -> fp16 path would round twice).
uint16_t double_to_fp16(double f);
uint16_t double_to_bf16(double f);

// FP8: `saturate` clamps finite overflow (and E4M3FN's +-inf) to the largest finite value;
// otherwise overflow gives NaN (E4M3FN) or +-inf (E5M2).
float fp8e4m3fn_to_float(uint8_t v);
uint8_t float_to_fp8e4m3fn(float f, bool saturate = true);
uint8_t double_to_fp8e4m3fn(double f, bool saturate = true);
float fp8e5m2_to_float(uint8_t v);
uint8_t float_to_fp8e5m2(float f, bool saturate = true);
uint8_t double_to_fp8e5m2(double f, bool saturate = true);

// 4-bit codes (0..15, low nibble).
float fp4e2m1_to_float(uint8_t code);
uint8_t float_to_fp4e2m1(float f);  // saturates to +-6; NaN -> +6 (no NaN code exists)
uint8_t double_to_fp4e2m1(double f);
float nf4_to_float(uint8_t code);
// Nearest codebook value (the lower code on an exact tie); input expected in [-1, 1], values
// outside clamp to +-1; NaN -> code 7 (0.0).
uint8_t float_to_nf4(float f);
int int4_from_code(uint8_t code);   // sign-extends a nibble: 0..15 -> -8..7

inline float half_to_float(Float16 h) { return fp16_to_float(h.bits); }
inline float half_to_float(BFloat16 h) { return bf16_to_float(h.bits); }

// Element i of an array of dtype `t` at `data`, as double / int64 (packed types handled).
double load_as_double(DataType t, const void* data, int64_t i);
int64_t load_as_int64(DataType t, const void* data, int64_t i);
// Stores `v` as element i of dtype `t` (float->int truncates toward zero, then wraps like C++;
// float->narrow float rounds to nearest even; `saturate` applies to fp8).
void store_from_double(DataType t, void* data, int64_t i, double v, bool saturate = true);
void store_from_int64(DataType t, void* data, int64_t i, int64_t v);

}  // namespace kiln
