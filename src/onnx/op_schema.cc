// Lookups into the generated attribute table (op_attributes.h).
#include <map>
#include <utility>

#include "onnx/op_attributes.h"

namespace kiln::onnx_import {

const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::kFloat: return "FLOAT";
    case AttrType::kInt: return "INT";
    case AttrType::kString: return "STRING";
    case AttrType::kTensor: return "TENSOR";
    case AttrType::kGraph: return "GRAPH";
    case AttrType::kSparseTensor: return "SPARSE_TENSOR";
    case AttrType::kTypeProto: return "TYPE_PROTO";
    case AttrType::kFloats: return "FLOATS";
    case AttrType::kInts: return "INTS";
    case AttrType::kStrings: return "STRINGS";
    case AttrType::kTensors: return "TENSORS";
    case AttrType::kGraphs: return "GRAPHS";
    case AttrType::kSparseTensors: return "SPARSE_TENSORS";
    case AttrType::kTypeProtos: return "TYPE_PROTOS";
  }
  return "?";
}

namespace {

// The ops newer than ONNX 1.12 that the importer lowers into Kiln layers (onnx/lowered_ops.h):
// their attributes per ONNX Operators.md (Attention-23/24, RMSNormalization-23,
// RotaryEmbedding-23). Not in the generated table, which lists ops.def's ONNX ops.
const std::vector<OpSchemaAttrs>& lowered_op_schemas() {
  using A = AttrType;
  static const std::vector<OpSchemaAttrs> kRows = {
      {"Attention", 23, {{"is_causal", A::kInt}, {"kv_num_heads", A::kInt}, {"q_num_heads", A::kInt},
                         {"qk_matmul_output_mode", A::kInt}, {"scale", A::kFloat}, {"softcap", A::kFloat},
                         {"softmax_precision", A::kInt}}},
      {"Attention", 24, {{"is_causal", A::kInt}, {"kv_num_heads", A::kInt}, {"q_num_heads", A::kInt},
                         {"qk_matmul_output_mode", A::kInt}, {"scale", A::kFloat}, {"softcap", A::kFloat},
                         {"softmax_precision", A::kInt}}},
      {"RMSNormalization", 23, {{"axis", A::kInt}, {"epsilon", A::kFloat}, {"stash_type", A::kInt}}},
      {"RotaryEmbedding", 23, {{"interleaved", A::kInt}, {"num_heads", A::kInt}, {"rotary_embedding_dim", A::kInt}}},
  };
  return kRows;
}

}  // namespace

const OpSchemaAttrs* op_schema(const std::string& op, int64_t opset) {
  // op -> rows of the table in ascending since_version (built once; thread-safe).
  static const std::map<std::string, std::vector<const OpSchemaAttrs*>> kByOp = [] {
    std::map<std::string, std::vector<const OpSchemaAttrs*>> m;
    for (const OpSchemaAttrs& row : op_schema_table()) m[row.op].push_back(&row);
    for (const OpSchemaAttrs& row : lowered_op_schemas()) m[row.op].push_back(&row);
    return m;
  }();
  auto it = kByOp.find(op);
  if (it == kByOp.end()) return nullptr;
  const OpSchemaAttrs* found = nullptr;
  for (const OpSchemaAttrs* row : it->second)
    if (row->since_version <= opset) found = row;
  return found;
}

}  // namespace kiln::onnx_import
