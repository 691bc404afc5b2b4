// Every pass, declared once; pipelines.cc orders them. One pass per file, named like the pass.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

Status eliminate_noops(ir::Graph& g, const PassOptions& opts);        // eliminate_noops.cc
Status fold_constants(ir::Graph& g, const PassOptions& opts);         // fold_constants.cc
Status eliminate_dead_layers(ir::Graph& g, const PassOptions& opts);  // eliminate_dead_layers.cc
Status fold_batchnorm(ir::Graph& g, const PassOptions& opts);         // fold_batchnorm.cc
Status fuse_conv_epilogue(ir::Graph& g, const PassOptions& opts);     // fuse_conv_epilogue.cc
Status fuse_layernorm(ir::Graph& g, const PassOptions& opts);         // fuse_layernorm.cc
Status fuse_gelu(ir::Graph& g, const PassOptions& opts);              // fuse_gelu.cc

// The ordered pipeline (pipelines.cc).
const std::vector<Pass>& default_pipeline();
// Runs the pipeline at opts.opt_level, logging "name: before -> after layers, ms" per pass.
Status run_pipeline(ir::Graph& g, const PassOptions& opts);

}  // namespace kiln::passes
