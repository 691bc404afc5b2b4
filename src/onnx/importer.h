// ONNX ModelProto -> ir::Graph. Reads onnx.proto with Debian's libonnx (ONNX 1.12 schema);
// newer dtypes (FP8 = 17..20, UINT4/INT4 = 21/22, FP4E2M1 = 23) are read by their numeric
// codes. Weights may live in external data files (ONNX IR spec, "External Tensor Data").
// Constant nodes are folded into constant Values at import.
#pragma once

#include <string>
#include <vector>

#include "core/onnx_dtype.h"  // dtype_from_onnx / dtype_to_onnx (kiln::)
#include "core/tensor.h"
#include "ir/graph.h"
#include "kiln/status.h"

namespace onnx {
class TensorProto;
}

namespace kiln::onnx_import {

// What the importer does with what it does not know: an attribute an op's schema does not define
// at the node's opset (onnx/op_attributes.h), an ai.onnx opset newer than kNewestKnownOpset or an
// IR version newer than kNewestKnownIrVersion. By default each is an error (kUnsupported, listing
// them all); with allow_unknown each becomes one line in *warnings and is otherwise ignored.
struct ImportOptions {
  bool allow_unknown = false;
  std::vector<std::string>* warnings = nullptr;  // receives one line per ignored item (may be null)
};

// Loads and imports a model file. Errors: kNotFound (no file), kInvalidArgument (a directory, an
// unreadable or empty file, a Kiln plan: each with its own message naming the path),
// kInvalidModel (not parseable, truncated, dangling or duplicate or empty names, no graph
// outputs, attributes of the wrong type, a node failing ir::verify: arity, missing required
// inputs), kUnsupported (lists every unknown op at once: node name, op type, domain, opset; or
// every unknown attribute / newer opset / newer IR version, see ImportOptions).
StatusOr<ir::Graph> import_model_file(const std::string& path, const ImportOptions& options = {});
// Same, from bytes; `base_dir` resolves external-data locations.
StatusOr<ir::Graph> import_model_bytes(const std::string& bytes, const std::string& base_dir,
                                       const ImportOptions& options = {});

// True when `bytes` parse as an ONNX ModelProto with a graph (to say "this is an ONNX model,
// not a plan").
bool looks_like_onnx(const std::string& bytes);

// Decodes a TensorProto (typed fields, raw_data or external data relative to base_dir).
StatusOr<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir);
// Reads a serialized TensorProto file (ONNX test data's input_N.pb / output_N.pb).
StatusOr<Tensor> load_tensor_pb_file(const std::string& path, std::string* name = nullptr);
// Reads a serialized test-data value of the given kind: a TensorProto, a SequenceProto of
// tensors or an OptionalProto (of a tensor or a sequence), as Tensor::sequence / none()
// values. `elem` is the declared element dtype, used for empty sequences and empty optionals.
StatusOr<Tensor> load_value_pb_file(const std::string& path, ir::ValueKind kind, DataType elem);

}  // namespace kiln::onnx_import
