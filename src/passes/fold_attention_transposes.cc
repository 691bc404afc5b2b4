// The exporters' head transposes folded into the Attention layer (docs/decisions/0065):
//   Y = Transpose(Attention(Transpose(Q', p), Transpose(K', p), Transpose(V', p)[, M]), p),
//   p = [0, 2, 1, 3]
//     -> Y = Attention{head_layout = "bshd"}(Q', K', V'[, M])
// Q' [B, Sq, Hq, D], K' [B, Sk, Hkv, D], V' [B, Sk, Hkv, Dv] are the Reshapes of the projections
// ([B, S, H*D] -> [B, S, H, D]) and Y [B, Sq, Hq, Dv] the tensor the output Reshape merges back:
// the kernels read and write that layout through strides, so the four copies disappear (ops.def
// Attention; the mask keeps indexing [B, Hq, Sq, Sk]). Only where every piece matches: a rank-4
// Attention in today's layout, each of Q, K, V the single-use output of a Transpose with that
// perm, and the Attention's output read only by one such Transpose (not a graph output). A K
// given another way (K^T through something fuse_attention re-permuted into another perm, RoPE
// applied after the transpose as Llama / Qwen2 do) keeps today's form.
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln::passes {

namespace {

namespace pt = pattern;
using ir::OpKind;

const std::vector<int64_t> kSwapHeadsSeq = {0, 2, 1, 3};

// The live Transpose of perm [0, 2, 1, 3] producing v when v is read by nothing else; else nullptr.
ir::Node* head_transpose_producing(ir::Graph& g, const pt::Consumers& c, ir::ValueId v) {
  if (!pt::single_use(g, c, v)) return nullptr;
  ir::Node* t = pt::producer(g, v, OpKind::kTranspose);
  if (!t || t->inputs.size() != 1 || t->attr_ints("perm") != kSwapHeadsSeq || pt::rank_of(g, t->inputs[0]) != 4)
    return nullptr;
  return t;
}

bool try_fold(ir::Graph& g, const pt::Consumers& c, ir::Node& att) {
  if (att.inputs.size() < 3 || att.outputs.size() != 1 || att.attr_string("head_layout", "bhsd") != "bhsd") return false;
  const ir::ValueId y = att.outputs[0];
  if (pt::rank_of(g, y) != 4) return false;
  ir::Node* out = pt::sole_consumer(g, c, y, OpKind::kTranspose);
  if (!out || out->outputs.size() != 1 || out->attr_ints("perm") != kSwapHeadsSeq) return false;
  ir::Node* in[3];
  for (int i = 0; i < 3; ++i) {
    // Two inputs that are one value (Q = K) read it twice: not single-use, so not folded.
    in[i] = head_transpose_producing(g, c, att.inputs[static_cast<size_t>(i)]);
    if (!in[i]) return false;
  }
  for (int i = 0; i < 3; ++i) att.inputs[static_cast<size_t>(i)] = in[i]->inputs[0];
  const ir::ValueId y2 = out->outputs[0];
  att.outputs = {y2};
  g.value(y2).producer = att.id;
  att.attrs["head_layout"] = ir::Attribute::of_string("bshd");
  pt::absorb(att, {in[0], in[1], in[2], out});
  return true;
}

}  // namespace

Status fold_attention_transposes(ir::Graph& g, const PassOptions&) {
  const auto consumers = g.consumers();  // a fold changes only values no other match reads
  for (ir::Node& n : g.nodes)
    if (!n.removed && n.op == OpKind::kAttention) try_fold(g, consumers, n);
  return Status::Ok();
}

}  // namespace kiln::passes
