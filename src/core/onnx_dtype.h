// The numbering of ONNX's TensorProto.DataType enum (onnx.proto of ONNX 1.19+: FLOAT = 1,
// UINT8 = 2, ..., FLOAT8E4M3FNUZ = 18, FLOAT8E5M2FNUZ = 20, FLOAT4E2M1 = 23, FLOAT8E8M0 = 24,
// UINT2 = 25, INT2 = 26), a fact of the format that shape rules and kernels need for attributes such
// as Cast's `to`. Here rather than in the importer so that they do not depend on it (or on
// protobuf); docs/decisions/0030-module-targets.md.
#pragma once

#include "kiln/types.h"

namespace kiln {

// ONNX TensorProto.DataType code -> DataType; kUndefined for unknown codes and those Kiln does
// not support (complex64/complex128).
DataType dtype_from_onnx(int code);
// DataType -> ONNX TensorProto.DataType code; 0 (UNDEFINED) for kNF4 (no ONNX code) and kUndefined.
int dtype_to_onnx(DataType t);

}  // namespace kiln
