// Bit-faithful element formats and per-element conversions between any two dtypes.
// Sources:
//   fp16: IEEE 754-2008 binary16; bf16: the upper 16 bits of binary32, rounded to nearest even.
//   fp8 E4M3FN / E5M2: OCP 8-bit Floating Point Specification (OFP8) rev 1.0 (2023);
//     overflow rules follow the ONNX Cast operator (opset 19) "saturate" table.
//   fp4 E2M1: OCP Microscaling Formats (MX) v1.0 sec. 5.3.3 (values 0,0.5,1,1.5,2,3,4,6; no inf/NaN).
//   nf4: QLoRA (Dettmers et al. 2023) appendix E codebook.
//   fp8 E4M3FNUZ / E5M2FNUZ: ONNX docs/docsgen/source/technical/float8.md ("E4M3FNUZ and
//     E5M2FNUZ": bias 8 / 16, NaN = 0x80 only, no infinities, no -0); overflow per the ONNX Cast
//     (opset 19+) saturate tables.
//   fp8 E8M0: OCP MX v1.0 sec. 5.4.1 (2^(code-127), 0xFF NaN); rounding per ONNX Cast-24 round_mode.
//   int2 / uint2: ONNX onnx.proto (opset 25), four per byte, element 0 in bits 0-1.
// All float -> narrow conversions round to nearest, ties to even (E8M0: see E8M0Rounding).
#pragma once

#include <cstdint>
#include <string>

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
// dst[i] = fp16_to_float(src[i]) / bf16_to_float(src[i]) for i < n (the bulk form of a weight
// conversion; single-threaded, see core/parallel.h to split it).
void fp16_to_float_n(const uint16_t* src, float* dst, int64_t n);
void bf16_to_float_n(const uint16_t* src, float* dst, int64_t n);
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

// FNUZ fp8: one zero (0x00; -0 and values rounding to -0 give 0x00) and one NaN (0x80, also for
// -NaN). `saturate` clamps finite overflow and +-inf to +-240 (E4M3FNUZ) / +-57344 (E5M2FNUZ);
// otherwise overflow and +-inf give NaN (ONNX Cast, saturate tables).
float fp8e4m3fnuz_to_float(uint8_t v);
uint8_t double_to_fp8e4m3fnuz(double f, bool saturate = true);
float fp8e5m2fnuz_to_float(uint8_t v);
uint8_t double_to_fp8e5m2fnuz(double f, bool saturate = true);

// E8M0 (MX scale): code 0..254 is 2^(code-127) (2^-127 is a float32 subnormal, exact), 255 NaN.
float fp8e8m0_to_float(uint8_t v);
// ONNX Cast-24 `round_mode` for float -> E8M0, applied to |x| = m * 2^e, m in [1, 2):
//   kUp: 2^(e+1) unless m == 1 (away from zero); kDown: 2^e; kNearest: 2^(e+1) iff m >= 1.5
//   (ties up). These equal ONNX's reference (onnx.numpy_helper.to_float8e8m0) on float32 normals.
enum class E8M0Rounding : uint8_t { kUp, kDown, kNearest };
// Parses "up" / "down" / "nearest"; false for anything else.
bool e8m0_rounding_from_name(const std::string& name, E8M0Rounding* out);
// NaN -> 0xFF. A result outside [2^-127, 2^127] (and 0, and +-inf) gives E8M0_MIN (0x00) /
// E8M0_MAX (0xFE) with `saturate`, else NaN: the ONNX Cast table. The sign is ignored (negative
// inputs are unspecified in ONNX; its reference reads only the exponent bits). The reference
// differs in three corners: it maps +-inf to NaN even when saturating, and reads float32
// subnormals bitwise ("up" gives 2^-126 below 2^-127); this follows the Cast table's values.
uint8_t double_to_fp8e8m0(double f, bool saturate = true, E8M0Rounding mode = E8M0Rounding::kUp);

// 4-bit codes (0..15, low nibble).
float fp4e2m1_to_float(uint8_t code);
uint8_t float_to_fp4e2m1(float f);  // saturates to +-6; NaN -> +6 (no NaN code exists)
uint8_t double_to_fp4e2m1(double f);
float nf4_to_float(uint8_t code);
// Nearest codebook value (the lower code on an exact tie); input expected in [-1, 1], values
// outside clamp to +-1; NaN -> code 7 (0.0).
uint8_t float_to_nf4(float f);
int int4_from_code(uint8_t code);   // sign-extends a nibble: 0..15 -> -8..7
int int2_from_code(uint8_t code);   // sign-extends 2 bits: 0..3 -> 0, 1, -2, -1

inline float half_to_float(Float16 h) { return fp16_to_float(h.bits); }
inline float half_to_float(BFloat16 h) { return bf16_to_float(h.bits); }

// Element i of an array of dtype `t` at `data`, as double / int64 (packed 4- and 2-bit types
// handled: element i is nibble i % 2 / bit pair i % 4 of byte i / 2 / i / 4, low bits first).
double load_as_double(DataType t, const void* data, int64_t i);
int64_t load_as_int64(DataType t, const void* data, int64_t i);
// Stores `v` as element i of dtype `t` (float->int truncates toward zero, then wraps like C++;
// float->narrow float rounds to nearest even; `saturate` applies to fp8 (E8M0: rounding kUp);
// float -> int4/uint4/int2/uint2 rounds half to even, then saturates to the type's range, NaN -> 0;
// int -> int4/uint4/int2/uint2 saturates).
void store_from_double(DataType t, void* data, int64_t i, double v, bool saturate = true);
void store_from_int64(DataType t, void* data, int64_t i, int64_t v);

}  // namespace kiln
