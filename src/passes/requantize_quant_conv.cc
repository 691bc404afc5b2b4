// 8-bit activations between QuantConv layers (docs/decisions/0081; issue 12 item 5):
//   y = QuantConv_p(...)                      (float y: act(conv + bias + residual))
//   z_i = QuantConv_i(y, ...){x_scale s, x_zero_point z, 8-bit type T}   for every reader i of y
//     ->  y' = QuantConv_p(...){y_scale = s, y_zero_point = z, y_type = T}   (y' of dtype T:
//                                                                           Q(y, s, z) in T)
//         z_i = QuantConv_i(y', ...)                                     (X already quantized)
// when every live reader of y reads it as its X (input 0) only, all with the same (s, z, T), and
// y is no graph output and no value a subgraph reads. In the Q/DQ graph each reader i computed
// conv(DQ(Q(y, s, z))): fuse_qdq_conv made X = y and kept (s, z) as attributes, so the reader's
// own quantization is exactly the one the producer now applies to its float result
// (QuantizeLinear: y / s in float32, round half to even, + z, saturate; FP8: the nearest E4M3FN
// value, saturating at +-448) and the numerics are those of the Q/DQ graph. A value read by
// anything else — a residual Add (or a QuantConv's residual input), a pool, a conv that did not
// fuse, a graph output — keeps float: it then has a float reader, and the 8-bit readers quantize
// it themselves as before (decision 0081 says why no second, 8-bit output is written).
// Runs right after fuse_qdq_conv; the Q/DQ pairs that fusion left unread are removed first so
// the readers counted are the live ones.
#include "passes/passes.h"

namespace kiln::passes {

namespace {

bool eight_bit(DataType t) { return t == DataType::kInt8 || t == DataType::kFloat8E4M3FN; }

// The 8-bit type a QuantConv quantizes its X to: its weight's (fuse_qdq_conv requires equal types).
DataType quant_type(const ir::Graph& g, const ir::Node& n) {
  if (n.inputs.size() < 2 || n.inputs[1] == ir::kNoValue) return DataType::kUndefined;
  return g.value(n.inputs[1]).dtype;
}

}  // namespace

Status requantize_quant_conv(ir::Graph& g, const PassOptions& opts) {
  remove_dead_nodes(g);
  const std::vector<std::vector<ir::NodeId>> consumers = g.consumers();
  std::set<std::string> pinned;
  for (ir::ValueId v : g.outputs) pinned.insert(g.value(v).name);
  for (const std::string& name : subgraph_reads(g)) pinned.insert(name);
  for (ir::Node& p : g.nodes) {
    if (p.removed || p.op != ir::OpKind::kQuantConv || p.outputs.size() != 1 || p.has_attr("y_scale")) continue;
    const ir::ValueId y = p.outputs[0];
    if (y == ir::kNoValue || pinned.count(g.value(y).name) || g.value(y).dtype != DataType::kFloat32) continue;
    bool ok = !consumers[y].empty();
    float s = 0;
    int64_t z = 0;
    DataType t = DataType::kUndefined;
    for (ir::NodeId ci : consumers[y]) {
      const ir::Node& c = g.node(ci);
      if (c.removed) continue;
      if (c.op != ir::OpKind::kQuantConv || c.inputs.empty() || c.inputs[0] != y) { ok = false; break; }
      for (size_t k = 1; k < c.inputs.size(); ++k) ok &= c.inputs[k] != y;  // e.g. also its residual
      const float cs = c.attr_float("x_scale", 0.f);
      const int64_t cz = c.attr_int("x_zero_point", 0);
      const DataType ct = quant_type(g, c);
      if (!ok || !eight_bit(ct) || !(cs > 0)) { ok = false; break; }
      if (t == DataType::kUndefined) {
        s = cs, z = cz, t = ct;
      } else if (cs != s || cz != z || ct != t) {
        ok = false;
        break;
      }
    }
    if (!ok || t == DataType::kUndefined) continue;
    if (t == DataType::kFloat8E4M3FN && !opts.fp8_conv_activations_8bit) continue;
    p.attrs["y_scale"] = ir::Attribute::of_float(s);
    p.attrs["y_zero_point"] = ir::Attribute::of_int(z);
    p.attrs["y_type"] = ir::Attribute::of_string(dtype_name(t));
    ir::Value& yv = g.value(y);
    yv.dtype = t;
    QuantParams q;
    q.type = t;
    q.scale = {s};
    if (t == DataType::kInt8) q.zero_point = {static_cast<int32_t>(z)};
    yv.quant = q;
  }
  return Status::Ok();
}

}  // namespace kiln::passes
