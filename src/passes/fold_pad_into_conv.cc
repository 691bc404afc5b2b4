// An explicit zero Pad in front of a convolution becomes the convolution's own padding:
//   Conv(Pad(x, [0,0,b1..bn, 0,0,e1..en], constant 0), W){pads=[p1..pn, q1..qn]}
//     -> Conv(x, W){pads=[p1+b1..pn+bn, q1+e1..qn+en]}
// Conv pads with zeros (ONNX "Operator Conv, since version 1"), so this is exact when the Pad is
// mode=constant with value 0, pads >= 0 only on spatial axes (not batch or channel), and the
// pads, value and axes are constants (attributes before opset 11, inputs since: ONNX "Operator
// Pad, since version 11"; axes input since 18). The Pad must feed only the Conv, whose auto_pad
// must be NOTSET (SAME_* padding is computed from the input size, which the fold would change).
#include <algorithm>

#include "core/numerics.h"
#include "passes/passes.h"

namespace kiln::passes {

namespace {

// Per-axis padding (before, after) of a constant-zero Pad of a rank-`rank` input, or false.
bool zero_pad_amounts(const ir::Graph& g, const ir::Node& pad, int rank, std::vector<int64_t>* before,
                      std::vector<int64_t>* after) {
  if (pad.attr_string("mode", "constant") != "constant") return false;
  std::vector<int64_t> pads, axes;
  if (pad.opset < 11) {
    pads = pad.attr_ints(pad.opset < 2 ? "paddings" : "pads");
    if (pad.attr_float("value", 0.f) != 0.f) return false;
  } else {
    if (pad.inputs.size() < 2 || !constant_ints(g, pad.inputs[1], &pads)) return false;
    if (pad.inputs.size() > 2 && pad.inputs[2] != ir::kNoValue) {
      const auto& v = g.value(pad.inputs[2]).constant;
      if (!v || v->numel() > 1) return false;
      if (v->numel() == 1 && load_as_double(v->dtype(), v->raw(), 0) != 0) return false;
    }
    if (pad.opset >= 18 && pad.inputs.size() > 3 && pad.inputs[3] != ir::kNoValue &&
        !constant_ints(g, pad.inputs[3], &axes))
      return false;
  }
  if (axes.empty())
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  if (pads.size() != 2 * axes.size()) return false;
  before->assign(rank, 0);
  after->assign(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t ax = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (ax < 0 || ax >= rank) return false;
    (*before)[ax] += pads[i];
    (*after)[ax] += pads[i + axes.size()];
  }
  for (int i = 0; i < rank; ++i)
    if ((*before)[i] < 0 || (*after)[i] < 0 || (i < 2 && ((*before)[i] != 0 || (*after)[i] != 0))) return false;
  return true;
}

}  // namespace

Status fold_pad_into_conv(ir::Graph& g, const PassOptions&) {
  const std::set<std::string> pinned = subgraph_reads(g);
  const auto consumers = g.consumers();
  for (auto& conv : g.nodes) {
    if (conv.removed || conv.op != ir::OpKind::kConv || conv.inputs.size() < 2) continue;
    if (conv.attr_string("auto_pad", "NOTSET") != "NOTSET") continue;
    const ir::ValueId padded = conv.inputs[0];
    if (padded == ir::kNoValue || g.value(padded).producer < 0) continue;
    ir::Node& pad = g.node(g.value(padded).producer);
    if (pad.removed || pad.op != ir::OpKind::kPad || pad.inputs.empty() || pad.inputs[0] == ir::kNoValue) continue;
    if (consumers[padded].size() != 1 || std::count(g.outputs.begin(), g.outputs.end(), padded) ||
        pinned.count(g.value(padded).name))
      continue;
    // The rank comes from the weight (Conv's W is [M, C/group, k1..kn]), else from x's shape.
    int rank = -1;
    if (const auto& w = g.value(conv.inputs[1]).constant) rank = w->rank();
    else if (const auto& s = g.value(pad.inputs[0]).shape) rank = static_cast<int>(s->size());
    if (rank < 3) continue;
    std::vector<int64_t> before, after;
    if (!zero_pad_amounts(g, pad, rank, &before, &after)) continue;
    const size_t nd = static_cast<size_t>(rank - 2);
    std::vector<int64_t> pads = conv.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
    if (pads.size() != 2 * nd) continue;
    for (size_t i = 0; i < nd; ++i) {
      pads[i] += before[2 + i];
      pads[nd + i] += after[2 + i];
    }
    conv.attrs["pads"] = ir::Attribute::of_ints(pads);
    conv.attrs.erase("auto_pad");
    conv.inputs[0] = pad.inputs[0];
    conv.origin.insert(conv.origin.end(), pad.origin.begin(), pad.origin.end());
    pad.removed = true;
  }
  return Status::Ok();
}

}  // namespace kiln::passes
