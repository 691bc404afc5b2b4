// Facts the optimizer writes into nodes and the backends read back: the "precision" attribute
// (per-layer precision constraints, docs/decisions/0013) and the "layout" attribute with the
// layout policies that decide it (docs/decisions/0010). In ir, below both passes and backends,
// so the CUDA lowering reads them without depending on the passes
// (docs/decisions/0030-module-targets.md). passes.h re-exports them as passes::.
#pragma once

#include <optional>
#include <string>

#include "ir/graph.h"
#include "kiln/types.h"

namespace kiln::ir {

// The precision tokens of --layer-precisions and of the node attribute "precision" (the layer's
// precision decided by passes::assign_precisions, docs/decisions/0033): "fp32", "fp16", "bf16"
// ("" for any other dtype), and back (kUndefined for anything else).
const char* precision_token(DataType t);
DataType precision_from_token(const std::string& token);
// The precision decided for a node (its "precision" attribute); kUndefined when none (a graph
// that did not go through assign_precisions, e.g. a test lowering a graph directly).
DataType node_precision(const Node& n);

// The storage layout of a layer's 4-D activations.
enum class Layout { kAny, kNCHW, kNHWC };
// The layout a backend's tactics want for a node's 4-D activations (kAny: elementwise,
// follows its inputs); passes::assign_layouts applies one.
using LayoutPreference = Layout (*)(const Graph& g, const Node& n);
// CUDA: conv and pooling NHWC (tensor cores) unless the node's decided precision is fp32 (an
// FP32 plan's layers all are: no NHWC) or the backend runs the node on its row-major N-D path (a
// runtime conv weight or bias, explicit asymmetric pads, pool dilations or Indices;
// docs/decisions/0070), elementwise kAny, the rest NCHW.
Layout tensor_core_layout_preference(const Graph& g, const Node& n);
// Row-major everywhere (CPU, CUDA FP32): never inserts a Reformat.
Layout row_major_layout_preference(const Graph& g, const Node& n);

}  // namespace kiln::ir

namespace kiln::ir {

// Why a layer with Q/DQ at its inputs did not become an 8-bit layer: passes::fuse_qdq_linear and
// fuse_qdq_conv write it on the layer (node attributes "qdq_blocked" = the rule, "qdq_blocked_detail" = the
// numbers, e.g. "K = 40, N = 16", "qdq_blocked_nodes" = the Q/DQ nodes left in place, and
// "qdq_blocked_type" = the 8-bit format, "int8" or "fp8e4m3"); the plan keeps node attributes, so
// `kiln build`'s precision summary and `kiln inspect` read this one record back (LayerInfo::
// unfused_qdq). docs/decisions/0062.
struct QdqBlocked {
  std::string rule;    // a fixed rule text of fuse_qdq_linear.cc / fuse_qdq_conv.cc ("K or N not a multiple of 16")
  std::string detail;  // the values that broke it; may be ""
  std::string nodes;   // "x_q -> x_dq, w_dq": the Q/DQ nodes that stay unfused
  std::string type;    // "int8", "fp8e4m3" or "" (unknown)
};
void set_qdq_blocked(Node& n, const QdqBlocked& b);
// The record, or nullopt when the node has none.
std::optional<QdqBlocked> qdq_blocked(const Node& n);
// Copies the record (if any) from `from` to `to`: for passes that rebuild a node's attributes.
void keep_qdq_blocked(const Node& from, Node& to);

}  // namespace kiln::ir
