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
