// Attention (Kiln's fused op, docs/decisions/0006; passes/fuse_attention): Q [*, Hq, Sq, D],
// K [*, Hkv, Sk, D], V [*, Hkv, Sk, Dv] and the optional mask (float additive, or bool as 0/1,
// broadcast to [*, Hq, Sq, Sk]), all row-major in the layer's storage type (fp32 / fp16 / bf16; a
// constant operand is uploaded as a weight; a bool mask computed at run time is cast to 0 / 1 in
// that type by a cast layer, docs/decisions/0051). Two cuBLASLt strided-batched GEMMs around Kiln's masked
// softmax (gpu_transformer.h plan_attention), the scores of at most 64 MiB (or half the workspace
// limit) per chunk of heads; for fp16 / bf16 with D = Dv in {64, 128} also Kiln's fused
// FlashAttention-2 kernel (flash_attention_layer.cc, docs/decisions/0061), a second tactic that
// the builder times against the first. head_layout "bshd" (Q/K/V/O [*, S, H, D], docs/decisions/0065):
// the fused kernel reads and writes it by strides; the cuBLASLt path copies to and from
// [*, H, S, D] in its workspace; without the fused kernel (or room for the copies) the factory adds
// the four transposes as strided-copy layers around a [*, H, S, D] layer.
#include <algorithm>
#include <optional>

#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/gpu_transformer.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

namespace {

// The layer (or the choice of layers) of one plan: the cuBLASLt + softmax path, and where the
// fused kernel is offered, both in a choice layer the builder times.
StatusOr<std::unique_ptr<Layer>> attention_layer(LowerContext& ctx, const AttentionPlan& p) {
  KILN_ASSIGN_OR_RETURN(auto layer, make_attention_layer(p, ctx.storage(), ctx.options().precision.tf32));
  if (flash_attention_offered(p, ctx.storage())) {  // the fused kernel too: the builder times both
    std::vector<std::pair<TacticSource, std::unique_ptr<Layer>>> impls;
    impls.emplace_back(TacticSource::kCublasLt, std::move(layer));
    impls.emplace_back(TacticSource::kKiln, make_flash_attention_layer(p, ctx.storage()));
    layer = make_choice_layer(std::move(impls));
  }
  return layer;
}

// A bshd operand [*, S, H, D] that is a Reshape of one part of a Split along the last axis of
// X [*, S, W] (the packed output of a fused QKV projection: GPT-2's c_attn, fuse_horizontal_gemm's
// Q/K/V GEMM): the layer can read it in place — X from element `offset` on, `row` = W elements
// from one token to the next — instead of the Split's strided copy.
struct PackedView {
  ir::ValueId x = ir::kNoValue;
  int64_t offset = 0, row = 0;
};
std::optional<PackedView> packed_view(const LowerContext& ctx, ir::ValueId v, int elem_bytes) {
  const ir::Graph& g = ctx.graph();
  const ir::NodeId rp = g.value(v).producer;
  if (rp < 0 || g.value(v).constant) return std::nullopt;
  const ir::Node& reshape = g.node(rp);
  if (reshape.removed || reshape.op != ir::OpKind::kReshape || reshape.inputs.empty()) return std::nullopt;
  const ir::ValueId part = reshape.inputs[0];
  const ir::NodeId sp = g.value(part).producer;
  if (sp < 0) return std::nullopt;
  const ir::Node& split = g.node(sp);
  if (split.removed || split.op != ir::OpKind::kSplit || split.inputs.empty()) return std::nullopt;
  const Shape& xs = ctx.shape(split.inputs[0]);
  const Shape& ps = ctx.shape(part);
  const Shape& vs = ctx.shape(v);
  const size_t r = xs.size();
  int64_t axis = split.attr_int("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(r);
  // X [*, S, W] -> part [*, S, w] -> v [*, S, H, D] with H * D = w: only the last axis is split.
  if (r < 2 || axis != static_cast<int64_t>(r) - 1 || ps.size() != r || vs.size() != r + 1) return std::nullopt;
  for (size_t i = 0; i + 1 < r; ++i)
    if (xs[i] != ps[i] || xs[i] != vs[i]) return std::nullopt;
  if (vs[r - 1] * vs[r] != ps[r - 1]) return std::nullopt;
  PackedView pv;
  pv.x = split.inputs[0];
  pv.row = xs.back();
  bool found = false;
  for (ir::ValueId o : split.outputs) {
    if (o == part) {
      found = true;
      break;
    }
    if (o == ir::kNoValue) return std::nullopt;
    pv.offset += ctx.shape(o).back();
  }
  // The fused kernel moves 16-byte pieces: the start and the token stride in 16-byte units.
  if (!found || (pv.offset * elem_bytes) % 16 != 0 || (pv.row * elem_bytes) % 16 != 0) return std::nullopt;
  return pv;
}

}  // namespace

Status lower_attention(LowerContext& ctx, const ir::Node& n, const std::string&) {
  const size_t limit = ctx.options().workspace_limit;
  const size_t scratch_limit = std::min<size_t>(64u << 20, limit / 2);
  const int elem_bytes = static_cast<int>(storage_bytes(ctx.storage()));
  KILN_ASSIGN_OR_RETURN(AttentionPlan p, plan_attention(n, ctx.value_shapes(), elem_bytes, scratch_limit));
  std::vector<int> ins;
  for (size_t k = 0; k < n.inputs.size() && k < 4; ++k) {
    if (n.inputs[k] == ir::kNoValue) continue;  // the optional mask
    const bool runtime_bool = ctx.dtype(n.inputs[k]) == DataType::kBool && !ctx.graph().value(n.inputs[k]).constant;
    KILN_ASSIGN_OR_RETURN(int a, runtime_bool ? ctx.operand_as(n.inputs[k], ctx.storage())
                                              : ctx.row_major_operand(n.inputs[k]));
    ins.push_back(a);
  }
  // head_layout "bshd" (docs/decisions/0065): the fused kernel reads it by strides and the
  // cuBLASLt path through copies in its workspace. Where the fused kernel is not offered (fp32,
  // other head sizes) or the copies would not fit the workspace limit, explicit transpose layers
  // around today's [*, H, S, D] layer instead: the layer then costs what it did before the
  // Transposes were folded, and always has a tactic.
  const bool explicit_transposes =
      p.bshd && (!flash_attention_offered(p, ctx.storage()) || p.scratch_bytes + p.staging_bytes > limit);
  if (!explicit_transposes) {
    // Q, K, V read in place from a packed QKV tensor where they are Reshapes of its Split (the
    // Split's copies are then unread and dropped after lowering: Lowering::drop_unread_copies).
    if (p.bshd && storage_is_float(ctx.storage())) {
      for (int i = 0; i < 3; ++i) {
        const auto pv = packed_view(ctx, n.inputs[i], elem_bytes);
        if (!pv) continue;
        KILN_ASSIGN_OR_RETURN(int xa, ctx.row_major_operand(pv->x));
        if (ctx.value_type(xa) != ctx.storage()) continue;
        const int view = ctx.new_value(n.name + "/" + std::to_string(i) + "_in_place", ctx.shape(n.inputs[i]), ctx.storage(), false);
        ctx.alias(view, xa, pv->offset * elem_bytes);
        ins[static_cast<size_t>(i)] = view;
        p.row_stride[i] = pv->row;
      }
    }
    KILN_ASSIGN_OR_RETURN(auto layer, attention_layer(ctx, p));
    ctx.add_layer(std::move(layer), n.name, ins, {ctx.new_output(n)}, n.origin);
    return Status::Ok();
  }
  const size_t r = ctx.shape(n.inputs[0]).size();
  auto heads_first = [&](Shape s) {
    std::swap(s[r - 3], s[r - 2]);
    return s;
  };
  const StorageType t = ctx.storage();
  const char* what[3] = {"q", "k", "v"};
  const int64_t seq[3] = {p.sq, p.sk, p.sk}, heads[3] = {p.hq, p.hkv, p.hkv}, dims[3] = {p.d, p.d, p.dv};
  for (int i = 0; i < 3; ++i) {  // [*, S, H, D] -> [*, H, S, D]
    const int x = ctx.new_value(n.name + "/" + what[i] + "_bhsd", heads_first(ctx.shape(n.inputs[i])), t, false);
    ctx.add_layer(make_strided_copy_layer("Transpose", attention_axes_swap(p.batch, seq[i], heads[i], dims[i]), elem_bytes),
                  n.name + "/" + what[i] + "_to_bhsd", {ins[i]}, {x}, n.origin);
    ins[i] = x;
  }
  AttentionPlan q = p;
  q.bshd = false;
  q.staging_bytes = 0;
  const int o = ctx.new_value(n.name + "/o_bhsd", heads_first(ctx.shape(n.outputs[0])), t, false);
  KILN_ASSIGN_OR_RETURN(auto layer, attention_layer(ctx, q));
  ctx.add_layer(std::move(layer), n.name, ins, {o}, n.origin);
  ctx.add_layer(make_strided_copy_layer("Transpose", attention_axes_swap(p.batch, p.hq, p.sq, p.dv), elem_bytes),
                n.name + "/o_to_bshd", {o}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
