// Concat elimination on the CPU (an analysis; the graph computes the same values):
//   y = Concat(p_1..p_n){axis}  ->  Concat(p_1..p_n){axis, in_place=[f_1..f_n]}
// f_k = 1: the producer of p_k writes straight into bytes [o_k, o_k + |p_k|) of y, with
// o_k = sum_{j<k} |p_j| (|p| = numel(p) * element size); the interpreter hands it that slice as
// its output buffer and the Concat copies only the inputs with f_k = 0. Legal when y's slices
// are contiguous: every dim of y before `axis` is 1 (row-major, e.g. a batch-1 NCHW channel
// concat). Rules (docs/decisions/0009-concat-elimination.md): shapes and dtypes fully known;
// p_k is produced by a live layer whose CPU kernel fills a given buffer (Conv, FusedConv, or an
// in-place Concat), appears once in this Concat and in no other in-place Concat, and is neither
// a graph output nor read by a subgraph. The Concat is marked only if some f_k = 1.
#include <algorithm>

#include "passes/passes.h"

namespace kiln::passes {

namespace {

bool static_shape(const ir::Graph& g, ir::ValueId v, Shape* out) {
  return v != ir::kNoValue && g.value(v).kind == ir::ValueKind::kTensor && known_shape(g, v, out);
}

// Element types whose elements start on byte boundaries (no packed 4-bit, no strings).
bool byte_addressable(DataType t) {
  return t != DataType::kUndefined && t != DataType::kString && dtype_storage_bytes(t, 1) >= 1 &&
         dtype_storage_bytes(t, 2) == 2 * dtype_storage_bytes(t, 1);
}

// The producer's CPU kernel writes into the buffer the interpreter offers (KernelContext::output_buffer).
bool fills_given_buffer(const ir::Node& p) {
  switch (p.op) {
    case ir::OpKind::kConv:
    case ir::OpKind::kFusedConv: return true;
    case ir::OpKind::kConcat: return p.has_attr("in_place");
    default: return false;
  }
}

}  // namespace

Status concat_in_place(ir::Graph& g, const PassOptions&) {
  const auto reads = subgraph_reads(g);
  std::vector<bool> placed(g.values.size(), false);  // already a slice of an in-place Concat
  for (ir::Node& c : g.nodes) {
    if (c.removed || c.op != ir::OpKind::kConcat || c.outputs.size() != 1) continue;
    c.attrs.erase("in_place");  // recomputed from the graph as it is now
    const ir::ValueId y = c.outputs[0];
    Shape ys;
    if (!static_shape(g, y, &ys) || !byte_addressable(g.value(y).dtype) || ys.empty()) continue;
    int64_t axis = c.attr_int("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(ys.size());
    if (axis < 0 || axis >= static_cast<int64_t>(ys.size())) continue;
    if (std::any_of(ys.begin(), ys.begin() + axis, [](int64_t d) { return d != 1; })) continue;
    std::vector<int64_t> flags(c.inputs.size(), 0);
    int64_t total = 0;
    bool ok = true;
    for (size_t k = 0; k < c.inputs.size() && ok; ++k) {
      const ir::ValueId v = c.inputs[k];
      Shape s;
      ok = static_shape(g, v, &s) && s.size() == ys.size() && g.value(v).dtype == g.value(y).dtype;
      if (!ok) break;
      total += shape_numel(s);
      const int producer = g.value(v).producer;
      if (producer < 0 || g.value(v).constant || placed[v] || std::count(c.inputs.begin(), c.inputs.end(), v) != 1 ||
          std::count(g.outputs.begin(), g.outputs.end(), v) || reads.count(g.value(v).name))
        continue;
      const ir::Node& p = g.node(producer);
      if (p.removed || !fills_given_buffer(p)) continue;
      flags[k] = 1;
    }
    if (!ok || total != shape_numel(ys) || std::count(flags.begin(), flags.end(), 1) == 0) continue;
    for (size_t k = 0; k < flags.size(); ++k)
      if (flags[k]) placed[c.inputs[k]] = true;
    c.attrs["in_place"] = ir::Attribute::of_ints(flags);
  }
  return Status::Ok();
}

}  // namespace kiln::passes
