// Element types Kiln knows. Storage formats of the low-bit types:
//   kFloat8E4M3FN, kFloat8E5M2: OCP 8-bit Floating Point Specification (OFP8) rev 1.0, 1 byte each.
//   kFloat4E2M1: OCP Microscaling Formats (MX) v1.0 sec. 5.3.3; kInt4/kUInt4: two's complement /
//   unsigned nibble; 4-bit types pack two elements per byte, element 0 in the low nibble (ONNX
//   IR spec, "4-bit types").
//   kNF4: NormalFloat4 codebook from Dettmers et al., "QLoRA" (2023), appendix E; packed like kInt4.
//   kFloat8E4M3FNUZ, kFloat8E5M2FNUZ: the GraphCore variants (ONNX docs/technical/float8.md): no
//   infinities, no negative zero, one NaN (0x80), exponent bias one more than E4M3FN / E5M2
//   (8 and 16; largest 240 and 57344).
//   kFloat8E8M0: OCP MX v1.0 sec. 5.4.1 scale type: 8 exponent bits, no sign, no mantissa;
//   code e is 2^(e-127), 0xFF is NaN (ONNX TensorProto FLOAT8E8M0, opset 24).
//   kInt2/kUInt2: two's complement / unsigned 2-bit ints ([-2, 1] / [0, 3]), four per byte,
//   element 0 in bits 0-1 (ONNX onnx.proto, "2-bit types", opset 25).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln {

enum class DataType : uint8_t {
  kUndefined = 0,
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kFloat8E4M3FN,
  kFloat8E5M2,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kBool,
  kInt4,
  kUInt4,
  kFloat4E2M1,
  kNF4,
  kFloat8E4M3FNUZ,
  kFloat8E5M2FNUZ,
  kFloat8E8M0,
  kInt2,
  kUInt2,
  kString,   // imported so errors can name it; no kernel computes on strings
  kCount,
};

// "float32", "fp8e4m3fn", ... (stable: used in plans' text dumps and CLI output).
const char* dtype_name(DataType t);
// Parses dtype_name's output; kUndefined if unknown.
DataType dtype_from_name(const std::string& name);
// Storage bits per element (4 / 2 for the packed 4-bit / 2-bit types, 8 for bool).
int dtype_bits(DataType t);
// Bytes needed to store n elements (rounds packed 4-bit and 2-bit types up).
size_t dtype_storage_bytes(DataType t, int64_t n);
bool dtype_is_float(DataType t);    // any floating format, incl. fp8 (all five)/fp4/nf4
bool dtype_is_integer(DataType t);  // signed or unsigned ints incl. int4/uint4/int2/uint2 (not bool)
bool dtype_is_signed(DataType t);   // signed ints and the floats that have a sign (not fp8e8m0)

}  // namespace kiln
