// The Builder turns an ONNX model into a serialized plan for one target (TensorRT's
// IBuilder / IBuilderConfig / IOptimizationProfile, in Kiln's terms). Build = import ONNX ->
// resolve input shapes from the optimization profiles -> check every layer has a kernel on
// the target -> (passes, precision, tactic selection) -> serialize the plan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kiln/logger.h"
#include "kiln/precision.h"
#include "kiln/quantize.h"
#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln {

using Shape = std::vector<int64_t>;  // same alias as core/tensor.h

// The range of shapes one input may take at run time. Memory is sized for `max`, tactics are
// tuned at `opt` (TensorRT's kMIN/kOPT/kMAX).
struct ShapeRange {
  Shape min, opt, max;
  bool contains(const Shape& s) const;  // same rank and min <= s <= max per dim
};

class OptimizationProfile {
 public:
  // Sets the range of input `name`. Errors (naming the input and the dim) unless min, opt and
  // max have the same rank and min <= opt <= max per dim, all dims >= 0.
  Status set_dimensions(const std::string& name, const Shape& min, const Shape& opt, const Shape& max);
  // nullptr when the profile does not name `name`.
  const ShapeRange* find(const std::string& name) const;
  const std::map<std::string, ShapeRange>& ranges() const { return ranges_; }
  bool empty() const { return ranges_.empty(); }

 private:
  std::map<std::string, ShapeRange> ranges_;  // input name -> range
};

enum class TargetDevice : uint8_t { kCpu = 0, kCuda = 1, kAuto = 2 };
const char* target_device_name(TargetDevice d);  // "cpu", "cuda", "auto"

// One step of a build, reported to BuilderConfig::progress.
struct BuildProgress {
  // "import", "warning" (detail: one ignored item, see allow_unknown_attributes), "profiles",
  // "verify", "passes", "tactics", "tuning" (CUDA: one report per layer
  // before it is timed, detail = layer name, then done == total), "timing cache" (log lines in
  // detail), "serialize"
  std::string step;
  int done = 0;      // units of this step finished
  int total = 0;     // units in this step (0: unknown)
  std::string detail;  // a log line of the step ("passes": one per pass, or an IR dump), else empty
};

struct BuilderConfig {
  // Precisions the builder may choose for layers (the graph's own dtypes are always allowed):
  // TensorRT's BuilderFlags, kept as flags for the API, the CLI and the Python package; the
  // builder maps them onto one PrecisionConfig (precision_config(), kiln/precision.h), which is
  // what the library reads. int8/fp8 need Q/DQ nodes: the model's, or a calibration's (below).
  bool fp16 = false;
  bool bf16 = false;
  bool tf32 = true;   // TF32 tensor-core math for fp32 GEMM/conv on CUDA (TensorRT's default)
  bool fp8 = false;
  bool int8 = false;
  // With int8 or fp8: post-training calibration (kiln/quantize.h). When `data` or `cache` is set,
  // Builder::build quantizes the model first (INT8 with int8, FP8 E4M3 with fp8; `format` is set
  // from the flags) and builds the Q/DQ model it writes. Models that carry their own Q/DQ nodes
  // need none of it.
  QuantizeConfig calibration;
  // Per-layer precision constraints (TensorRT's ILayer::setPrecision with
  // BuilderFlag::kOBEY_PRECISION_CONSTRAINTS; trtexec --layerPrecisions), applied after the
  // optimizer's fusions, read left to right, a later match overriding an earlier one. See
  // LayerPrecision. Each pattern must match at least one layer.
  std::vector<LayerPrecision> layer_precisions;
  size_t workspace_limit = 0;  // bytes of scratch one layer may use; 0 = no limit
  // CUDA: auxiliary streams on which independent branches (Inception branches, a ResNet
  // downsample beside its main path) run concurrently with the caller's stream; 0 = none,
  // -1 = the builder decides (one per concurrent branch, at most 3), at most 16. Costs one
  // tactic workspace per aux stream and a larger activation arena (branches cannot share bytes).
  // docs/decisions/0011-aux-streams.md; TensorRT's IBuilderConfig::setMaxAuxStreams.
  int max_aux_streams = -1;
  // CUDA: JSON timing cache (docs/decisions/0007-timing-cache.md) read before tuning and
  // rewritten after it; "" = none (an in-memory cache still times equal layers once).
  std::string timing_cache_path;
  // CUDA: which tactic sources the builder may use (TensorRT's setTacticSources, trtexec
  // --tacticSources): "" = all of kiln, cudnn, cudnn_graph, cublaslt; else "+src"/"-src" edits
  // of all ("-cudnn_graph") or the names to use ("kiln,cublaslt"). A layer with no tactic from
  // the enabled sources fails the build naming it. Part of the timing-cache key.
  std::string tactic_sources;
  // The dtypes of the plan's float outputs (trtexec --outputIOFormats=fp16:chw): "" = as the
  // model declares them; one of fp32, fp16, bf16 = every float output; a comma list = one per
  // graph output in order (a non-float output's entry must be "" or its own dtype, e.g.
  // "fp16,,fp32"). An output given another dtype ends in a Cast to it (float16 / bfloat16:
  // round to nearest even), so its binding has that dtype on every target and a context checks
  // buffers against it (docs/decisions/0083). Errors name the output or the entry.
  std::string output_types;
  // CUDA: the most candidate tactics timed per layer and tactic source; 0 = the defaults
  // (4 cuDNN graph engine configurations — each may compile a kernel —, every candidate of the
  // other sources). Part of the timing-cache key.
  int tuning_budget = 0;
  // CUDA: timed runs per candidate tactic, after one warm-up run (TensorRT's --avgTiming).
  int timing_iterations = 10;
  // CUDA: time each candidate with the GPU's L2 cache flushed first (true: as layers meet their
  // weights in a whole network), or back to back (false). Part of the timing-cache key.
  bool timing_cold_cache = true;
  // CUDA, dynamic profiles: tactics are tuned at profile 0's opt shapes and at up to this many
  // more shapes of it (its min and max, and every power of two in between along the dynamic
  // dims, evenly thinned to this count); a context at other shapes runs the nearest set's
  // tactics (docs/decisions/0041). 0 = opt only.
  int tuning_shapes = 8;
  // Messages of the build (timing-cache and tactic summaries, load traces); none when empty.
  Logger logger;
  // Every input whose shape is not fully static needs a range in each profile. Static inputs
  // need none. At least one profile is required when any input is dynamic.
  std::vector<OptimizationProfile> profiles;
  // Q/DQ convolutions fuse into 8-bit QuantConv layers (docs/decisions/0078): FP8 ones always,
  // INT8 / UINT8 ones only when this is set (on both backends; the others record the rule "INT8
  // QuantConv not enabled"). Not by default for INT8: on the CPU the fused layer read one of the
  // six PP-OCRv4 demo lines differently from ONNX Runtime's Q/DQ run (the unfused form reads all
  // six as it does), and on an H200 (2026-11-26, ResNet-50 batch 256, FP16 plan 6.3 ms) INT8
  // QuantConv took 72.2 ms against 23.5 ms for the unfused Q/DQ form (cuDNN 9.19's legacy INT8
  // 3x3 convolutions are slow on Hopper), while FP8 QuantConv took 14.2 ms against 29.3 ms.
  // QuantConv has no float fallback tactic for the builder to pick per layer yet.
  // `kiln build --quant-conv`. It also makes FP8 convolutions pass 8-bit activations to each
  // other (INT8 QuantConvs always do); by default an FP8 QuantConv writes a float output, so cuDNN's
  // FP8 graph convolution stays a candidate tactic (docs/decisions/0081 addendum).
  bool quant_conv = false;
  TargetDevice target = TargetDevice::kAuto;  // kAuto: CUDA when built with it and a GPU is present
  int opt_level = 2;  // 0..3: how much the pass pipeline may rewrite (0: none, 1: cleanups, 2: + fusions)
  std::set<std::string> disabled_passes;  // pass names (src/passes/pipelines.cc) to skip
  std::string dump_after_pass;            // log the IR after this pass ("" = none)
  bool verify_passes = false;             // verify the IR after every pass; a failure names the pass
  // Import: an attribute an op does not define, an opset or IR version newer than Kiln knows is
  // an error unless this is set; then each is reported as a BuildProgress step "warning".
  bool allow_unknown_attributes = false;
  std::function<void(const BuildProgress&)> progress;
};

// BuilderConfig's precision flags and layer constraints as the one PrecisionConfig.
PrecisionConfig precision_config(const BuilderConfig& c);

class Builder {
 public:
  // Imports `onnx_path` and builds a serialized plan (see kiln/plan.h for the format). From an
  // already imported graph: build_from_graph (src/builder/build_from_graph.h, internal).
  static StatusOr<std::vector<uint8_t>> build(const std::string& onnx_path, const BuilderConfig& config);
};

}  // namespace kiln
