// Building from an already imported ir::Graph (tests, the conformance runner): internal, so the
// public kiln/builder.h names no ir:: type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/builder.h"
#include "kiln/status.h"

namespace kiln {

// Builder::build's import: the ONNX model at `onnx_path` as a graph — quantized first (a
// calibration or its cache, kiln/quantize.h) when config.int8 / fp8 and config.calibration name
// data or a cache. Reports the "calibrate", "import" and "warning" steps. Errors as
// Builder::build's and quantize_onnx's.
StatusOr<ir::Graph> import_for_build(const std::string& onnx_path, const BuilderConfig& config);

// Builder::build without the import: profiles -> kernel check -> passes -> tactics -> plan
// bytes. `graph` is copied, not changed. Errors as Builder::build's.
StatusOr<std::vector<uint8_t>> build_from_graph(const ir::Graph& graph, const BuilderConfig& config);
// The same, taking the graph: constants the passes replace (the q/k/v and gate/up weights that
// horizontal fusion concatenates) are freed as soon as the pass pipeline drops them, instead of
// staying alive in the caller's copy for the whole build (an 8B LLM's are 18 GB of float32).
StatusOr<std::vector<uint8_t>> build_from_graph(ir::Graph&& graph, const BuilderConfig& config);

// The graph after Builder::build's pass pipeline alone (config checks, profiles, kernel check, the
// optimizer at config.opt_level), before the precision decision and layouts: for tests of the
// passes that run after it (assign_precisions, layer precisions, layouts). Errors as Builder::build's.
StatusOr<ir::Graph> optimized_graph(const ir::Graph& graph, const BuilderConfig& config);

// The graph a CUDA plan of `graph` lowers — Builder::build's own steps up to the tactics (config
// checks, profiles, the pass pipeline, the precision decision, CUDA layouts) — and profile 0's opt
// shapes (one per graph input). For tests and tools that lower without a GPU
// (cuda::check_gpu_support); config.target is not checked against this machine. Errors as
// Builder::build's.
StatusOr<ir::Graph> cuda_layer_graph(const ir::Graph& graph, const BuilderConfig& config, std::vector<Shape>* opt_shapes);

// The extra input shapes CUDA tactics are tuned at for profile `prof` (one Shape per graph input,
// graph input order; BuilderConfig::tuning_shapes, docs/decisions/0041): the profile's min and
// max, and each power of two p in between with every dynamic dim set to p clamped to its range,
// duplicates and `opt` left out, thinned evenly to at most `max_sets` (min and max kept). Empty
// for a static profile or max_sets <= 0.
std::vector<std::vector<Shape>> tuning_shapes(const ir::Graph& g, const OptimizationProfile& prof,
                                              const std::vector<Shape>& opt, int max_sets);

}  // namespace kiln
