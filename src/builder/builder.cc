// Builder: ONNX -> checked, profiled layer graph -> serialized plan. The steps, in order:
//   import -> resolve profiles -> verify kernels -> optimize (src/passes pipeline) -> select
//   tactics (the seam for timed CUDA tactics; today "cpu.ref" for every layer) -> serialize.
// Each step reports progress and returns a Status naming what is wrong.
#include <filesystem>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/interpreter.h"
#include "builder/build_from_graph.h"
#include "core/checked_size.h"
#include "core/onnx_dtype.h"
#include "ir/graph.h"
#include "ir/shape_inference.h"
#include "kiln/builder.h"
#include "onnx/importer.h"
#include "passes/passes.h"
#include "runtime/gpu_engine.h"
#include "plan/plan_format.h"

namespace kiln {
namespace {

constexpr const char* kCpuReferenceTactic = "cpu.ref";
constexpr const char* kCpuConcatInPlaceTactic = "cpu.concat_in_place";

void report(const BuilderConfig& c, const char* step, int done, int total) {
  if (c.progress) c.progress(BuildProgress{step, done, total});
}

bool is_static(const ir::Value& v) {
  if (!v.shape) return false;
  for (const ir::Dim& d : *v.shape)
    if (!d.is_known()) return false;
  return true;
}

// Gives every profile a range for every input: static inputs get their fixed shape, dynamic
// inputs must be named by the user. All problems are reported at once.
StatusOr<std::vector<OptimizationProfile>> resolve_profiles(const ir::Graph& g, const BuilderConfig& c) {
  std::vector<OptimizationProfile> profiles = c.profiles;
  if (profiles.empty()) profiles.emplace_back();
  std::vector<std::string> problems;
  for (size_t p = 0; p < profiles.size(); ++p) {
    const std::string where = profiles.size() > 1 ? "profile " + std::to_string(p) + ": " : "";
    for (const auto& [name, range] : profiles[p].ranges()) {
      bool found = false;
      for (ir::ValueId v : g.inputs) found |= g.value(v).name == name;
      if (!found) {
        std::string known;
        for (ir::ValueId v : g.inputs) known += (known.empty() ? "'" : ", '") + g.value(v).name + "'";
        problems.push_back(where + "'" + name + "' is not an input of the model (inputs: " +
                           (known.empty() ? "none" : known) + ")");
      }
    }
    for (ir::ValueId vid : g.inputs) {
      const ir::Value& v = g.value(vid);
      const ShapeRange* r = profiles[p].find(v.name);
      if (!r) {
        if (!is_static(v)) {
          problems.push_back(where + "input '" + v.name + "' has the dynamic shape " +
                             (v.shape ? ir::sym_shape_str(*v.shape) : std::string("?")) +
                             " and no range in the optimization profile (kiln build --shapes " + v.name + ":DIMS)");
          continue;
        }
        Shape fixed;
        for (const ir::Dim& d : *v.shape) fixed.push_back(d.value);
        KILN_RETURN_IF_ERROR(profiles[p].set_dimensions(v.name, fixed, fixed, fixed));
        continue;
      }
      if (!v.shape) continue;
      if (v.shape->size() != r->min.size()) {
        problems.push_back(where + "input '" + v.name + "' has rank " + std::to_string(v.shape->size()) + " " +
                           ir::sym_shape_str(*v.shape) + ", but its range has rank " + std::to_string(r->min.size()));
        continue;
      }
      for (size_t d = 0; d < r->min.size(); ++d) {
        const ir::Dim& dim = (*v.shape)[d];
        if (dim.is_known() && (r->min[d] != dim.value || r->max[d] != dim.value))
          problems.push_back(where + "input '" + v.name + "' dim " + std::to_string(d) + " is fixed at " +
                             std::to_string(dim.value) + " in the model, but the range gives " +
                             std::to_string(r->min[d]) + ".." + std::to_string(r->max[d]));
      }
    }
  }
  if (problems.empty()) return profiles;
  std::string msg = "cannot resolve input shapes:";
  for (const auto& s : problems) msg += "\n  " + s;
  return invalid_argument(msg);
}

// Every node (subgraphs included) must have a kernel on the target; lists all that do not.
void collect_missing(const ir::Graph& g, const cpu::KernelRegistry& reg, std::vector<std::string>* missing) {
  for (const ir::Node& n : g.nodes) {
    if (!reg.find(n.op)) missing->push_back(n.describe() + ", opset " + std::to_string(n.opset));
    for (const auto& [k, a] : n.attrs)
      if (a.kind == ir::Attribute::Kind::kGraph && a.g) collect_missing(*a.g, reg, missing);
  }
}

Status verify_kernels(const ir::Graph& g, const char* target) {
  std::vector<std::string> missing;
  collect_missing(g, cpu::KernelRegistry::get(), &missing);
  if (missing.empty()) return Status::Ok();
  constexpr size_t kShown = 25;
  std::string msg = std::to_string(missing.size()) + " layer" + (missing.size() > 1 ? "s have" : " has") + " no " +
                    target + " kernel:";
  for (size_t i = 0; i < missing.size() && i < kShown; ++i) msg += "\n  " + missing[i];
  if (missing.size() > kShown) msg += "\n  ... and " + std::to_string(missing.size() - kShown) + " more";
  return unsupported(msg);
}

// Input dims that every optimization profile fixes to one extent (min == max, the same in all
// profiles) become known dims of the graph, so shape inference and fold_constants can turn the
// exporters' Shape -> Gather -> Concat -> Reshape arithmetic into constants. The profiles still
// check every input at run time.
void fix_profile_dims(ir::Graph* g, const std::vector<OptimizationProfile>& profiles) {
  for (ir::ValueId vid : g->inputs) {
    ir::Value& v = g->value(vid);
    if (!v.shape) continue;
    for (size_t d = 0; d < v.shape->size(); ++d) {
      if ((*v.shape)[d].is_known()) continue;
      int64_t fixed = -1;
      bool same = !profiles.empty();
      for (const OptimizationProfile& p : profiles) {
        const ShapeRange* r = p.find(v.name);
        if (!r || r->min.size() != v.shape->size() || r->min[d] != r->max[d] || (fixed >= 0 && r->min[d] != fixed)) {
          same = false;
          break;
        }
        fixed = r->min[d];
      }
      if (same && fixed >= 0) (*v.shape)[d] = ir::Dim::known(fixed);
    }
  }
}

// The pass pipeline (src/passes/pipelines.cc) at the config's opt_level; fused layers keep
// the ONNX nodes they absorbed in Node::origin, which the plan records.
Status optimize(ir::Graph* g, const BuilderConfig& c, const std::vector<OptimizationProfile>& profiles) {
  passes::PassOptions opts;
  opts.opt_level = c.opt_level;
  opts.disabled = c.disabled_passes;
  // INT8 convolutions become QuantConv only when asked for (BuilderConfig::quant_conv; decision
  // 0078 addendum); FP8 ones always do.
  opts.int8_quant_conv = c.quant_conv;
  // FP8 QuantConvs pass 8-bit activations only when asked for too (decision 0081 addendum).
  opts.fp8_conv_activations_8bit = c.quant_conv;
  opts.dump_after = c.dump_after_pass;
  opts.verify_each = c.verify_passes;
  opts.evaluator = &reference_evaluator();  // constant folding on the CPU reference kernels
  const int total = static_cast<int>(passes::default_pipeline().size());
  int done = 0;
  opts.log = [&](const std::string& line) {
    // An IR dump is extra output of the pass just logged, not another unit of work.
    const bool dump = line.rfind("graph after ", 0) == 0 || line.rfind("dump-after ", 0) == 0;
    if (c.progress) c.progress(BuildProgress{"passes", dump ? done : ++done, total, line});
  };
  // Fusion patterns check shapes (a residual Add fuses only without broadcasting); with fixed
  // profile dims, shape arithmetic folds to constants.
  if (c.opt_level > 0) fix_profile_dims(g, profiles);
  KILN_RETURN_IF_ERROR(ir::infer_shapes(*g, nullptr, opts.evaluator));
  KILN_RETURN_IF_ERROR(passes::run_pipeline(*g, opts));
  g->compact();
  KILN_RETURN_IF_ERROR(g->topo_sort());
  // Symbolic shapes and dtypes of every layer's tensors, recorded in the plan for inspection
  // (and, later, for the memory planner at the profile's max shapes).
  return ir::infer_shapes(*g, nullptr, opts.evaluator);
}

// Tactic selection seam: on CUDA the builder will time every supporting factory at the
// profile's opt shapes; on the CPU there is one reference tactic per layer.
// A Concat that passes/concat_in_place.cc marked runs in place (`kiln inspect` shows it).
std::vector<plan::PlanTactic> select_tactics(const ir::Graph& g) {
  std::vector<plan::PlanTactic> tactics;
  for (const ir::Node& n : g.nodes)
    tactics.push_back(plan::PlanTactic{n.op == ir::OpKind::kConcat && n.has_attr("in_place") ? kCpuConcatInPlaceTactic
                                                                                            : kCpuReferenceTactic});
  return tactics;
}

}  // namespace

std::vector<std::vector<Shape>> tuning_shapes(const ir::Graph& g, const OptimizationProfile& prof,
                                              const std::vector<Shape>& opt, int max_sets) {
  std::vector<const ShapeRange*> ranges;
  int64_t top = 0;
  for (ir::ValueId v : g.inputs) {
    const ShapeRange* r = prof.find(g.value(v).name);
    if (!r) return {};
    ranges.push_back(r);
    for (size_t d = 0; d < r->min.size(); ++d)
      if (r->min[d] != r->max[d]) top = std::max(top, r->max[d]);
  }
  if (top == 0 || max_sets <= 0) return {};
  auto at = [&](int64_t p) {  // p < 0: min, p == 0: max
    std::vector<Shape> shapes;
    for (const ShapeRange* r : ranges) {
      Shape s = r->min;
      for (size_t d = 0; d < s.size(); ++d)
        if (r->min[d] != r->max[d]) s[d] = p < 0 ? r->min[d] : p == 0 ? r->max[d] : std::clamp(p, r->min[d], r->max[d]);
      shapes.push_back(std::move(s));
    }
    return shapes;
  };
  std::vector<std::vector<Shape>> all = {at(-1)};
  for (int64_t p = 1; p < top; p *= 2) all.push_back(at(p));
  all.push_back(at(0));
  std::vector<std::vector<Shape>> unique;
  for (auto& s : all)
    if (s != opt && std::find(unique.begin(), unique.end(), s) == unique.end()) unique.push_back(std::move(s));
  if (static_cast<int>(unique.size()) <= max_sets) return unique;
  std::vector<std::vector<Shape>> thinned;
  const int n = static_cast<int>(unique.size());
  for (int i = 0; i < max_sets; ++i) {
    const int k = max_sets == 1 ? n - 1 : static_cast<int>(std::lround(static_cast<double>(i) * (n - 1) / (max_sets - 1)));
    if (thinned.empty() || thinned.back() != unique[static_cast<size_t>(k)]) thinned.push_back(unique[static_cast<size_t>(k)]);
  }
  return thinned;
}


static StatusOr<std::vector<uint8_t>> build_graph(ir::Graph graph, const BuilderConfig& config);

StatusOr<std::vector<uint8_t>> build_from_graph(const ir::Graph& graph, const BuilderConfig& config) {
  // Kernels run at build time (constant folding) report allocation failures as Statuses
  // (backends/cpu/interpreter.cc); anything else allocating a Tensor past the limits ends here.
  try {
    return build_graph(graph, config);
  } catch (const TensorAllocationError& e) {
    return e.status().with_context("build");
  }
}

StatusOr<std::vector<uint8_t>> build_from_graph(ir::Graph&& graph, const BuilderConfig& config) {
  try {
    return build_graph(std::move(graph), config);
  } catch (const TensorAllocationError& e) {
    return e.status().with_context("build");
  }
}

// BuilderConfig::output_types: each float graph output given another dtype ends in a Cast to it.
// The Cast's output takes the graph output's name (the binding the caller knows); the value it
// reads is renamed "<name>/before_output_cast".
static bool subgraphs_read(const ir::Graph& g, const std::string& name) {
  for (const ir::Node& n : g.nodes)
    for (const auto& [key, a] : n.attrs) {
      if (a.kind != ir::Attribute::Kind::kGraph || !a.g) continue;
      for (ir::ValueId v : a.g->outer_refs)
        if (a.g->value(v).name == name) return true;
      if (subgraphs_read(*a.g, name)) return true;
    }
  return false;
}

static Status set_output_types(ir::Graph* g, const std::string& spec) {
  if (spec.empty()) return Status::Ok();
  std::vector<std::string> items;
  {
    size_t start = 0;
    for (size_t i = 0; i <= spec.size(); ++i)
      if (i == spec.size() || spec[i] == ',') {
        std::string item = spec.substr(start, i - start);
        while (!item.empty() && item.front() == ' ') item.erase(item.begin());
        while (!item.empty() && item.back() == ' ') item.pop_back();
        items.push_back(item);
        start = i + 1;
      }
  }
  if (items.size() != 1 && items.size() != g->outputs.size())
    return invalid_argument("builder config: output_types '" + spec + "' has " + std::to_string(items.size()) +
                            " entries for " + std::to_string(g->outputs.size()) +
                            " graph outputs (give one for all, or one per output)");
  auto used = [&](const std::string& name) {
    for (const ir::Value& v : g->values)
      if (v.name == name) return true;
    return false;
  };
  for (size_t i = 0; i < g->outputs.size(); ++i) {
    const std::string& item = items.size() == 1 ? items[0] : items[i];
    const ir::ValueId out = g->outputs[i];
    const std::string name = g->value(out).name;
    const DataType have = g->value(out).dtype;
    if (item.empty()) continue;
    DataType want;
    if (item == "fp32" || item == "float32") want = DataType::kFloat32;
    else if (item == "fp16" || item == "float16") want = DataType::kFloat16;
    else if (item == "bf16" || item == "bfloat16") want = DataType::kBFloat16;
    else
      return invalid_argument("builder config: output_types entry '" + item + "' for output '" + name +
                              "': expected fp32, fp16 or bf16");
    if (have == want) continue;
    const bool is_float_out = have == DataType::kFloat32 || have == DataType::kFloat16 || have == DataType::kBFloat16;
    if (!is_float_out) {
      if (items.size() == 1) continue;  // one type for all: the float outputs
      return invalid_argument("builder config: output_types gives output '" + name + "' (" + dtype_name(have) +
                              ") the type " + item + "; only float outputs can change type");
    }
    // The output keeps its name; the value it was gets another, which inputs and values that
    // subgraphs read by name cannot.
    for (ir::ValueId in : g->inputs)
      if (in == out)
        return invalid_argument("builder config: output_types: output '" + name +
                                "' is also a graph input; its dtype cannot change");
    if (subgraphs_read(*g, name))
      return invalid_argument("builder config: output_types: output '" + name +
                              "' is read by name inside a subgraph; its dtype cannot change");
    std::string before = name + "/before_output_cast";
    while (used(before)) before += "_";
    g->value(out).name = before;
    const ir::ValueId cast = g->add_value(name, want);
    g->value(cast).shape = g->value(out).shape;
    ir::Node n;
    n.name = name + "/output_cast";
    n.op = ir::OpKind::kCast;
    n.opset = 19;
    n.inputs = {out};
    n.outputs = {cast};
    n.attrs["to"] = ir::Attribute::of_int(dtype_to_onnx(want));
    g->add_node(std::move(n));
    g->outputs[i] = cast;
  }
  return Status::Ok();
}

// Builder::build's steps before the tactics, shared by build_graph and cuda_layer_graph (one
// pipeline): config checks, profiles, kernel check, the pass pipeline, the precision decision.
struct Prepared {
  ir::Graph graph;
  std::vector<OptimizationProfile> profiles;
  PrecisionConfig precision;
  TacticSources sources = TacticSources::all();
  bool want_gpu = false;
};

// `decide_precisions` false stops after the pass pipeline (optimized_graph).
static StatusOr<Prepared> prepare_graph(ir::Graph graph, const BuilderConfig& config, bool check_target,
                                        bool decide_precisions = true) {
  if (config.opt_level < 0 || config.opt_level > 3)
    return invalid_argument("builder config: opt_level " + std::to_string(config.opt_level) + ", expected 0..3");
  if (config.max_aux_streams < -1 || config.max_aux_streams > plan::kMaxAuxStreamsInPlan)
    return invalid_argument("builder config: max_aux_streams " + std::to_string(config.max_aux_streams) +
                            ", expected -1 (the builder decides) or 0.." + std::to_string(plan::kMaxAuxStreamsInPlan));
  if (check_target && config.target == TargetDevice::kCuda && !gpu::available())
    return unsupported(std::string("builder config: target cuda: ") +
#ifdef KILN_HAVE_CUDA
                       "this machine has no CUDA GPU"
#else
                       "this Kiln build has no CUDA backend"
#endif
                       + " (use target cpu or auto)");
  Prepared out;
  const bool want_gpu = config.target == TargetDevice::kCuda || (config.target == TargetDevice::kAuto && gpu::available());
  TacticSources sources = TacticSources::all();
  if (!config.tactic_sources.empty()) {
    auto parsed = TacticSources::parse(config.tactic_sources);
    if (!parsed.ok()) return parsed.status().with_context("builder config");
    sources = *parsed;
  }
  if (config.tuning_budget < 0)
    return invalid_argument("builder config: tuning_budget " + std::to_string(config.tuning_budget) +
                            ", expected 0 (the defaults) or more candidates per tactic source");
  if (config.timing_iterations < 1)
    return invalid_argument("builder config: timing_iterations " + std::to_string(config.timing_iterations) +
                            ", expected 1 or more");

  PrecisionConfig precision = precision_config(config);
  for (const ir::Node& n : graph.nodes)
    if (n.op == ir::OpKind::kQuantizeLinear || n.op == ir::OpKind::kDequantizeLinear) precision.quantized_graph = true;
  if (Status s = precision.check(); !s.ok()) return s.with_context("builder config");

  report(config, "profiles", 0, 1);
  KILN_ASSIGN_OR_RETURN(std::vector<OptimizationProfile> profiles, resolve_profiles(graph, config));
  report(config, "profiles", 1, 1);

  report(config, "verify", 0, 1);
  KILN_RETURN_IF_ERROR(verify_kernels(graph, "cpu"));
  report(config, "verify", 1, 1);

  out.graph = std::move(graph);
  KILN_RETURN_IF_ERROR(set_output_types(&out.graph, config.output_types));
  KILN_RETURN_IF_ERROR(optimize(&out.graph, config, profiles));
  // The one precision decision per layer (docs/decisions/0033): the CUDA lowering and layouts read it.
  if (decide_precisions)
    KILN_RETURN_IF_ERROR(passes::assign_precisions(out.graph, precision, passes::float_storage_support));
  // Passes create internal ops (FusedConv); they too must run on the target.
  KILN_RETURN_IF_ERROR(verify_kernels(out.graph, "cpu"));
  out.profiles = std::move(profiles);
  out.precision = precision;
  out.sources = sources;
  out.want_gpu = want_gpu;
  return out;
}

// The CUDA layouts (docs/decisions/0010): NHWC around conv/pool whose decided precision is
// 16-bit, explicit Reformat layers where the layout changes.
static StatusOr<ir::Graph> lay_out_for_cuda(const ir::Graph& g, int* reformats) {
  ir::Graph laid = g;
  KILN_ASSIGN_OR_RETURN(*reformats, passes::assign_layouts(laid, passes::tensor_core_layout_preference));
  return laid;
}

StatusOr<ir::Graph> optimized_graph(const ir::Graph& graph, const BuilderConfig& config) {
  try {
    KILN_ASSIGN_OR_RETURN(Prepared prep, prepare_graph(graph, config, false, false));
    return std::move(prep.graph);
  } catch (const TensorAllocationError& e) {
    return e.status().with_context("build");
  }
}

StatusOr<ir::Graph> cuda_layer_graph(const ir::Graph& graph, const BuilderConfig& config, std::vector<Shape>* opt_shapes) {
  try {
    KILN_ASSIGN_OR_RETURN(Prepared prep, prepare_graph(graph, config, false));
    if (opt_shapes) {
      opt_shapes->clear();
      for (ir::ValueId v : prep.graph.inputs) opt_shapes->push_back(prep.profiles[0].find(prep.graph.value(v).name)->opt);
    }
    int reformats = 0;
    return lay_out_for_cuda(prep.graph, &reformats);
  } catch (const TensorAllocationError& e) {
    return e.status().with_context("build");
  }
}

static StatusOr<std::vector<uint8_t>> build_graph(ir::Graph graph, const BuilderConfig& config) {
  KILN_ASSIGN_OR_RETURN(Prepared prep, prepare_graph(std::move(graph), config, true));
  const PrecisionConfig& precision = prep.precision;
  const TacticSources& sources = prep.sources;
  const bool want_gpu = prep.want_gpu;
  std::vector<OptimizationProfile> profiles = std::move(prep.profiles);
  plan::Plan p;
  p.graph = std::move(prep.graph);


  const int layers = static_cast<int>(p.graph.nodes.size());
  report(config, "tactics", 0, layers);
  p.tactics = select_tactics(p.graph);
  if (want_gpu) {
    // The CUDA tactics are timed at profile 0's opt shapes. Under target auto, a graph the GPU
    // cannot run yet stays a CPU plan.
    std::vector<Shape> opt;
    for (ir::ValueId v : p.graph.inputs) opt.push_back(profiles[0].find(p.graph.value(v).name)->opt);
    // Layouts for the CUDA target: NHWC around conv/pool whose decided precision is 16-bit,
    // explicit Reformat layers where the layout changes (they are layers of the plan, with their
    // own tactics). An FP32 plan's layers are all decided fp32: no NHWC, no Reformat.
    int reformats = 0;
    KILN_ASSIGN_OR_RETURN(ir::Graph laid, lay_out_for_cuda(p.graph, &reformats));
    if (config.progress) {
      const std::string line = "assign_layouts             " + std::to_string(passes::live_layers(p.graph)) + " -> " +
                               std::to_string(passes::live_layers(laid)) + " layers  (" + std::to_string(reformats) +
                               " reformat" + (reformats == 1 ? "" : "s") + ")";
      config.progress(BuildProgress{"layouts", 1, 1, line});
    }
    gpu::GpuSettings settings;
    settings.precision = precision;
    settings.workspace_limit = config.workspace_limit;
    settings.max_aux_streams = config.max_aux_streams;
    settings.timing_cache_path = config.timing_cache_path;
    settings.sources = sources;
    settings.budget.max_tactics = config.tuning_budget;
    settings.budget.timing_iterations = config.timing_iterations;
    settings.budget.cold_l2 = config.timing_cold_cache;
    settings.logger = config.logger;
    settings.progress = config.progress;
    settings.lower_at_call_values = config.target == TargetDevice::kCuda;
    auto cuda = gpu::select_tactics(laid, opt, tuning_shapes(laid, profiles[0], opt, config.tuning_shapes), settings);
    if (cuda.ok()) {
      p.graph = std::move(laid);
      p.tactics = std::move(cuda->tactics);
      p.tactic_data = std::move(cuda->tactic_data);
      p.packed_weights = std::move(cuda->packed_weights);
      p.elided_constants = std::move(cuda->elided_constants);
      // One set (opt only) adds nothing the per-node tactics do not say, except the reformat
      // layers' ids; dynamic profiles keep every set.
      if (cuda->shape_tactics.size() > 1) p.shape_tactics = std::move(cuda->shape_tactics);
      p.header.target = gpu::target();
    } else if (config.target == TargetDevice::kCuda) {
      return cuda.status().with_context("target cuda");
    }
  }
  report(config, "tactics", layers, layers);

  report(config, "serialize", 0, 1);
  p.header.kiln_version = KILN_VERSION_STRING;
  p.profiles = std::move(profiles);
  p.build.precision = precision;
  p.build.opt_level = config.opt_level;
  p.build.workspace_limit = config.workspace_limit;
  p.build.max_aux_streams = config.max_aux_streams;
  std::vector<uint8_t> bytes = plan::write_plan(p);
  report(config, "serialize", 1, 1);
  return bytes;
}

PrecisionConfig precision_config(const BuilderConfig& c) {
  PrecisionConfig p;
  p.fp16 = c.fp16;
  p.bf16 = c.bf16;
  p.tf32 = c.tf32;
  p.int8 = c.int8;
  p.fp8 = c.fp8;
  p.layer_precisions = c.layer_precisions;
  return p;
}

StatusOr<ir::Graph> import_for_build(const std::string& onnx_path, const BuilderConfig& config) {
  std::vector<std::string> warnings;
  onnx_import::ImportOptions opts;
  opts.allow_unknown = config.allow_unknown_attributes;
  opts.warnings = &warnings;
  StatusOr<ir::Graph> graph = invalid_argument("");
  const QuantizeConfig& calib = config.calibration;
  if ((config.int8 || config.fp8) && (!calib.data.empty() || !calib.cache.empty())) {
    // Implicit quantization = `kiln quantize` in memory, then the import of its Q/DQ model
    // (docs/decisions/0050): both paths give the same plan.
    if (config.int8 && config.fp8)
      return invalid_argument("builder config: calibration makes either an INT8 or an FP8 model; set int8 or fp8, "
                              "not both");
    QuantizeConfig q = calib;
    q.format = config.fp8 ? QuantFormat::kFp8E4M3 : QuantFormat::kInt8;
    if (!q.logger) q.logger = config.logger;
    if (!q.progress && config.progress)
      q.progress = [&](int done, int total) { config.progress(BuildProgress{"calibrate", done, total, ""}); };
    report(config, "calibrate", 0, 0);
    QuantizeReport rep;
    KILN_ASSIGN_OR_RETURN(std::string qdq, quantize_onnx(onnx_path, q, &rep));
    // The accuracy budget's choice (docs/decisions/0062), one progress line each.
    for (const std::string& line : describe_budget(rep, q))
      if (config.progress) config.progress(BuildProgress{"max-error", 1, 1, line});
    report(config, "import", 0, 1);
    graph = onnx_import::import_model_bytes(qdq, std::filesystem::path(onnx_path).parent_path().string(), opts);
    if (!graph.ok()) return graph.status().with_context("the quantized model");
  } else {
    report(config, "import", 0, 1);
    graph = onnx_import::import_model_file(onnx_path, opts);
    if (!graph.ok()) return graph.status();
  }
  for (const std::string& w : warnings)
    if (config.progress) config.progress(BuildProgress{"warning", 1, 1, w});
  report(config, "import", 1, 1);
  return graph;
}

StatusOr<std::vector<uint8_t>> Builder::build(const std::string& onnx_path, const BuilderConfig& config) {
  KILN_ASSIGN_OR_RETURN(ir::Graph graph, import_for_build(onnx_path, config));
  return build_from_graph(std::move(graph), config);
}

}  // namespace kiln
