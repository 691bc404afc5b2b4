// Layout assignment: every layer with a 4-D activation gets a storage layout, and explicit
// Reformat layers appear where a layer reads a tensor stored in another layout.
//
//   pref(n) ∈ {NCHW, NHWC, Any}                  stated by the backend (LayoutPreference)
//   layout(graph input x) = NHWC  if some consumer n of x has pref(n) = NHWC, else NCHW
//   need(n) = pref(n)                            if pref(n) ≠ Any
//           = NHWC  if some 4-D activation input of n (not layout-free) is stored NHWC
//           = NCHW  otherwise                    (Any: elementwise layers follow their inputs)
//   for each 4-D activation input v of n (n not Shape/Size), not layout-free, with layout(v) ≠ need(n):
//       v  ->  Reformat{to = need(n)}(v)         (one Reformat per value and target layout)
//   layout(outputs of n) = need(n);  n.attrs["layout"] = need(n) when n has a 4-D output (not on
//       RNN / GRU / LSTM, whose ONNX `layout` attribute means batch-major)
//
// "Layout-free" 4-D shapes (H·W = 1 or C = 1) are the same bytes in both layouts and never need
// a Reformat. Constant operands are laid out by the backend when it uploads them. Graph inputs
// and outputs are logical NCHW at the API; the backend converts them at the boundary together
// with the dtype conversion, so a graph input is stored in the layout its consumers want (the
// rule above) and a graph output in the layout its producer chose.
// The greedy rule is optimal for chains and for residual DAGs whose branches share one
// preference (every CNN in the model tests); docs/decisions/0010-layout-assignment.md has the
// alternatives.
#include <map>
#include <optional>

#include "ir/op_kind.h"
#include "passes/passes.h"

namespace kiln::passes {
namespace {

const char* layout_name(Layout l) { return l == Layout::kNHWC ? "NHWC" : "NCHW"; }

bool is_4d(const ir::Graph& g, ir::ValueId v) {
  const auto& s = g.value(v).shape;
  return s && s->size() == 4;
}

// Same bytes in NCHW and NHWC: H*W == 1 or C == 1 (known dims only).
bool layout_free(const ir::Graph& g, ir::ValueId v) {
  const auto& s = *g.value(v).shape;
  const bool hw1 = s[2].is_known() && s[3].is_known() && s[2].value * s[3].value == 1;
  const bool c1 = s[1].is_known() && s[1].value == 1;
  return hw1 || c1;
}

bool is_activation(const ir::Graph& g, ir::ValueId v) { return v != ir::kNoValue && !g.value(v).constant; }

std::string fresh_value_name(const ir::Graph& g, const std::string& base) {
  std::string name = base;
  for (int k = 1; g.find_value(name) != ir::kNoValue; ++k) name = base + "_" + std::to_string(k);
  return name;
}

}  // namespace

StatusOr<int> assign_layouts(ir::Graph& g, LayoutPreference pref) {
  KILN_RETURN_IF_ERROR(g.topo_sort());
  std::map<ir::ValueId, Layout> layout;
  const auto consumers = g.consumers();
  for (ir::ValueId x : g.inputs) {
    if (!is_4d(g, x)) continue;
    Layout l = Layout::kNCHW;
    for (ir::NodeId c : consumers[static_cast<size_t>(x)])
      if (!g.node(c).removed && pref(g, g.node(c)) == Layout::kNHWC) l = Layout::kNHWC;
    layout[x] = l;
  }
  std::map<std::pair<ir::ValueId, Layout>, ir::ValueId> reformatted;
  std::vector<ir::Node> inserted;  // Reformat nodes, added after the walk (add_node may reallocate)
  int added = 0;
  const size_t count = g.nodes.size();
  for (size_t i = 0; i < count; ++i) {
    if (g.nodes[i].removed) continue;
    const Layout p = pref(g, g.nodes[i]);
    Layout need = p;
    if (p == Layout::kAny) {
      need = Layout::kNCHW;
      for (ir::ValueId v : g.nodes[i].inputs)
        if (is_activation(g, v) && is_4d(g, v) && !layout_free(g, v) && layout[v] == Layout::kNHWC) need = Layout::kNHWC;
    }
    // Shape and Size read only the dims, which are logical in every layout.
    const bool reads_bytes = g.nodes[i].op != ir::OpKind::kShape && g.nodes[i].op != ir::OpKind::kSize;
    for (ir::ValueId& v : g.nodes[i].inputs) {
      if (!reads_bytes || !is_activation(g, v) || !is_4d(g, v) || layout_free(g, v)) continue;
      const Layout have = layout.count(v) ? layout[v] : Layout::kNCHW;
      if (have == need) continue;
      auto key = std::make_pair(v, need);
      auto it = reformatted.find(key);
      if (it == reformatted.end()) {
        const std::string suffix = need == Layout::kNHWC ? ":nhwc" : ":nchw";
        const ir::ValueId out = g.add_value(fresh_value_name(g, g.value(v).name + suffix), g.value(v).dtype);
        g.value(out).shape = g.value(v).shape;
        ir::Node r;
        r.name = "reformat:" + g.value(v).name + suffix;
        r.op = ir::OpKind::kReformat;
        r.opset = 1;
        r.inputs = {v};
        r.outputs = {out};
        r.attrs["layout"] = ir::Attribute::of_string(layout_name(need));
        inserted.push_back(std::move(r));
        layout[out] = need;
        it = reformatted.emplace(key, out).first;
        ++added;
      }
      v = it->second;
    }
    bool has_4d_output = false;
    for (ir::ValueId o : g.nodes[i].outputs)
      if (o != ir::kNoValue && is_4d(g, o)) {
        layout[o] = need;
        has_4d_output = true;
      }
    // RNN / GRU / LSTM own an ONNX `layout` attribute (opset 14: 1 = batch-major): their row-major
    // 4-D Y keeps it (the annotation would overwrite it; docs/decisions/0074).
    const ir::OpKind op = g.nodes[i].op;
    const bool onnx_layout = op == ir::OpKind::kRNN || op == ir::OpKind::kGRU || op == ir::OpKind::kLSTM;
    if (has_4d_output && !onnx_layout) g.nodes[i].attrs["layout"] = ir::Attribute::of_string(layout_name(need));
  }
  for (ir::Node& r : inserted) g.add_node(std::move(r));
  KILN_RETURN_IF_ERROR(g.topo_sort());
  return added;
}

}  // namespace kiln::passes
