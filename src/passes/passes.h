// Every pass, declared once; pipelines.cc orders them. One pass per file, named like the pass.
#pragma once

#include <string>
#include <vector>

#include "ir/layer_annotations.h"
#include "passes/pass.h"

namespace kiln {
struct LayerPrecision;   // kiln/precision.h
struct PrecisionConfig;  // kiln/precision.h
}

namespace kiln::passes {

Status eliminate_noops(ir::Graph& g, const PassOptions& opts);        // eliminate_noops.cc
Status fold_constants(ir::Graph& g, const PassOptions& opts);         // fold_constants.cc
Status eliminate_dead_layers(ir::Graph& g, const PassOptions& opts);  // eliminate_dead_layers.cc
Status fold_batchnorm(ir::Graph& g, const PassOptions& opts);         // fold_batchnorm.cc
Status fuse_conv_epilogue(ir::Graph& g, const PassOptions& opts);     // fuse_conv_epilogue.cc
Status fuse_layernorm(ir::Graph& g, const PassOptions& opts);         // fuse_layernorm.cc
Status fuse_qdq_linear(ir::Graph& g, const PassOptions& opts);        // fuse_qdq_linear.cc
Status fuse_qdq_conv(ir::Graph& g, const PassOptions& opts);          // fuse_qdq_conv.cc
Status requantize_quant_conv(ir::Graph& g, const PassOptions& opts);  // requantize_quant_conv.cc
Status fuse_gelu(ir::Graph& g, const PassOptions& opts);              // fuse_gelu.cc
Status common_subexpression(ir::Graph& g, const PassOptions& opts);   // common_subexpression.cc
Status cancel_transpose_reshape(ir::Graph& g, const PassOptions& opts);  // cancel_transpose_reshape.cc
Status fuse_matmul_add(ir::Graph& g, const PassOptions& opts);           // fuse_matmul_add.cc
Status fold_pad_into_conv(ir::Graph& g, const PassOptions& opts);        // fold_pad_into_conv.cc
Status reduce_mean_to_global_pool(ir::Graph& g, const PassOptions& opts); // reduce_mean_to_global_pool.cc
Status fuse_horizontal_conv(ir::Graph& g, const PassOptions& opts);       // fuse_horizontal_conv.cc
Status concat_in_place(ir::Graph& g, const PassOptions& opts);            // concat_in_place.cc
Status fuse_rmsnorm(ir::Graph& g, const PassOptions& opts);              // fuse_rmsnorm.cc
Status fuse_attention(ir::Graph& g, const PassOptions& opts);            // fuse_attention.cc
Status fold_attention_transposes(ir::Graph& g, const PassOptions& opts);  // fold_attention_transposes.cc
Status fuse_horizontal_gemm(ir::Graph& g, const PassOptions& opts);      // fuse_horizontal_gemm.cc
Status fuse_gemm_activation(ir::Graph& g, const PassOptions& opts);      // fuse_gemm_activation.cc
Status fuse_gemm_residual(ir::Graph& g, const PassOptions& opts);        // fuse_gemm_activation.cc
Status fuse_rope_attention(ir::Graph& g, const PassOptions& opts);       // fuse_rope_attention.cc
Status fuse_rmsnorm_gemm(ir::Graph& g, const PassOptions& opts);         // fuse_rmsnorm_gemm.cc
Status fuse_gated_gemm(ir::Graph& g, const PassOptions& opts);           // fuse_gated_gemm.cc
Status fuse_pointwise(ir::Graph& g, const PassOptions& opts);            // fuse_pointwise.cc
Status annotate_qdq(ir::Graph& g, const PassOptions& opts);              // annotate_qdq.cc
Status propagate_qdq(ir::Graph& g, const PassOptions& opts);             // propagate_qdq.cc
Status eliminate_redundant_qdq(ir::Graph& g, const PassOptions& opts);   // eliminate_redundant_qdq.cc

// ---- per-layer precision constraints (layer_precisions.cc): run by the builder after the pipeline.
// precision_token, precision_from_token, node_precision: ir/layer_annotations.h.
using ir::node_precision;
using ir::precision_from_token;
using ir::precision_token;
// '*' in `pattern` matches any run of characters (possibly empty); the rest matches itself.
bool glob_match(const std::string& pattern, const std::string& name);
// "PATTERN:PREC[,PATTERN:PREC...]" (trtexec --layerPrecisions), PREC one of fp32, fp16, bf16;
// a pattern may contain ':' (the precision follows the last one). Errors name the bad item.
StatusOr<std::vector<LayerPrecision>> parse_layer_precisions(const std::string& spec);
// The constraint half of assign_precisions: writes the "precision" attribute ("fp32", "fp16",
// "bf16") and "precision_constrained" = 1 on every live node whose name or origin (the ONNX
// nodes fused into it) matches a rule; later rules override earlier ones. Errors list, at once,
// every rule with a precision other than fp32/fp16/bf16 or no matching node.
Status apply_layer_precisions(ir::Graph& g, const std::vector<LayerPrecision>& rules);

// ---- precision assignment (assign_precisions.cc): run by the builder after the pipeline, before
// layouts; the one place that decides each layer's precision (docs/decisions/0033).
// Whether a target's tactics run layer `n` with its float outputs and weights in `precision`.
using PrecisionSupport = bool (*)(const ir::Graph& g, const ir::Node& n, DataType precision);
// Every layer in fp32, fp16 or bf16: what the CUDA tactics support (every family runs all three,
// docs/decisions/0013); the CPU records the decision and computes in float32.
bool float_storage_support(const ir::Graph& g, const ir::Node& n, DataType precision);
// Writes every live node's decided precision ("precision" attribute; "precision_constrained" = 1
// when a rule decided it). Errors: config.check()'s, apply_layer_precisions', and a constrained
// layer whose precision `support` refuses (naming the layer and the rule's precision).
Status assign_precisions(ir::Graph& g, const PrecisionConfig& config, PrecisionSupport support);

// ---- layout assignment (assign_layouts.cc): run by the builder for a backend, after the pipeline.
// Layout, LayoutPreference and the two preferences: ir/layer_annotations.h.
using ir::Layout;
using ir::LayoutPreference;
using ir::row_major_layout_preference;
using ir::tensor_core_layout_preference;
// Writes attribute "layout" ("NCHW"/"NHWC") on every node with a 4-D output and inserts Reformat
// nodes where a node reads a 4-D activation stored in another layout; returns how many. Needs
// inferred shapes (layout-free shapes, H*W = 1 or C = 1, never get a Reformat).
StatusOr<int> assign_layouts(ir::Graph& g, LayoutPreference pref);

// The ordered pipeline (pipelines.cc).
const std::vector<Pass>& default_pipeline();
// Runs the pipeline at opts.opt_level, logging "name: before -> after layers, ms" per pass;
// with opts.verify_each, ir::verify after every pass (the error names the pass); with
// opts.dump_after, logs ir::print_graph after that pass. Unknown pass names in opts.disabled
// or opts.dump_after are an error.
Status run_pipeline(ir::Graph& g, const PassOptions& opts);

}  // namespace kiln::passes
