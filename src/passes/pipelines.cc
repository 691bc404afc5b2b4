// The optimization pipeline: one ordered list, one line per pass with the reason for its place.
#include <chrono>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/passes.h"

namespace kiln::passes {

const std::vector<Pass>& default_pipeline() {
  static const std::vector<Pass> kPipeline = {
      // An analysis at every opt level: Q/DQ scales as QuantParams on the quantized values. First,
      // while DequantizeLinear(constant weight) still exists (fold_constants turns it into a
      // float weight); it needs only initializer scales.
      {"annotate_qdq", 0, annotate_qdq},
      // Drop Identity/Dropout/no-op Cast first so every later pattern sees producers directly.
      {"eliminate_noops", 1, eliminate_noops},
      // Q/DQ pairs move across the layers that commute with them (Reshape/Flatten/Transpose/
      // Pad/MaxPool/Relu/Concat/...) so each DQ lands at its quantized layer's input, and DQ of a
      // constant weight below a Transpose/Reshape becomes DQ of the folded weight; before
      // fuse_qdq_linear, which needs DQ(Q(x)) and DQ(Wq) at the layer (docs/decisions/0056).
      {"propagate_qdq", 2, propagate_qdq},
      // The FQ(FQ(x)) round trips that the moves (and exporters) leave, dropped where every code
      // survives them bit for bit; before fuse_qdq_linear, which needs one pair at the layer.
      {"eliminate_redundant_qdq", 2, eliminate_redundant_qdq},
      // Q/DQ linear layers -> one 8-bit layer, before constant folding turns DQ(weight) into a
      // float weight (docs/decisions/0055).
      {"fuse_qdq_linear", 2, fuse_qdq_linear},
      // Q/DQ convolutions (+ bias, residual Add, Relu) -> one 8-bit layer, for the same reason
      // (docs/decisions/0078); the fusion conditions are the CUDA tactics' (C, K alignment).
      {"fuse_qdq_conv", 2, fuse_qdq_conv},
      // A QuantConv read only by QuantConvs that quantize it alike writes the 8-bit tensor they
      // read (docs/decisions/0081); right after the fusion, while the readers are QuantConvs.
      {"requantize_quant_conv", 2, requantize_quant_conv},
      // Evaluate constant subgraphs (exporters' shape arithmetic, Shape of known dims) before
      // matching patterns.
      {"fold_constants", 1, fold_constants},
      // After folding, equal constants compare by content: twins merge before any pattern is matched.
      {"common_subexpression", 1, common_subexpression},
      // Layout round trips go before the fusions so MatMul/Conv patterns see their real producers.
      {"cancel_transpose_reshape", 1, cancel_transpose_reshape},
      // Decomposed LayerNorm -> one layer; needs eps and the axes input folded to constants.
      {"fuse_layernorm", 2, fuse_layernorm},
      // Decomposed RMSNorm -> one layer; same needs as LayerNorm (eps, axes constant).
      {"fuse_rmsnorm", 2, fuse_rmsnorm},
      // Decomposed GELU -> one layer; needs 0.5, 1 and sqrt 2 folded to constants.
      {"fuse_gelu", 2, fuse_gelu},
      // Q K^T -> scale -> mask -> Softmax -> V becomes one layer; needs the transposes already
      // collapsed and the scale/causal-mask constants folded, and must run before fuse_matmul_add
      // could take the mask Add.
      {"fuse_attention", 2, fuse_attention},
      // The head Transposes (perm 0,2,1,3) around each Attention become its head_layout "bshd"
      // (docs/decisions/0065): right after the Attention exists, before fuse_horizontal_gemm and
      // fuse_pointwise see the Transposes as layers; every backend reads the layout by strides.
      {"fold_attention_transposes", 2, fold_attention_transposes},
      // Needs constant W and b (folded above); independent of the conv passes.
      {"fuse_matmul_add", 2, fuse_matmul_add},
      // Parallel projections of one input (Q/K/V) -> one wider GEMM + Split; after fuse_matmul_add
      // so the biases are already inside the Gemms it concatenates.
      {"fuse_horizontal_gemm", 2, fuse_horizontal_gemm},
      // Spatial ReduceMean becomes a pool before the conv passes, which do not look at it.
      {"reduce_mean_to_global_pool", 2, reduce_mean_to_global_pool},
      // Pad must join the Conv while it is still a plain Conv (before BN folding and epilogue fusion).
      {"fold_pad_into_conv", 2, fold_pad_into_conv},
      // BN must disappear into the conv weights before the conv epilogue is matched.
      {"fold_batchnorm", 2, fold_batchnorm},
      // Conv + bias + residual Add + activation become one layer.
      {"fuse_conv_epilogue", 2, fuse_conv_epilogue},
      // Siblings compare their epilogues, so they merge after fuse_conv_epilogue has settled them.
      {"fuse_horizontal_conv", 2, fuse_horizontal_conv},
      // Relu into the GEMM epilogue: after fuse_matmul_add / fuse_horizontal_gemm have made the
      // Gemm / MatMulBias layers and fold_batchnorm has folded BNs into Gemms (a Relu in between
      // would stop that), before fuse_pointwise would take the Relu into a program of its own.
      {"fuse_gemm_activation", 2, fuse_gemm_activation},
      {"fuse_gemm_residual", 2, fuse_gemm_residual},
      // An RMSNorm read only by the GEMM after it becomes that GEMM's prologue (docs/decisions/0092):
      // after fuse_horizontal_gemm (one wide GEMM reads the norm) and fuse_gemm_residual (the
      // MatMulBias forms settled), before fuse_pointwise could see the norm's readers change.
      {"fuse_rmsnorm_gemm", 2, fuse_rmsnorm_gemm},
      // An LLM step's Rope layers of Q and K into its PagedAttention (docs/decisions/0090).
      {"fuse_rope_attention", 2, fuse_rope_attention},
      // After every pattern pass (LayerNorm, GELU, MatMul+Add, conv epilogue, horizontal conv), so it
      // takes only the elementwise layers they left: remaining chains and small DAGs become one program each.
      {"fuse_pointwise", 2, fuse_pointwise},
      // silu(gate) * up over the halves of the wide gate/up GEMM becomes its epilogue: needs the
      // program fuse_pointwise just made and the Split fuse_horizontal_gemm made (0092).
      {"fuse_gated_gemm", 2, fuse_gated_gemm},
      // After the rewrites: whatever they left unread goes.
      {"eliminate_dead_layers", 1, eliminate_dead_layers},
      // An analysis, not a rewrite: it needs the final producers and readers of every Concat input.
      {"concat_in_place", 2, concat_in_place},
  };
  return kPipeline;
}

namespace {

Status check_pass_names(const PassOptions& opts) {
  std::set<std::string> known;
  std::string list;
  for (const Pass& p : default_pipeline()) {
    known.insert(p.name);
    list += (list.empty() ? "" : ", ") + std::string(p.name);
  }
  for (const auto& name : opts.disabled)
    if (!known.count(name)) return invalid_argument("disabled pass '" + name + "' does not exist (passes: " + list + ")");
  if (!opts.dump_after.empty() && !known.count(opts.dump_after))
    return invalid_argument("dump-after pass '" + opts.dump_after + "' does not exist (passes: " + list + ")");
  return Status::Ok();
}

}  // namespace

Status run_pipeline(ir::Graph& g, const PassOptions& opts) {
  KILN_RETURN_IF_ERROR(check_pass_names(opts));
  for (const Pass& p : default_pipeline()) {
    const bool skipped = opts.opt_level < p.min_level || opts.disabled.count(p.name);
    if (skipped) {
      if (opts.log && opts.dump_after == p.name)
        opts.log(std::string("dump-after ") + p.name + ": the pass did not run (disabled or above the opt level)");
      continue;
    }
    const int before = live_layers(g);
    const auto t0 = std::chrono::steady_clock::now();
    KILN_RETURN_IF_ERROR(p.run(g, opts).with_context(std::string("pass ") + p.name));
    KILN_RETURN_IF_ERROR(g.topo_sort().with_context(std::string("after pass ") + p.name));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    // topo_sort has compacted the graph, so ids are dense again, as the verifier expects.
    if (opts.verify_each)
      KILN_RETURN_IF_ERROR(ir::verify(g).with_context(std::string("IR invalid after pass ") + p.name));
    if (opts.log) {
      char line[160];
      std::snprintf(line, sizeof line, "%-26s %4d -> %4d layers  %7.2f ms", p.name, before, live_layers(g), ms);
      opts.log(line);
      if (opts.dump_after == p.name) opts.log("graph after " + std::string(p.name) + ":\n" + ir::print_graph(g));
    }
  }
  return Status::Ok();
}

}  // namespace kiln::passes
