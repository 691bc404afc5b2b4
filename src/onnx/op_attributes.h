// The attributes each ONNX op's schema defines, per schema version (generated table in
// op_attributes.cc, scripts/gen_op_attributes.py), so the importer can refuse an attribute Kiln
// would otherwise silently ignore, or one of the wrong type (docs/decisions/0026).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln::onnx_import {

// onnx::AttributeProto::AttributeType's cases, with the same numbers.
enum class AttrType {
  kFloat = 1, kInt = 2, kString = 3, kTensor = 4, kGraph = 5, kFloats = 6, kInts = 7, kStrings = 8,
  kTensors = 9, kGraphs = 10, kSparseTensor = 11, kSparseTensors = 12, kTypeProto = 13, kTypeProtos = 14,
};

// "INT", "FLOATS", ...
const char* attr_type_name(AttrType t);

struct OpSchemaAttrs {
  const char* op;                           // ONNX op_type (default domain)
  int since_version;                        // the opset this schema version starts at
  std::map<std::string, AttrType> attrs;    // attribute name -> its type
};

// Every schema version of every op in ops.def (one row per op and since_version, ascending).
const std::vector<OpSchemaAttrs>& op_schema_table();

// The schema in force for `op` at ai.onnx opset `opset` (the row with the largest
// since_version <= opset), or nullptr when the table has none (the op is newer than the opset).
const OpSchemaAttrs* op_schema(const std::string& op, int64_t opset);

// The newest ai.onnx opset whose attribute changes the table knows.
constexpr int64_t kNewestKnownOpset = 24;
// The newest ONNX IR version Kiln reads (IR 10: ONNX 1.16..1.17; 11: ONNX 1.18, float4e2m1).
constexpr int64_t kNewestKnownIrVersion = 11;

}  // namespace kiln::onnx_import
