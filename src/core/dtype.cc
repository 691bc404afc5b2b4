// DataType names and sizes.
#include <cstring>

#include "kiln/types.h"

namespace kiln {

const char* dtype_name(DataType t) {
  switch (t) {
    case DataType::kUndefined: return "undefined";
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kFloat8E4M3FN: return "fp8e4m3fn";
    case DataType::kFloat8E5M2: return "fp8e5m2";
    case DataType::kInt8: return "int8";
    case DataType::kInt16: return "int16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kUInt8: return "uint8";
    case DataType::kUInt16: return "uint16";
    case DataType::kUInt32: return "uint32";
    case DataType::kUInt64: return "uint64";
    case DataType::kBool: return "bool";
    case DataType::kInt4: return "int4";
    case DataType::kUInt4: return "uint4";
    case DataType::kFloat4E2M1: return "fp4e2m1";
    case DataType::kNF4: return "nf4";
    case DataType::kFloat8E4M3FNUZ: return "fp8e4m3fnuz";
    case DataType::kFloat8E5M2FNUZ: return "fp8e5m2fnuz";
    case DataType::kFloat8E8M0: return "fp8e8m0";
    case DataType::kInt2: return "int2";
    case DataType::kUInt2: return "uint2";
    case DataType::kString: return "string";
    case DataType::kCount: break;
  }
  return "invalid";
}

DataType dtype_from_name(const std::string& name) {
  for (int i = 0; i < static_cast<int>(DataType::kCount); ++i) {
    auto t = static_cast<DataType>(i);
    if (name == dtype_name(t)) return t;
  }
  return DataType::kUndefined;
}

int dtype_bits(DataType t) {
  switch (t) {
    case DataType::kFloat64: case DataType::kInt64: case DataType::kUInt64: return 64;
    case DataType::kFloat32: case DataType::kInt32: case DataType::kUInt32: return 32;
    case DataType::kFloat16: case DataType::kBFloat16: case DataType::kInt16: case DataType::kUInt16: return 16;
    case DataType::kFloat8E4M3FN: case DataType::kFloat8E5M2: case DataType::kInt8: case DataType::kUInt8:
    case DataType::kFloat8E4M3FNUZ: case DataType::kFloat8E5M2FNUZ: case DataType::kFloat8E8M0:
    case DataType::kBool: return 8;
    case DataType::kInt4: case DataType::kUInt4: case DataType::kFloat4E2M1: case DataType::kNF4: return 4;
    case DataType::kInt2: case DataType::kUInt2: return 2;
    case DataType::kString: return 8 * static_cast<int>(sizeof(void*));
    case DataType::kUndefined: case DataType::kCount: return 0;
  }
  return 0;
}

size_t dtype_storage_bytes(DataType t, int64_t n) {
  return (static_cast<size_t>(n) * dtype_bits(t) + 7) / 8;
}

bool dtype_is_float(DataType t) {
  switch (t) {
    case DataType::kFloat32: case DataType::kFloat64: case DataType::kFloat16: case DataType::kBFloat16:
    case DataType::kFloat8E4M3FN: case DataType::kFloat8E5M2: case DataType::kFloat4E2M1: case DataType::kNF4:
    case DataType::kFloat8E4M3FNUZ: case DataType::kFloat8E5M2FNUZ: case DataType::kFloat8E8M0:
      return true;
    default: return false;
  }
}

bool dtype_is_integer(DataType t) {
  switch (t) {
    case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: case DataType::kInt64:
    case DataType::kUInt8: case DataType::kUInt16: case DataType::kUInt32: case DataType::kUInt64:
    case DataType::kInt4: case DataType::kUInt4: case DataType::kInt2: case DataType::kUInt2:
      return true;
    default: return false;
  }
}

bool dtype_is_signed(DataType t) {
  switch (t) {
    case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: case DataType::kInt64: case DataType::kInt4:
    case DataType::kInt2:
      return true;
    case DataType::kFloat8E8M0: return false;  // exponent only: every value is positive (or NaN)
    default: return dtype_is_float(t);
  }
}

}  // namespace kiln
