// Matchers shared by the Q/DQ rewrites (propagate_qdq, eliminate_redundant_qdq): which
// QuantizeLinear / DequantizeLinear nodes state the same constant parameters, the per-tensor /
// per-axis reading of those parameters, and fresh value names. Header-only, pure queries except
// fresh_value(). ONNX semantics (Operators.md, QuantizeLinear-10..25 / DequantizeLinear-10..25):
//   Q(x; s, z)  = saturate(round_half_even(x / s) + z)   (float8 targets: cast of x / s)
//   DQ(q; s, z) = (q - z) * s
#pragma once

#include <cstring>
#include <string>

#include "core/tensor.h"
#include "passes/pass.h"

namespace kiln::passes::qdq {

// The live node producing `v` as its output 0 when it is `op`; else nullptr.
inline ir::Node* producer_of(ir::Graph& g, ir::ValueId v, ir::OpKind op) {
  if (v == ir::kNoValue || g.value(v).producer < 0) return nullptr;
  ir::Node& n = g.node(g.value(v).producer);
  if (n.removed || n.op != op || n.outputs.empty() || n.outputs[0] != v) return nullptr;
  return &n;
}

// Two optional inputs hold constants of equal dtype, shape and bytes (both omitted counts too).
inline bool same_constant(const ir::Graph& g, ir::ValueId a, ir::ValueId b) {
  if (a == b) return true;
  if (a == ir::kNoValue || b == ir::kNoValue) return false;
  const Tensor* ta = g.value(a).constant.get();
  const Tensor* tb = g.value(b).constant.get();
  if (!ta || !tb || ta->dtype() != tb->dtype() || ta->shape() != tb->shape()) return false;
  const size_t bytes = dtype_storage_bytes(ta->dtype(), ta->numel());
  return std::memcmp(ta->raw(), tb->raw(), bytes) == 0;
}

inline ir::ValueId input_or_none(const ir::Node& n, size_t i) {
  return i < n.inputs.size() ? n.inputs[i] : ir::kNoValue;
}

// How a Q/DQ node's constant scale applies to its quantized value (block quantization and
// non-constant parameters are not handled by the rewrites: kNone).
enum class Granularity { kNone, kPerTensor, kPerAxis };

struct Params {
  Granularity granularity = Granularity::kNone;
  int64_t axis = -1;  // kPerAxis: the axis of the value, normalized to [0, rank)
};

// The granularity of Q/DQ node `n` whose quantized / float operand is `v` (same shape either
// side): a one-element constant scale (and zero point) is per tensor; a 1-D constant scale with
// block_size 0 is per axis along `axis` (needs v's rank).
inline Params params_of(const ir::Graph& g, const ir::Node& n, ir::ValueId v) {
  Params p;
  const ir::ValueId s = input_or_none(n, 1), z = input_or_none(n, 2);
  if (s == ir::kNoValue || !g.value(s).constant) return p;
  if (z != ir::kNoValue && !g.value(z).constant) return p;
  if (n.attr_int("block_size", 0) != 0) return p;
  const Tensor& st = *g.value(s).constant;
  if (st.numel() == 1 && (z == ir::kNoValue || g.value(z).constant->numel() == 1)) {
    p.granularity = Granularity::kPerTensor;
    return p;
  }
  const auto& shape = g.value(v).shape;
  if (st.rank() != 1 || !shape) return p;
  const int64_t rank = static_cast<int64_t>(shape->size());
  int64_t axis = n.attr_int("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return p;
  p.granularity = Granularity::kPerAxis;
  p.axis = axis;
  return p;
}

// Q/DQ nodes `a` and `b` state the same parameters: the same constant scale and zero point (by
// content; the zero point present, since it names the quantized type) and the same axis and
// block_size attributes.
inline bool same_params(const ir::Graph& g, const ir::Node& a, const ir::Node& b) {
  if (!same_constant(g, input_or_none(a, 1), input_or_none(b, 1))) return false;
  if (!same_constant(g, input_or_none(a, 2), input_or_none(b, 2))) return false;
  if (input_or_none(a, 2) == ir::kNoValue) return false;  // the type comes from the zero point
  return a.attr_int("axis", 1) == b.attr_int("axis", 1) && a.attr_int("block_size", 0) == b.attr_int("block_size", 0);
}

// A new value named after `base` (made unique), with `like`'s shape and dtype `dt`.
inline ir::ValueId fresh_value(ir::Graph& g, const std::string& base, DataType dt, ir::ValueId like) {
  std::string name = base;
  while (g.find_value(name) != ir::kNoValue) name += "_";
  const ir::ValueId v = g.add_value(name, dt);
  g.value(v).shape = g.value(like).shape;
  return v;
}

}  // namespace kiln::passes::qdq
