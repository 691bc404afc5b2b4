// RoPE into the paged attention of an LLM step (docs/decisions/0090):
//   PagedAttention(Rope(q, pos, inv_freq), Rope(k, pos, inv_freq), v, pos, ...)
//     -> PagedAttention(q, k, v, pos, ..., inv_freq)
// when both Rope layers are in angle mode (3 inputs, inv_freq the same value), rotate the whole
// head (rotary_dim 0 or D) in rotate_half pairs (interleaved 0), take the head axis 1 of [T, H, D],
// read the PagedAttention's own positions, and feed only it. The backends then rotate Q and K in
// the attention's append (ops.def PagedAttention, input 7) instead of two layers of their own:
// the same values, two kernel launches less per decoder layer.
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln::passes {

namespace {

namespace pt = pattern;
using ir::OpKind;

// The Rope layer producing `v` when it has the fusable form for `attn`; else nullptr.
ir::Node* fusable_rope(ir::Graph& g, const pt::Consumers& c, ir::ValueId v, const ir::Node& attn) {
  ir::Node* r = pt::producer(g, v, OpKind::kRope);
  if (!r || r->inputs.size() != 3 || !pt::single_use(g, c, v)) return nullptr;
  if (r->inputs[1] != attn.inputs[3]) return nullptr;  // another positions tensor
  if (r->attr_int("interleaved", 0) != 0 || r->attr_int("head_axis", 1) != 1) return nullptr;
  const auto& s = g.value(r->inputs[0]).shape;
  if (!s || s->size() != 3 || !(*s)[2].is_known()) return nullptr;
  const int64_t d = (*s)[2].value, rd = r->attr_int("rotary_dim", 0);
  if (d % 2 != 0 || (rd != 0 && rd != d)) return nullptr;
  const auto& f = g.value(r->inputs[2]);
  if (f.dtype != DataType::kFloat32 || !f.shape || f.shape->size() != 1 || !(*f.shape)[0].is_known() ||
      (*f.shape)[0].value != d / 2)
    return nullptr;
  return r;
}

}  // namespace

Status fuse_rope_attention(ir::Graph& g, const PassOptions&) {
  const pt::Consumers c = g.consumers();
  for (auto& n : g.nodes) {
    if (n.removed || n.op != OpKind::kPagedAttention || n.inputs.size() != 7) continue;
    ir::Node* rq = fusable_rope(g, c, n.inputs[0], n);
    ir::Node* rk = fusable_rope(g, c, n.inputs[1], n);
    if (!rq || !rk || rq == rk || rq->inputs[2] != rk->inputs[2]) continue;
    for (ir::Node* r : {rq, rk}) {
      g.value(r->outputs[0]).producer = -1;
      r->removed = true;
      n.origin.insert(n.origin.end(), r->origin.begin(), r->origin.end());
    }
    n.inputs[0] = rq->inputs[0];
    n.inputs[1] = rk->inputs[0];
    n.inputs.push_back(rq->inputs[2]);
  }
  return Status::Ok();
}

}  // namespace kiln::passes
