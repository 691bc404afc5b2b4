// Option groups of the `kiln` CLI (see options.h).
#include "tools/kiln/options.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "backends/kernel.h"
#include "passes/passes.h"

namespace kiln::cli {

StatusOr<Shape> parse_dims(const std::string& dims) {
  Shape s;
  if (dims.empty()) return s;
  size_t start = 0;
  for (;;) {
    const size_t x = dims.find('x', start);
    const std::string tok = dims.substr(start, x == std::string::npos ? std::string::npos : x - start);
    if (tok.empty() || tok.find_first_not_of("0123456789") != std::string::npos)
      return invalid_argument("bad dims '" + dims + "': expected non-negative integers separated by 'x' (1x3x224x224)");
    errno = 0;
    const long long v = std::strtoll(tok.c_str(), nullptr, 10);
    if (errno == ERANGE) return invalid_argument("bad dims '" + dims + "': '" + tok + "' is too large");
    s.push_back(v);
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return s;
}

StatusOr<std::map<std::string, Shape>> parse_shapes(const std::string& spec) {
  std::map<std::string, Shape> out;
  if (spec.empty()) return out;
  size_t start = 0;
  for (;;) {
    const size_t comma = spec.find(',', start);
    const std::string item = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return invalid_argument("bad shape '" + item + "': expected name:dims, e.g. input:1x3x224x224");
    const std::string name = item.substr(0, colon);
    auto dims = parse_dims(item.substr(colon + 1));
    if (!dims.ok()) return dims.status().with_context("input '" + name + "'");
    if (out.count(name)) return invalid_argument("input '" + name + "' is given twice in '" + spec + "'");
    out[name] = std::move(dims).value();
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

StatusOr<std::pair<std::string, std::string>> parse_input_spec(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    return invalid_argument("bad input '" + spec + "': expected name=FILE (a .npy or ONNX TensorProto .pb file)");
  return std::make_pair(spec.substr(0, eq), spec.substr(eq + 1));
}

StatusOr<std::map<std::string, std::string>> parse_input_specs(const std::vector<std::string>& specs) {
  std::map<std::string, std::string> out;
  for (const auto& s : specs) {
    KILN_ASSIGN_OR_RETURN(auto kv, parse_input_spec(s));
    if (out.count(kv.first)) return invalid_argument("input '" + kv.first + "' is given twice");
    out[kv.first] = kv.second;
  }
  return out;
}

void CalibrationOptions::add_to(CLI::App* app) {
  auto* g = app->add_option_group("Calibration", "Post-training quantization (docs/decisions/0050)");
  g->add_option("--calib", data,
                "Calibration samples: a .npz (numpy.savez) or a directory of <input>.npy, one array per input with "
                "the samples stacked along dim 0");
  g->add_option("--calib-cache", cache,
                "Calibration cache: read when it exists (and is this model's), written after calibrating");
  g->add_option("--calibrator", calibrator,
                "minmax (default), entropy, percentile[:P], mse, delayed[:N[:max|most_recent[:M]]]");
  g->add_option("--calib-batch", batch, "Samples per calibration batch for a dynamic batch dim (default 8)");
  g->add_option("--calib-max-batches", max_batches, "Calibrate on at most N batches (0 = all)");
  g->add_option("--quant-exclude", exclude, "Leave this node float (exact name, or a prefix ending in '*'; repeatable)");
  g->add_option("--fp8-e5m2", e5m2,
                "FP8: quantize this node's input activation to E5M2 (range 57344) instead of E4M3 (exact name, or a "
                "prefix ending in '*'; repeatable)");
  g->add_option("--weight-scales", weight_scales,
                "Gemm / MatMul weight scales: per-channel (default) or per-tensor (one scale shared by the layers of "
                "one input; FP8's fused cuBLASLt GEMM on Hopper, docs/decisions/0085)");
  g->add_option_function<double>(
      "--max-error",
      [this](const double& v) {
        max_error = v;
        max_error_given = true;
      },
                "Accuracy budget: keep the fewest, most sensitive layers float until 1 - cosine of the outputs vs "
                "FP32 on the held-out part of --calib is <= E (0 < E < 1; docs/decisions/0062)");
  g->add_option("--calib-split", calib_split,
                "With --max-error: the share of --calib's samples (from the first) that calibrates; the rest is "
                "held out to measure the error (default 0.8)");
}

StatusOr<QuantizeConfig> CalibrationOptions::to_config() const {
  if (batch < 0) return invalid_argument("--calib-batch must be >= 1 (0 = default)");
  if (max_batches < 0) return invalid_argument("--calib-max-batches must be >= 0");
  if (max_error_given && data.empty())
    return invalid_argument("--max-error needs --calib DATA: the error is measured on its held-out part (a "
                            "--calib-cache holds no samples)");
  if (max_error_given && !(max_error > 0 && max_error < 1))
    return invalid_argument("--max-error " + std::to_string(max_error) +
                            ": the budget is 1 - cosine similarity, give a value in (0, 1), e.g. 0.01");
  if (!(calib_split > 0 && calib_split < 1))
    return invalid_argument("--calib-split " + std::to_string(calib_split) +
                            ": give the calibrating share of the samples in (0, 1), e.g. 0.8");
  if (weight_scales != "per-channel" && weight_scales != "per-tensor")
    return invalid_argument("--weight-scales '" + weight_scales + "': expected per-channel or per-tensor");
  QuantizeConfig q;
  q.per_tensor_weights = weight_scales == "per-tensor";
  q.data = data;
  q.cache = cache;
  q.calibrator = calibrator;
  q.batch_size = batch;
  q.max_batches = max_batches;
  q.exclude = exclude;
  q.e5m2 = e5m2;
  q.max_error = max_error;
  q.calib_split = calib_split;
  return q;
}

void QuantizeOptions::add_to(CLI::App* app) {
  app->add_option("model", model, "ONNX model")->required();
  app->add_option("-o,--output", output, "Q/DQ ONNX model to write")->required();
  app->add_option("--format", format, "int8 or fp8 (E4M3FN; needs opset 19)")->check(CLI::IsMember({"int8", "fp8"}));
  calib.add_to(app);
  app->add_flag("-v,--verbose", verbose, "Print the calibration's messages");
}

void BuildOptions::add_to(CLI::App* app) {
  app->add_option("model", model, "ONNX model")->required();
  app->add_option("-o,--output", output, "Plan file to write")->required();
  auto* shapes_group = app->add_option_group("Shapes", "Optimization profile (dynamic inputs)");
  shapes_group->add_option("--shapes", shapes, "name:1x3x224x224[,name2:...]: min = opt = max");
  shapes_group->add_option("--min-shapes", min_shapes, "Smallest shapes of dynamic inputs");
  shapes_group->add_option("--opt-shapes", opt_shapes, "Shapes to tune for");
  shapes_group->add_option("--max-shapes", max_shapes, "Largest shapes (memory is sized for these)");
  auto* prec = app->add_option_group("Precision", "Precisions the builder may use");
  prec->add_flag("--fp16", fp16, "Allow fp16 layers");
  prec->add_flag("--bf16", bf16, "Allow bf16 layers");
  prec->add_flag("--no-tf32", no_tf32, "Disallow TF32 math for fp32 layers");
  prec->add_flag("--int8", int8, "INT8 layers: calibrate with --calib/--calib-cache, or a model with Q/DQ nodes");
  prec->add_flag("--fp8", fp8, "FP8 E4M3 layers: calibrate with --calib/--calib-cache, or a model with Q/DQ nodes");
  calib.add_to(app);
  prec->add_option("--layer-precisions", layer_precisions,
                   "Per-layer precision constraints PATTERN:PREC[,...] (PREC fp32|fp16|bf16, or fp8e5m2 with --fp8: "
                   "that layer's input activation in E5M2; '*' matches any characters; later entries override "
                   "earlier ones), e.g. '/layer4/*:fp32,/fc/*:fp32'");
  prec->add_option("--output-types", output_types,
                   "Dtypes of the float outputs (trtexec --outputIOFormats): fp32|fp16|bf16 for all, or one per "
                   "output in order ('fp16,,fp32': empty = as declared); default: as the model declares");
  app->add_option("--workspace", workspace_mib,
                  "Scratch memory limit per layer, MiB (0 = no limit); tactics needing more are skipped");
  app->add_option("--timing-cache", timing_cache,
                  "JSON file of measured CUDA tactic times: read before tuning (hits skip timing), rewritten after");
  app->add_option("--max-aux-streams", max_aux_streams,
                  "CUDA: aux streams for independent branches (0 = none; default: the builder decides, at most 3; "
                  "at most 16)");
  auto* tune = app->add_option_group("Tactics", "CUDA tactic selection (docs/decisions/0014-tactic-contract.md)");
  tune->add_option("--tactic-sources", tactic_sources,
                   "Tactic sources to use: +/- edits of all ('-cudnn_graph,+cublaslt') or the names to use "
                   "('kiln,cudnn'); sources: kiln, cudnn, cudnn_graph, cublaslt");
  tune->add_option("--tuning-budget", tuning_budget,
                   "Most candidate tactics timed per layer and source (0 = defaults: 4 cuDNN graph engine "
                   "configurations, all others)");
  tune->add_option("--avg-timing", timing_iterations, "Timed runs per candidate tactic, after one warm-up (default 10)");
  tune->add_flag("--timing-warm-cache", timing_warm_cache,
                 "Time candidate tactics back to back with a warm L2 cache (default: L2 flushed before each run, "
                 "as layers meet their weights in the whole network)");
  tune->add_option("--tuning-shapes", tuning_shapes,
                   "Dynamic profiles: tune tactics at up to N shapes besides opt (min, max and powers of two "
                   "between; default 8, 0 = opt only); other shapes run the nearest tuned set's tactics");
  app->add_flag("-v,--verbose", verbose, "Print the library's info and verbose messages (tactic summary, load steps)");
  app->add_option("--device", device, "Target: cpu, gpu or auto")->check(CLI::IsMember({"cpu", "gpu", "cuda", "auto"}));
  auto* opt = app->add_option_group("Optimizer", "Graph optimization passes (src/passes/pipelines.cc)");
  opt->add_option("--opt-level", opt_level, "0: none, 1: cleanups, 2: + fusions (default), 3: + aggressive");
  opt->add_option("--disable-pass", disabled_passes, "Skip this pass (repeatable)");
  opt->add_option("--dump-after", dump_after, "Print the IR after this pass");
  opt->add_flag("--verify-passes", verify_passes, "Verify the IR after every pass");
  opt->add_flag("--quant-conv", quant_conv,
                "Fuse Q/DQ convolutions into 8-bit QuantConv layers in INT8 builds too (FP8 builds always do; "
                "see docs/decisions/0078 for why INT8 builds do not by default)");
  app->add_flag("--allow-unknown-attributes", allow_unknown_attributes,
                "Ignore attributes, opsets and IR versions newer than Kiln knows, with a warning for each");
}

namespace {

// --disable-pass / --dump-after name passes of the pipeline; a typo is an error, not a no-op.
Status set_pass_options(const std::vector<std::string>& disabled, const std::string& dump_after, BuilderConfig* c) {
  std::set<std::string> known;
  std::string names;
  for (const auto& p : passes::default_pipeline()) {
    known.insert(p.name);
    names += (names.empty() ? "" : ", ") + std::string(p.name);
  }
  for (const auto& name : disabled) {
    if (!known.count(name)) return invalid_argument("--disable-pass '" + name + "': no such pass (passes: " + names + ")");
    c->disabled_passes.insert(name);
  }
  if (!dump_after.empty() && !known.count(dump_after))
    return invalid_argument("--dump-after '" + dump_after + "': no such pass (passes: " + names + ")");
  c->dump_after_pass = dump_after;
  return Status::Ok();
}

}  // namespace

StatusOr<BuilderConfig> BuildOptions::to_config() const {
  BuilderConfig c;
  c.fp16 = fp16;
  c.bf16 = bf16;
  c.tf32 = !no_tf32;
  c.int8 = int8;
  c.fp8 = fp8;
  KILN_ASSIGN_OR_RETURN(c.calibration, calib.to_config());
  if (!int8 && !fp8 && (!calib.data.empty() || !calib.cache.empty()))
    return invalid_argument("--calib / --calib-cache calibrate INT8 or FP8 layers: add --int8 or --fp8");
  // PATTERN:fp8e5m2 entries choose FP8 E5M2 activations for the calibration (kiln/quantize.h);
  // the others are layer precision constraints.
  std::string float_rules;
  std::vector<std::string> e5m2_rules;
  for (size_t b = 0; b <= layer_precisions.size();) {
    size_t e = layer_precisions.find(',', b);
    if (e == std::string::npos) e = layer_precisions.size();
    const std::string item = layer_precisions.substr(b, e - b);
    const std::string tag = ":fp8e5m2";
    if (item.size() > tag.size() && item.compare(item.size() - tag.size(), tag.size(), tag) == 0)
      e5m2_rules.push_back(item.substr(0, item.size() - tag.size()));
    else if (!item.empty())
      float_rules += (float_rules.empty() ? "" : ",") + item;
    b = e + 1;
  }
  KILN_ASSIGN_OR_RETURN(c.layer_precisions, passes::parse_layer_precisions(float_rules));
  c.calibration.e5m2.insert(c.calibration.e5m2.end(), e5m2_rules.begin(), e5m2_rules.end());
  if (!c.calibration.e5m2.empty() && !fp8)
    return invalid_argument("fp8e5m2 layers (--layer-precisions PATTERN:fp8e5m2, --fp8-e5m2) need --fp8");
  if (workspace_mib < 0) return invalid_argument("--workspace must be >= 0 MiB");
  c.workspace_limit = static_cast<size_t>(workspace_mib * 1024 * 1024);
  c.timing_cache_path = timing_cache;
  if (max_aux_streams < -1 || max_aux_streams > 16)
    return invalid_argument("--max-aux-streams " + std::to_string(max_aux_streams) + ": expected 0..16");
  c.max_aux_streams = max_aux_streams;
  if (!tactic_sources.empty()) {
    auto parsed = TacticSources::parse(tactic_sources);
    if (!parsed.ok()) return parsed.status().with_context("--tactic-sources");
  }
  c.tactic_sources = tactic_sources;
  c.output_types = output_types;  // checked against the graph's outputs by the builder
  if (tuning_budget < 0) return invalid_argument("--tuning-budget " + std::to_string(tuning_budget) + ": expected >= 0");
  c.tuning_budget = tuning_budget;
  if (timing_iterations < 1)
    return invalid_argument("--avg-timing " + std::to_string(timing_iterations) + ": expected >= 1");
  c.timing_iterations = timing_iterations;
  if (tuning_shapes < 0 || tuning_shapes > 64)
    return invalid_argument("--tuning-shapes " + std::to_string(tuning_shapes) + ": expected 0..64");
  c.tuning_shapes = tuning_shapes;
  c.timing_cold_cache = !timing_warm_cache;
  c.logger = stderr_logger(verbose);
  if (device == "cpu") c.target = TargetDevice::kCpu;
  else if (device == "gpu" || device == "cuda") c.target = TargetDevice::kCuda;
  else if (device == "auto") c.target = TargetDevice::kAuto;
  else return invalid_argument("--device '" + device + "': expected cpu, gpu or auto");
  if (opt_level < 0 || opt_level > 3) return invalid_argument("--opt-level " + std::to_string(opt_level) + ": expected 0..3");
  c.opt_level = opt_level;
  KILN_RETURN_IF_ERROR(set_pass_options(disabled_passes, dump_after, &c));
  c.verify_passes = verify_passes;
  c.allow_unknown_attributes = allow_unknown_attributes;
  c.quant_conv = quant_conv;

  KILN_ASSIGN_OR_RETURN(auto fixed, parse_shapes(shapes));
  std::map<std::string, Shape> ranges[3];
  const char* flags[3] = {"--min-shapes", "--opt-shapes", "--max-shapes"};
  const std::string* specs[3] = {&min_shapes, &opt_shapes, &max_shapes};
  for (int i = 0; i < 3; ++i) {
    auto r = parse_shapes(*specs[i]);
    if (!r.ok()) return r.status().with_context(flags[i]);
    ranges[i] = std::move(r).value();
  }
  OptimizationProfile profile;
  for (const auto& [name, s] : fixed) {
    for (int i = 0; i < 3; ++i)
      if (ranges[i].count(name))
        return invalid_argument("input '" + name + "' is in both --shapes and " + flags[i] + "; give one or the other");
    KILN_RETURN_IF_ERROR(profile.set_dimensions(name, s, s, s));
  }
  std::map<std::string, bool> names;
  for (auto& r : ranges)
    for (const auto& [name, s] : r) names[name] = true;
  for (const auto& [name, unused] : names) {
    for (int i = 0; i < 3; ++i)
      if (!ranges[i].count(name))
        return invalid_argument("input '" + name + "' needs --min-shapes, --opt-shapes and --max-shapes; " + flags[i] +
                                " is missing");
    KILN_RETURN_IF_ERROR(profile.set_dimensions(name, ranges[0][name], ranges[1][name], ranges[2][name]));
  }
  if (!profile.empty()) c.profiles.push_back(std::move(profile));
  return c;
}

void InferenceOptions::add_to(CLI::App* app, bool with_shapes) {
  // One value per flag (repeat the flag for several inputs), so a positional may follow.
  app->add_option("--input", inputs, "name=FILE (.npy or ONNX TensorProto .pb); other inputs are random (floats in [-1, 1); integer "
                  "token ids over their embedding table's rows, *mask* integers 0/1, other integers 0..3); repeatable")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  if (with_shapes) app->add_option("--shapes", shapes, "name:dims for inputs with dynamic shapes (default: opt)");
  app->add_option("--seed", seed, "Seed of the generated inputs");
}

StatusOr<InferenceOptions::Parsed> InferenceOptions::parse() const {
  Parsed p;
  KILN_ASSIGN_OR_RETURN(p.files, parse_input_specs(inputs));
  auto s = parse_shapes(shapes);
  if (!s.ok()) return s.status().with_context("--shapes");
  p.shapes = std::move(s).value();
  p.seed = seed;
  return p;
}

void RunOptions::add_to(CLI::App* app) {
  app->add_option("plan", plan, "Plan file")->required();
  inference.add_to(app, true);
  app->add_option("--output-dir", output_dir, "Write each output to DIR/<name>.npy");
  app->add_flag("--cuda-graph", cuda_graph, "CUDA plans: capture the layers into a CUDA graph, then replay it");
  app->add_option("--dump-profile", dump_profile, "Per-layer times (median of several runs) as JSON to FILE, and a table");
}

void BenchOptions::add_to(CLI::App* app) {
  app->add_option("plan", plan, "Plan file")->required();
  app->add_option("--shapes", shapes, "name:dims for dynamic inputs (default: the profile's opt)");
  app->add_option("--warmup", warmup, "Untimed runs first");
  app->add_option("--iterations", iterations, "Timed runs (at least)");
  app->add_option("--duration", duration_s, "Keep running for at least this many seconds");
  app->add_option("--json", json, "Write the summary as JSON here");
  app->add_flag("--cuda-graph", cuda_graph, "CUDA plans: capture each context's enqueue into a CUDA graph once, replay it");
  app->add_option("--dump-profile", dump_profile, "Per-layer times (median of several runs) as JSON to FILE, and a table");
  app->add_option("--streams", streams, "CUDA plans: N execution contexts on N streams, driven concurrently");
  app->add_flag("-v,--verbose", verbose, "Print the load's verbose messages (lowering steps, time per op kind)");
}

Status BenchOptions::validate() const {
  if (warmup < 0) return invalid_argument("--warmup must be >= 0");
  if (iterations < 1) return invalid_argument("--iterations must be >= 1");
  if (duration_s < 0) return invalid_argument("--duration must be >= 0");
  if (streams < 1 || streams > 64) return invalid_argument("--streams " + std::to_string(streams) + ": expected 1..64");
  return Status::Ok();
}

Status check_cuda_only_flags(bool cuda, bool cuda_graph, int streams) {
  if (cuda) return Status::Ok();
  if (cuda_graph) return invalid_argument("--cuda-graph needs a CUDA plan; this plan targets the CPU");
  if (streams != 1)
    return invalid_argument("--streams " + std::to_string(streams) +
                            " needs a CUDA plan; this plan targets the CPU (CPU plans run one context)");
  return Status::Ok();
}

void InspectOptions::add_to(CLI::App* app) {
  app->add_option("plan", plan, "Plan file")->required();
  app->add_flag("--json", json, "Print JSON (an object with a `layers` array)");
  app->add_option("--graph", graph, "Draw the optimized layer graph to FILE (.svg, .png, .pdf or .dot)");
  app->add_flag("-v,--verbose", verbose, "Print the load's verbose messages (lowering steps, time per op kind)");
}

Logger stderr_logger(bool verbose) {
  return [verbose](LogSeverity s, const std::string& msg) {
    if (!verbose && s > LogSeverity::kWarning) return;
    std::fprintf(stderr, "kiln: %s: %s\n", log_severity_name(s), msg.c_str());
  };
}

void CompareOptions::add_to(CLI::App* app) {
  app->add_option("plan", plan, "Plan file")->required();
  app->add_option("model", model, "The ONNX model the plan was built from")->required();
  inference.add_to(app, true);
  app->add_option("--top-k", top_k, "k of the top-k agreement (last axis)");
  app->add_option("--atol", atol, "Absolute tolerance");
  app->add_option("--rtol", rtol, "Relative tolerance");
  app->add_option("--json", json, "Write the per-output metrics as JSON here");
  app->add_flag("--per-layer", per_layer,
                "Compare every layer's output with the FP32 reference of the same ONNX tensor, in execution order, "
                "and name the first layer outside --tolerance (CPU plans)");
  app->add_option("--tolerance", tolerance,
                  "--per-layer bound: cos=C (cosine >= C; default cos=0.99) or rel=R (max|d| / max|ref| <= R)");
}

StatusOr<CompareOptions::LayerTolerance> CompareOptions::layer_tolerance() const {
  const size_t eq = tolerance.find('=');
  const std::string key = tolerance.substr(0, eq);
  LayerTolerance t;
  char* end = nullptr;
  const std::string val = eq == std::string::npos ? "" : tolerance.substr(eq + 1);
  const double v = std::strtod(val.c_str(), &end);
  if (eq == std::string::npos || (key != "cos" && key != "rel") || val.empty() || *end != '\0' || !std::isfinite(v))
    return invalid_argument("--tolerance '" + tolerance + "': expected cos=C (0 < C <= 1) or rel=R (R >= 0)");
  t.cosine = key == "cos";
  t.bound = v;
  if (t.cosine && !(v > 0 && v <= 1)) return invalid_argument("--tolerance '" + tolerance + "': C must be in (0, 1]");
  if (!t.cosine && !(v >= 0)) return invalid_argument("--tolerance '" + tolerance + "': R must be >= 0");
  return t;
}

Status CompareOptions::validate() const {
  if (top_k < 1) return invalid_argument("--top-k must be >= 1");
  if (atol < 0 || rtol < 0) return invalid_argument("--atol and --rtol must be >= 0");
  if (per_layer) KILN_RETURN_IF_ERROR(layer_tolerance().status());
  return Status::Ok();
}

void ConformanceOptions::add_to(CLI::App* app) {
  app->add_option("dir", dir, "Case, suite or data directory")->required();
  app->add_option("--json", json, "Write a per-case JSON report here");
  app->add_option("--filter", filter, "Only cases whose name contains this");
  app->add_option("--device", device,
                  "cpu (the reference) or gpu (CUDA plans, FP32 without TF32; cases the GPU cannot run are "
                  "skipped naming why)")
      ->check(CLI::IsMember({"cpu", "gpu", "cuda"}));
  app->add_option("--jobs", jobs, "Cases run at once, each in its own process (default 1)")->check(CLI::Range(1, 64));
  app->add_flag("-v,--verbose", verbose, "Print every case");
  app->add_flag("--check-only", check_only,
                "With --device gpu: only lower each case for the GPU (no device needed, nothing runs) and count "
                "the cases that would run: a prediction of coverage, not of results");
}

std::string sanitize_file_name(const std::string& name) {
  std::string s = name;
  for (char& c : s) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                    c == '-';
    if (!ok) c = '_';
  }
  if (s.empty() || s == "." || s == "..") s = "_" + s;
  return s;
}

}  // namespace kiln::cli
