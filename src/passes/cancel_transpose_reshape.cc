// Layout round trips that exporters leave behind, collapsed:
//   Transpose(Transpose(x, p1), p2)  ->  Transpose(x, q), q[i] = p1[p2[i]]
//   Transpose(x, identity)           ->  x
//   Reshape(R(x), s)                 ->  Reshape(x, s)   R in {Reshape, Flatten, Squeeze, Unsqueeze},
//                                        s constant without 0 entries (or allowzero = 1)
//   R(x) with shape(R(x)) = shape(x) ->  x                (both shapes fully known)
// (ONNX Transpose: output dim i is input dim perm[i], perm defaulting to the reversed axes;
// Reshape: 0 copies the input's dim unless allowzero, -1 is inferred from the element count,
// which the R(x) chain preserves — hence only 0 blocks bypassing R.)
#include <numeric>

#include "passes/passes.h"

namespace kiln::passes {

namespace {

// The perm of a Transpose, validated; false if it is unknown or not a permutation.
bool transpose_perm(const ir::Graph& g, const ir::Node& n, std::vector<int64_t>* perm) {
  if (n.inputs.empty() || n.inputs[0] == ir::kNoValue) return false;
  if (n.has_attr("perm")) {
    *perm = n.attr_ints("perm");
  } else {
    const auto& s = g.value(n.inputs[0]).shape;
    if (!s) return false;
    perm->resize(s->size());
    std::iota(perm->rbegin(), perm->rend(), 0);
  }
  std::vector<bool> seen(perm->size(), false);
  for (int64_t p : *perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm->size()) || seen[p]) return false;
    seen[p] = true;
  }
  return true;
}

bool is_identity(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Ops that only reinterpret the element order they are given (row-major order is kept).
bool is_reshape_like(ir::OpKind op) {
  return op == ir::OpKind::kReshape || op == ir::OpKind::kFlatten || op == ir::OpKind::kSqueeze ||
         op == ir::OpKind::kUnsqueeze;
}

const ir::Node* live_producer(const ir::Graph& g, ir::ValueId v) {
  if (v == ir::kNoValue || g.value(v).producer < 0) return nullptr;
  const ir::Node& p = g.node(g.value(v).producer);
  return p.removed ? nullptr : &p;
}

// Drops `n`, its consumers reading its data input instead. False if that is impossible.
bool bypass(ir::Graph& g, ir::Node& n, const std::set<std::string>& pinned) {
  if (pinned.count(g.value(n.outputs[0]).name)) return false;
  if (!replace_all_uses(g, n.outputs[0], n.inputs[0])) return false;
  n.removed = true;
  return true;
}

void absorb_if_sole_use(const ir::Graph& g, const std::vector<std::vector<ir::NodeId>>& consumers,
                        const ir::Node& inner, ir::Node* outer) {
  const ir::ValueId t = inner.outputs[0];
  if (consumers[t].size() == 1 && std::count(g.outputs.begin(), g.outputs.end(), t) == 0)
    outer->origin.insert(outer->origin.end(), inner.origin.begin(), inner.origin.end());
}

}  // namespace

Status cancel_transpose_reshape(ir::Graph& g, const PassOptions&) {
  const std::set<std::string> pinned = subgraph_reads(g);
  const auto consumers = g.consumers();
  for (auto& n : g.nodes) {
    if (n.removed || n.outputs.empty() || n.outputs[0] == ir::kNoValue) continue;
    if (n.op == ir::OpKind::kTranspose) {
      std::vector<int64_t> p2;
      if (!transpose_perm(g, n, &p2)) continue;
      const ir::Node* inner = live_producer(g, n.inputs[0]);
      std::vector<int64_t> p1;
      if (inner && inner->op == ir::OpKind::kTranspose && transpose_perm(g, *inner, &p1) && p1.size() == p2.size()) {
        std::vector<int64_t> q(p2.size());
        for (size_t i = 0; i < q.size(); ++i) q[i] = p1[p2[i]];
        absorb_if_sole_use(g, consumers, *inner, &n);
        n.inputs[0] = inner->inputs[0];
        n.attrs["perm"] = ir::Attribute::of_ints(q);
        p2 = q;
      }
      if (is_identity(p2)) bypass(g, n, pinned);
      continue;
    }
    if (!is_reshape_like(n.op) || n.inputs.empty() || n.inputs[0] == ir::kNoValue) continue;
    if (n.op == ir::OpKind::kReshape && n.inputs.size() > 1) {
      const ir::Node* inner = live_producer(g, n.inputs[0]);
      std::vector<int64_t> target;
      const bool allowzero = n.opset >= 14 && n.attr_int("allowzero", 0) != 0;
      if (inner && is_reshape_like(inner->op) && !inner->inputs.empty() && inner->inputs[0] != ir::kNoValue &&
          constant_ints(g, n.inputs[1], &target) &&
          (allowzero || std::find(target.begin(), target.end(), 0) == target.end())) {
        absorb_if_sole_use(g, consumers, *inner, &n);
        n.inputs[0] = inner->inputs[0];
      }
    }
    std::vector<int64_t> in_shape, out_shape;
    if (known_shape(g, n.inputs[0], &in_shape) && known_shape(g, n.outputs[0], &out_shape) && in_shape == out_shape)
      bypass(g, n, pinned);
  }
  return Status::Ok();
}

}  // namespace kiln::passes
