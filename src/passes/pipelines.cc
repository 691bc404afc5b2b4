// The optimization pipeline: one ordered list, one line per pass with the reason for its place.
#include <chrono>

#include "passes/passes.h"

namespace kiln::passes {

const std::vector<Pass>& default_pipeline() {
  static const std::vector<Pass> kPipeline = {
      // Drop Identity/Dropout/no-op Cast first so every later pattern sees producers directly.
      {"eliminate_noops", 1, eliminate_noops},
      // Evaluate constant subgraphs (exporters' shape arithmetic) before matching patterns.
      {"fold_constants", 1, fold_constants},
      // Decomposed LayerNorm -> one layer; needs eps and the axes input folded to constants.
      {"fuse_layernorm", 2, fuse_layernorm},
      // Decomposed GELU -> one layer; needs 0.5, 1 and sqrt 2 folded to constants.
      {"fuse_gelu", 2, fuse_gelu},
      // BN must disappear into the conv weights before the conv epilogue is matched.
      {"fold_batchnorm", 2, fold_batchnorm},
      // Conv + bias + residual Add + activation become one layer.
      {"fuse_conv_epilogue", 2, fuse_conv_epilogue},
      // Last: whatever the rewrites left unread goes.
      {"eliminate_dead_layers", 1, eliminate_dead_layers},
  };
  return kPipeline;
}

Status run_pipeline(ir::Graph& g, const PassOptions& opts) {
  for (const Pass& p : default_pipeline()) {
    if (opts.opt_level < p.min_level || opts.disabled.count(p.name)) continue;
    const int before = live_layers(g);
    const auto t0 = std::chrono::steady_clock::now();
    KILN_RETURN_IF_ERROR(p.run(g, opts).with_context(std::string("pass ") + p.name));
    KILN_RETURN_IF_ERROR(g.topo_sort().with_context(std::string("after pass ") + p.name));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (opts.log) {
      char line[160];
      std::snprintf(line, sizeof line, "%-22s %4d -> %4d layers  %7.2f ms", p.name, before, live_layers(g), ms);
      opts.log(line);
    }
  }
  return Status::Ok();
}

}  // namespace kiln::passes
