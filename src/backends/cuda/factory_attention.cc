// Attention (Kiln's fused op, docs/decisions/0006; passes/fuse_attention): Q [*, Hq, Sq, D],
// K [*, Hkv, Sk, D], V [*, Hkv, Sk, Dv] and the optional mask (float additive, or bool as 0/1,
// broadcast to [*, Hq, Sq, Sk]), all row-major in the layer's storage type (fp32 / fp16 / bf16; a
// constant operand is uploaded as a weight; a bool mask computed at run time is cast to 0 / 1 in
// that type by a cast layer, docs/decisions/0051). Two cuBLASLt strided-batched GEMMs around Kiln's masked
// softmax (gpu_transformer.h plan_attention), the scores of at most 64 MiB (or half the workspace
// limit) per chunk of heads; for fp16 / bf16 with D = Dv in {64, 128} also Kiln's fused
// FlashAttention-2 kernel (flash_attention_layer.cc, docs/decisions/0061), a second tactic that
// the builder times against the first.
#include <algorithm>

#include "backends/cuda/gpu_transformer.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_attention(LowerContext& ctx, const ir::Node& n, const std::string&) {
  const size_t scratch_limit = std::min<size_t>(64u << 20, ctx.options().workspace_limit / 2);
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
  KILN_ASSIGN_OR_RETURN(auto layer, make_attention_layer(p, ctx.storage(), ctx.options().precision.tf32));
  if (flash_attention_offered(p, ctx.storage())) {  // the fused kernel too: the builder times both
    std::vector<std::pair<TacticSource, std::unique_ptr<Layer>>> impls;
    impls.emplace_back(TacticSource::kCublasLt, std::move(layer));
    impls.emplace_back(TacticSource::kKiln, make_flash_attention_layer(p, ctx.storage()));
    layer = make_choice_layer(std::move(impls));
  }
  ctx.add_layer(std::move(layer), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
