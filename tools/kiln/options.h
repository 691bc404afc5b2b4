// Command-line option groups of `kiln` (trtexec-style: build, inference, reporting). Each
// group registers its flags on a CLI11 subcommand (add_to) and turns the raw strings into
// checked values (parse / to_config), so parsing is unit-testable without running anything.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "kiln/builder.h"
#include "kiln/status.h"
#include "tools/kiln/llm_build_options.h"

namespace kiln::cli {

// "1x3x224x224" -> {1,3,224,224}; "" -> {} (a scalar).
StatusOr<Shape> parse_dims(const std::string& dims);
// "x:1x3x224x224,mask:1x128" -> {x: [1,3,224,224], mask: [1,128]}. The name ends at the last
// ':' so names may contain ':'. Duplicate names are an error.
StatusOr<std::map<std::string, Shape>> parse_shapes(const std::string& spec);
// "name=path" -> {name, path}.
StatusOr<std::pair<std::string, std::string>> parse_input_spec(const std::string& spec);
// Every name=FILE of a list; duplicate names are an error.
StatusOr<std::map<std::string, std::string>> parse_input_specs(const std::vector<std::string>& specs);

// `kiln build` options.
// Post-training calibration (kiln/quantize.h): `kiln build --int8|--fp8 --calib ...` and
// `kiln quantize`.
struct CalibrationOptions {
  std::string data;        // --calib DATA (.npz or a directory of <input>.npy)
  std::string cache;       // --calib-cache FILE
  std::string calibrator;  // --calibrator SPEC
  int batch = 0;           // --calib-batch N
  int max_batches = 0;     // --calib-max-batches N
  std::vector<std::string> exclude;  // --quant-exclude NODE[*]
  std::vector<std::string> e5m2;     // --fp8-e5m2 NODE[*] (also --layer-precisions NODE[*]:fp8e5m2 in kiln build)
  std::string weight_scales = "per-channel";  // --weight-scales per-channel|per-tensor (Gemm / MatMul weights)
  double max_error = 0;              // --max-error E (1 - cosine vs FP32 on held-out data)
  bool max_error_given = false;      // --max-error was passed (then E must be in (0, 1))
  double calib_split = 0.8;          // --calib-split S (calibrating share of --calib's samples)
  void add_to(CLI::App* app);
  StatusOr<QuantizeConfig> to_config() const;
};

struct BuildOptions {
  std::string model;   // MODEL.onnx
  std::string output;  // -o PLAN
  std::string shapes, min_shapes, opt_shapes, max_shapes;
  bool fp16 = false, bf16 = false, no_tf32 = false, int8 = false, fp8 = false;
  std::string layer_precisions;  // --layer-precisions PATTERN:PREC[,...] (BuilderConfig::layer_precisions)
  double workspace_mib = 0;  // MiB; 0 = no limit
  std::string timing_cache;  // --timing-cache FILE (CUDA tactic timings, JSON)
  int max_aux_streams = -1;  // --max-aux-streams N (CUDA); -1 = the builder decides
  std::string tactic_sources;  // --tactic-sources SPEC (CUDA; BuilderConfig::tactic_sources)
  std::string output_types;    // --output-types SPEC (BuilderConfig::output_types)
  int tuning_budget = 0;       // --tuning-budget N (CUDA): candidates timed per layer and source; 0 = defaults
  int timing_iterations = 10;  // --avg-timing N (CUDA): timed runs per candidate
  int tuning_shapes = 8;       // --tuning-shapes N (CUDA, dynamic profiles): extra shapes tuned at
  bool timing_warm_cache = false;  // --timing-warm-cache (CUDA): time candidates back to back, L2 warm
  bool verbose = false;        // --verbose: the library's info and verbose messages on stderr
  std::string device = "auto";
  int opt_level = 2;                          // --opt-level 0..3
  std::vector<std::string> disabled_passes;   // --disable-pass NAME (repeatable)
  std::string dump_after;                     // --dump-after PASS
  bool verify_passes = false;                 // --verify-passes
  bool allow_unknown_attributes = false;      // --allow-unknown-attributes
  bool quant_conv = false;                // --quant-conv
  CalibrationOptions calib;

  void add_to(CLI::App* app);
  // --shapes gives min = opt = max; otherwise an input needs all of --min/--opt/--max-shapes.
  StatusOr<BuilderConfig> to_config() const;
};

// `kiln quantize MODEL.onnx --calib DATA -o MODEL.qdq.onnx [--format int8|fp8]`.
struct QuantizeOptions {
  std::string model, output;
  std::string format = "int8";
  CalibrationOptions calib;
  bool verbose = false;
  void add_to(CLI::App* app);
};

// Inputs of `kiln run` / `kiln compare`: files, shapes for generated inputs, seed.
struct InferenceOptions {
  std::vector<std::string> inputs;  // name=FILE (.npy or ONNX TensorProto .pb)
  std::string shapes;               // name:dims for inputs with dynamic shapes
  uint64_t seed = 1;

  void add_to(CLI::App* app, bool with_shapes);
  struct Parsed {
    std::map<std::string, std::string> files;
    std::map<std::string, Shape> shapes;
    uint64_t seed = 1;
  };
  StatusOr<Parsed> parse() const;
};

struct RunOptions {
  std::string plan;
  InferenceOptions inference;
  std::string output_dir;
  bool cuda_graph = false;   // --cuda-graph: capture the layers once, then replay (CUDA plans)
  std::string dump_profile;  // --dump-profile FILE: per-layer JSON (and a table on stdout)
  void add_to(CLI::App* app);
};

struct BenchOptions {
  std::string plan;
  std::string shapes;
  int warmup = 10;
  int iterations = 100;   // timed inferences (at least), over all streams together
  double duration_s = 0;  // keep running until this many seconds have passed too
  std::string json;
  bool cuda_graph = false;   // --cuda-graph: each context's enqueue captured once, then replayed
  std::string dump_profile;  // --dump-profile FILE
  int streams = 1;           // --streams N: N contexts on N CUDA streams, driven concurrently
  bool verbose = false;      // --verbose: the load's verbose messages on stderr
  void add_to(CLI::App* app);
  Status validate() const;
};

// A Logger that prints the library's messages on stderr ("kiln: info: ..."): errors and
// warnings always, info and verbose ones when `verbose`.
Logger stderr_logger(bool verbose);

// Flags only CUDA plans honour; `cuda` is whether the loaded plan targets CUDA. Names the flag.
Status check_cuda_only_flags(bool cuda, bool cuda_graph, int streams);

struct InspectOptions {
  std::string plan;
  bool json = false;
  bool verbose = false;  // --verbose: the load's verbose messages (lowering steps, per op kind) on stderr
  std::string graph;  // --graph FILE: draw the layer graph (.svg/.png/.pdf via Graphviz, or .dot)
  void add_to(CLI::App* app);
};

struct CompareOptions {
  std::string plan, model;
  InferenceOptions inference;
  int top_k = 5;
  double atol = 1e-5;
  double rtol = 1e-3;
  std::string json;
  // --per-layer: every layer's output against the FP32 reference (docs/decisions/0062).
  bool per_layer = false;
  // --tolerance cos=C (cosine >= C, default cos=0.99) or rel=R (max|a - r| / max|r| <= R).
  std::string tolerance = "cos=0.99";
  void add_to(CLI::App* app);
  Status validate() const;
  // The parsed --tolerance: which metric and its bound.
  struct LayerTolerance {
    bool cosine = true;  // true: cosine >= bound; false: max|a - r| / max|r| <= bound
    double bound = 0.99;
  };
  StatusOr<LayerTolerance> layer_tolerance() const;
};

struct ConformanceOptions {
  std::string dir;
  std::string json;
  std::string filter;
  std::string device = "cpu";  // cpu or gpu
  int jobs = 1;
  bool verbose = false;
  bool check_only = false;  // --device gpu: lower each case without a device (conformance::Options)
  void add_to(CLI::App* app);
};

// `kiln build-llm CKPT_DIR -o ENGINE_DIR ...` (tools/kiln/llm_build.h's LlmBuildOptions as flags).
struct BuildLlmOptions {
  std::string checkpoint, output;
  LlmBuildOptions build;  // the flags bind to these fields (progress is set by cmd_build_llm)
  bool verbose = false;
  void add_to(CLI::App* app);
};

// Output file name for tensor `name`: characters outside [A-Za-z0-9_.-] become '_'.
std::string sanitize_file_name(const std::string& name);

}  // namespace kiln::cli
