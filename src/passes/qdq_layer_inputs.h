// What the Q/DQ layer fusions (fuse_qdq_linear, fuse_qdq_conv) read at a layer's inputs: the
// activation's per-tensor Q -> DQ pair, constant scalars, the rule texts of the conditions both
// passes check, the record of why a layer's Q/DQ did not fuse (ir::QdqBlocked, docs/decisions/
// 0062), and the int32 bias DequantizeLinear that ONNX Runtime's quantizer writes (evaluated to
// the float bias it stands for). ONNX semantics (Operators.md QuantizeLinear / DequantizeLinear).
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "passes/pass.h"

namespace kiln::passes::qdq_inputs {

// Rules shared by both fusions (the texts kiln build's summary groups by and kiln inspect prints).
inline constexpr const char* kRuleNoActQdq = "activation input is not a Q -> DQ pair";
inline constexpr const char* kRuleActParams = "activation scale / zero point not one constant per tensor, equal in Q and DQ";
inline constexpr const char* kRuleActType = "activation 8-bit type not int8 or fp8e4m3 with zero point 0";
inline constexpr const char* kRuleNoWeightDq = "weight is not a DequantizeLinear";
inline constexpr const char* kRuleWeightNotConst = "non-constant weight";
inline constexpr const char* kRuleWeightZp = "non-zero weight zero point";

// A failed condition: its rule (one of the fixed texts) and the values that broke it.
struct Blocked {
  const char* rule = nullptr;
  std::string detail;
};

// The constant held by value v (null for kNoValue or a non-constant).
const Tensor* constant_of(const ir::Graph& g, ir::ValueId v);

// A one-element constant as a double and its dtype; false when v is not one.
bool scalar_value(const ir::Graph& g, ir::ValueId v, double* out, DataType* dt);

// x's per-tensor Q -> DQ: the float input x, its scale and zero point, the 8-bit type.
struct ActQuant {
  ir::ValueId x = ir::kNoValue;
  float scale = 0;
  int64_t zero_point = 0;
  DataType type = DataType::kUndefined;  // kInt8 or kFloat8E4M3FN
  const ir::Node* dq = nullptr;
};

// Value a as DQ(Q(x, s, z), s, z) with constant scalar float32 s > 0 and z equal in Q and DQ,
// saturate = 1, precision float32, z int8 (or float8e4m3fn 0), x float32; else nullopt and *why.
std::optional<ActQuant> activation_qdq(const ir::Graph& g, ir::ValueId a, Blocked* why);

// Records on n why its Q/DQ did not fuse (ir::QdqBlocked) when input 0 or 1 of n is dequantized.
void record_blocked(ir::Graph& g, ir::Node& n, const Blocked& why);

// DQ(bq int32 constant, ...) read by a Gemm's or Conv's bias (input 2) or an Add: folded to the
// float bias it stands for, so the fusions see a constant. No-op without opts.evaluator.
void fold_int32_bias_dequantize(ir::Graph& g, const PassOptions& opts);

// One layer fusion: rewrites n (given the consumer table g.consumers() made before the loop and
// the value names no fusion may remove: graph outputs and values subgraphs read) and returns
// true, or returns false with the rule that blocked it in *why (rule null: nothing to say).
using LayerFusion = std::function<bool(ir::Graph& g, const std::vector<std::vector<ir::NodeId>>& consumers,
                                       const std::set<std::string>& pinned, ir::Node& n, Blocked* why)>;
// The driver both passes share: fold_int32_bias_dequantize, then `fuse` on every live node, each
// node that does not fuse recording its rule (record_blocked).
void fuse_each_layer(ir::Graph& g, const PassOptions& opts, const LayerFusion& fuse);

}  // namespace kiln::passes::qdq_inputs
