// ai.onnx ops newer than the ONNX 1.12 schema Kiln reads that import as a few Kiln layers
// (docs/decisions/0066): RMSNormalization-23, Attention-23/24 and RotaryEmbedding-23. Each
// node becomes Kiln's RMSNormalization / Attention layer, or (RotaryEmbedding) a decomposition
// into Gather / Slice / Mul / Sub / Add / Concat, at import time.
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln::onnx_import {

// True when `op_type` (default domain) at ai.onnx opset `opset` is one of the ops above.
bool is_lowered_op(const std::string& op_type, int64_t opset);

// Adds to `g` the layers computing node `n` (imported as-is: inputs and outputs are values of
// `g`, kNoValue for omitted optional ones; attributes checked against the op's schema; n.op is
// unused). The last layer writes n's outputs. Errors (each naming the node): kInvalidModel for
// inputs/outputs the spec forbids (past_key without past_value, 3-D Attention without
// q_num_heads / kv_num_heads), kUnsupported for what Kiln does not compute (Attention's softcap,
// qk_matmul_output, a causal mask whose alignment cannot be expressed;
// stash_type other than 1).
Status lower_op(const std::string& op_type, ir::Node n, ir::Graph* g);

}  // namespace kiln::onnx_import
