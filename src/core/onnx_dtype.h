// The numbering of ONNX's TensorProto.DataType enum (onnx.proto: FLOAT = 1, UINT8 = 2, ...,
// FLOAT4E2M1 = 23), a fact of the format that shape rules and kernels need for attributes such
// as Cast's `to`. Here rather than in the importer so that they do not depend on it (or on
// protobuf); docs/decisions/0030-module-targets.md.
#pragma once

#include "kiln/types.h"

namespace kiln {

// ONNX TensorProto.DataType code -> DataType; kUndefined for unknown codes and those Kiln does
// not support (complex, the FNUZ fp8 variants).
DataType dtype_from_onnx(int code);
// DataType -> ONNX TensorProto.DataType code; 0 (UNDEFINED) for kNF4 (no ONNX code) and kUndefined.
int dtype_to_onnx(DataType t);

}  // namespace kiln
