// Glue between the Builder/Engine and the CUDA path (see gpu_engine.h).
#include "runtime/gpu_engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/gpu_model.h"
#include "backends/cuda/gpu_ops.h"
#include "builder/tactic_selector.h"
#include "core/numerics.h"
#include "builder/timing_cache.h"
#endif

namespace kiln::gpu {

#ifdef KILN_HAVE_CUDA

bool available() { return cuda::device_info().available; }

PlanTarget target() {
  const auto& d = cuda::device_info();
  PlanTarget t;
  t.backend = PlanBackend::kCuda;
  t.cc_major = static_cast<uint32_t>(d.cc_major);
  t.cc_minor = static_cast<uint32_t>(d.cc_minor);
  t.cudnn_version = static_cast<uint32_t>(d.cudnn_version);
  t.cublaslt_version = static_cast<uint32_t>(d.cublaslt_version);
  return t;
}

namespace {

cuda::GpuBuildOptions options(const GpuSettings& s) {
  cuda::GpuBuildOptions o;
  o.precision = s.precision;
  if (s.workspace_limit) o.workspace_limit = s.workspace_limit;
  o.max_aux_streams = s.max_aux_streams;
  o.sources = s.sources;
  o.cold_l2_timing = s.budget.cold_l2;
  o.logger = s.logger;
  return o;
}

}  // namespace

TimingCacheHeader timing_cache_header() {
  const auto& d = cuda::device_info();
  TimingCacheHeader h;
  h.gpu_name = d.name;
  h.sm_major = d.cc_major;
  h.sm_minor = d.cc_minor;
  h.cudnn_version = d.cudnn_version;
  h.cublaslt_version = d.cublaslt_version;
  h.kiln_version = KILN_VERSION_STRING;
  return h;
}

namespace {

// Every engine layer's tactic of a lowered model, for Plan::shape_tactics.
plan::Plan::ShapeTactics layer_tactics(const cuda::GpuModel& m, const std::vector<Shape>& shapes) {
  plan::Plan::ShapeTactics set;
  set.shapes = shapes;
  for (const auto& l : m.layers())
    if (l.tactic_id != kNoTactic) set.layers.push_back({l.name, plan::PlanTactic{"", l.tactic_id, l.tuned_ms}});
  return set;
}

// log2 distance between two shape sets (dims that differ), for picking the nearest tuned set.
double shape_distance(const std::vector<Shape>& a, const std::vector<Shape>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    for (size_t k = 0; k < a[i].size() && k < b[i].size(); ++k)
      if (a[i][k] != b[i][k]) d += std::fabs(std::log2(std::max<double>(a[i][k], 1)) - std::log2(std::max<double>(b[i][k], 1)));
  return d;
}

}  // namespace

StatusOr<GpuBuild> select_tactics(const ir::Graph& g, const std::vector<Shape>& opt_shapes,
                                  const std::vector<std::vector<Shape>>& tuning_shapes, const GpuSettings& settings) {
  if (!available()) return unsupported("no CUDA GPU on this machine");
  auto log = [&](const std::string& line) {
    if (settings.progress) settings.progress(BuildProgress{"timing cache", 0, 0, line});
  };
  // The build's timing cache: the user's file, or in memory so equal layers are timed once.
  TimingCache cache(timing_cache_header());
  const bool file = !settings.timing_cache_path.empty();
  if (file) KILN_RETURN_IF_ERROR(cache.load(settings.timing_cache_path, log));
  // Shape-tensor inputs (decision 0073): the lowering depends on their values, which a build
  // does not have (profiles give shapes only). Nothing is tuned; the engine lowers at each call's
  // values and each layer takes its first tactic that runs there.
  const std::vector<cuda::ShapeInput> shape_inputs = cuda::shape_operand_inputs(g);
  if (!shape_inputs.empty()) {
    KILN_RETURN_IF_ERROR(cuda::check_tensor_io(g));
    if (!settings.lower_at_call_values)
      return unsupported(cuda::shape_input_dependence(g, shape_inputs) +
                         ": its lowering is known only at each call's values (build with target cuda)");
    if (settings.logger)
      settings.logger(LogSeverity::kWarning, "CUDA build: " + cuda::shape_input_dependence(g, shape_inputs) +
                                                 "; no tactics tuned: the engine lowers at each call's input values");
    GpuBuild out;
    for (size_t i = 0; i < g.nodes.size(); ++i) out.tactics.push_back(plan::PlanTactic{"cuda.at_call_values"});
    return out;
  }
  KILN_ASSIGN_OR_RETURN(cuda::ValueShapes vs, cuda::infer_value_shapes_by_reference(g, opt_shapes));
  TacticSelector selector(&cache, TacticSelectorConfig{settings.sources, settings.budget, true});
  cuda::GpuBuildOptions o = options(settings);
  o.select_tactic = selector.as_function();
  o.record_packed = true;
  o.weight_cache = std::make_shared<cuda::WeightCache>();  // one device copy across the tuned shapes
  if (settings.progress)
    o.on_tune_progress = [&](int done, int total, const std::string& layer) {
      settings.progress(BuildProgress{"tuning", done, total, layer});
    };
  KILN_ASSIGN_OR_RETURN(auto model, cuda::GpuModel::create(g, vs, o));
  GpuBuild out;
  out.tactic_data = model->tactic_data();
  out.elided_constants = model->elidable_constants(g);
  // The packed bytes move (no copy: an LLM's are GiBs) into one shared buffer the plan writer
  // reads, and the other shape sets below lower from them as a plan load does: each weight is
  // converted and laid out once per build, not once per tuned shape set.
  auto keep = std::make_shared<std::map<std::string, std::vector<uint8_t>>>(model->take_packed_weights());
  cuda::PackedWeights packed;
  packed.owner = keep;
  for (const auto& [key, bytes] : *keep) {
    out.packed_weights[key] = plan::Plan::PackedBlob{keep, bytes.data(), bytes.size()};
    packed.by_key[key] = cuda::PackedWeight{bytes.data(), bytes.size()};
  }
  out.shape_tactics.push_back(layer_tactics(*model, opt_shapes));
  std::map<std::string, plan::PlanTactic> by_name;
  for (const auto& l : model->layers()) by_name[l.name] = plan::PlanTactic{l.tactic, l.tactic_id, l.tuned_ms};
  // Concats whose inputs all write in place (docs/decisions/0009) show as such in `kiln inspect`.
  for (const auto& name : model->eliminated_layers()) by_name[name] = plan::PlanTactic{"cuda.concat_eliminated"};
  for (const ir::Node& n : g.nodes) {
    auto it = by_name.find(n.name);
    out.tactics.push_back(it == by_name.end() ? plan::PlanTactic{"cuda.view"} : it->second);
  }
  model.reset();  // its activations and workspaces: the larger shape sets below need the memory
  // More shapes of the profile: tuned the same way (same selector and cache), so a context at
  // those shapes runs tactics chosen for them (issue 10 item 4).
  for (const auto& shapes : tuning_shapes) {
    if (shapes == opt_shapes) continue;
    std::string label;
    for (const Shape& s : shapes) label += (label.empty() ? "" : ",") + shape_str(s);
    cuda::GpuBuildOptions so = o;
    so.record_packed = false;
    so.packed = &packed;
    // A shape set that cannot be tuned (out of device memory at a large max, ...) is left out:
    // contexts there take the nearest other set's tactics, each checked to run.
    auto skip = [&](const Status& why) {
      if (settings.logger)
        settings.logger(LogSeverity::kWarning, "tactics not tuned at shapes " + label + ": " + why.message());
    };
    auto svs = cuda::infer_value_shapes_by_reference(g, shapes);
    if (!svs.ok()) {
      skip(svs.status());
      continue;
    }
    if (settings.progress) {
      settings.progress(BuildProgress{"tuning shapes", out.tuned_shape_sets + 1, static_cast<int>(tuning_shapes.size()),
                                      label});
    }
    auto sm = cuda::GpuModel::create(g, *svs, so);
    if (!sm.ok()) {
      skip(sm.status());
      continue;
    }
    for (auto& [k, v] : (*sm)->tactic_data()) out.tactic_data.emplace(k, v);
    out.shape_tactics.push_back(layer_tactics(**sm, shapes));
    ++out.tuned_shape_sets;
  }
  if (settings.logger)
    settings.logger(LogSeverity::kInfo, "tactics: " + std::to_string(selector.layers_timed()) + " layers timed, " +
                                            std::to_string(selector.candidates_timed()) + " candidates (sources " +
                                            settings.sources.to_string() + ", " + settings.budget.to_string() + ")");
  if (file) {
    log("timing cache: " + std::to_string(cache.hits()) + " hits, " + std::to_string(cache.misses()) +
        " misses (layers timed); " + std::to_string(cache.size()) + " entries");
    // Which signatures were timed anew: on a warm rebuild any line here is worth a look.
    constexpr size_t kShown = 8;
    for (size_t i = 0; i < cache.missed().size() && i < kShown; ++i) log("timing cache: miss '" + cache.missed()[i] + "'");
    if (cache.missed().size() > kShown)
      log("timing cache: ... " + std::to_string(cache.missed().size() - kShown) + " more misses");
    KILN_RETURN_IF_ERROR(cache.save(settings.timing_cache_path));
    log("timing cache: wrote '" + settings.timing_cache_path + "'");
  }
  return out;
}

struct EngineState {
  ir::Graph graph;
  std::vector<Shape> opt_shapes;
  cuda::GpuBuildOptions opts;
  std::map<std::string, std::string> tactic_data;  // from the plan (opts.tactic_data points here)
  cuda::PackedWeights packed;                      // from the plan (opts.packed points here)
  std::vector<plan::Plan::ShapeTactics> sets;      // tactics tuned per shape set (opt first)
  GpuLoadTimes load;
  // Some shape depends on the input values (cuda::ValueShapes::value_dependent, decision 0069):
  // models are keyed by the inputs' bytes too and lowered at each call's own values.
  bool value_keyed = false;
  bool shape_inputs = false;  // some input is a shape tensor (decision 0073): bound per call
  std::vector<size_t> shape_input_index;  // those inputs (indices into graph.inputs)
  // Models are keyed by the shape inputs' bytes only while every bound graph's shapes followed
  // from the input shapes and bound values (static inference); cleared for good otherwise.
  mutable std::atomic<bool> shapes_follow_bound{true};
  std::string dependence;
  mutable std::mutex mu;
  // Models by (input shapes, input bytes when value_keyed, else empty).
  using ModelKey = std::pair<std::vector<Shape>, std::string>;
  mutable std::map<ModelKey, std::shared_ptr<cuda::GpuModel>> models;
  mutable std::deque<ModelKey> value_models;  // value-keyed models, oldest first (at most kValueModels)
  static constexpr size_t kValueModels = 8;
  mutable std::vector<std::pair<std::vector<Shape>, double>> setup_order;  // first use of each shape set, ms

  // The options for a model at `shapes`: the tactics of the nearest tuned shape set (exact: selected
  // without running; else each checked to run, the first candidate that runs where it does not).
  cuda::GpuBuildOptions options_for(const std::vector<Shape>& shapes) const {
    cuda::GpuBuildOptions o = opts;
    if (sets.empty()) {
      // A plan without shape sets (none tuned beyond opt): other shapes take each layer's first
      // candidate that runs (reusing opt's ids there was measured slower, H100 run 28).
      o.preset_tactics.clear();
      return o;
    }
    const plan::Plan::ShapeTactics* best = &sets.front();
    double best_d = shape_distance(shapes, best->shapes);
    for (const auto& set : sets) {
      const double d = shape_distance(shapes, set.shapes);
      if (d < best_d) {
        best = &set;
        best_d = d;
      }
    }
    o.preset_tactics.clear();
    for (const auto& [name, t] : best->layers) o.preset_tactics[name] = cuda::GpuBuildOptions::PresetTactic{t.id, t.tuned_ms};
    o.verify_presets = best->shapes != shapes;
    return o;
  }

  // The model for `shapes`; for a value-keyed engine, for `values` (the call's inputs, whose bytes
  // `key` holds): its shapes are discovered at those values and its preset tactics checked to run.
  // With shape-tensor inputs, `key` holds only their bytes while `shapes_follow_bound` holds
  // (`full_key`: every input's bytes); a bound graph whose shapes still need the call's other
  // values clears it and the model is keyed by `full_key`. `*used` receives the key it is under.
  StatusOr<std::shared_ptr<cuda::GpuModel>> model_for(const std::vector<Shape>& shapes, const std::string& key = {},
                                                      const std::vector<Tensor>* values = nullptr,
                                                      const std::string* full_key = nullptr,
                                                      std::string* used = nullptr) const {
    std::lock_guard<std::mutex> lock(mu);
    ModelKey mk{shapes, key};
    if (used) *used = key;
    auto it = models.find(mk);
    if (it != models.end()) return it->second;
    const auto t0 = std::chrono::steady_clock::now();
    // Shape-tensor inputs read as constants of this model (decision 0073): `key` holds at least
    // their bytes, so a model is only reused at the same values of them.
    const ir::Graph* lowered = &graph;
    ir::Graph bound;
    if (values && shape_inputs) {
      KILN_ASSIGN_OR_RETURN(bound, cuda::bind_shape_inputs(graph, *values));
      lowered = &bound;
    }
    KILN_ASSIGN_OR_RETURN(cuda::ValueShapes vs, cuda::infer_value_shapes_by_reference(*lowered, shapes, values));
    // Static inference fixed every shape of the bound graph (value_dependent unset): the model
    // depends on the shapes and the bound values only. Else (a Range of another input, ...) it
    // may depend on any input value: key this and every later model by all the bytes.
    if (values && shape_inputs && vs.value_dependent && full_key) {
      shapes_follow_bound = false;
      mk.second = *full_key;
      if (used) *used = *full_key;
      it = models.find(mk);
      if (it != models.end()) return it->second;
    }
    cuda::GpuBuildOptions o = options_for(shapes);
    if (values) o.verify_presets = true;  // the build tuned at made-up values: other layer shapes
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<cuda::GpuModel> m, cuda::GpuModel::create(*lowered, vs, o));
    models[mk] = m;
    if (values) {
      value_models.push_back(mk);
      if (value_models.size() > kValueModels) {  // contexts keep theirs alive (shared_ptr)
        models.erase(value_models.front());
        value_models.pop_front();
      }
    }
    setup_order.push_back({shapes, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count()});
    return m;
  }
};

struct ContextState {
  std::vector<Shape> shapes;
  std::string values;  // the inputs' bytes the model was lowered at (value-keyed engines), else empty
  std::shared_ptr<cuda::GpuModel> model;
  std::unique_ptr<cuda::GpuContext> ctx;
  // The execution context's device state (arena, workspace, handles, aux streams), shared by
  // its contexts at every shape it ran (decision 0079): a shape switch allocates nothing unless
  // the new shape needs more memory than every one before.
  std::shared_ptr<cuda::GpuResources> res;
  // Contexts of the shapes used before, most recent first (at most kParkedContexts): switching
  // back to one reuses its model and captured CUDA graph instead of setting up again. They hold
  // no device memory of their own (the arena is `res`'s).
  std::deque<std::shared_ptr<ContextState>> parked;
};
constexpr size_t kParkedContexts = 16;

StatusOr<std::shared_ptr<EngineState>> create_engine(const ir::Graph& g, const std::vector<Shape>& opt_shapes,
                                                     const std::vector<plan::PlanTactic>& tactics,
                                                     const GpuSettings& settings) {
  auto e = std::make_shared<EngineState>();
  e->graph = g;
  e->opt_shapes = opt_shapes;
  e->opts = options(settings);
  e->opts.tune = false;
  // One device copy of each weight per engine, whatever the number of input-shape sets.
  e->opts.weight_cache = std::make_shared<cuda::WeightCache>();
  for (size_t i = 0; i < g.nodes.size() && i < tactics.size(); ++i)
    if (tactics[i].id != plan::kPlanNoTacticId)
      e->opts.preset_tactics[g.nodes[i].name] = cuda::GpuBuildOptions::PresetTactic{tactics[i].id, tactics[i].tuned_ms};
  e->tactic_data = settings.tactic_data;
  e->opts.tactic_data = &e->tactic_data;
  if (!settings.packed_weights.empty() || !settings.elided_constants.empty()) {
    for (const auto& [key, b] : settings.packed_weights) {
      e->packed.by_key[key] = cuda::PackedWeight{b.data, static_cast<size_t>(b.bytes)};
      if (!e->packed.owner) e->packed.owner = b.owner;
    }
    e->packed.elided.assign(settings.elided_constants.begin(), settings.elided_constants.end());
    std::sort(e->packed.elided.begin(), e->packed.elided.end());
    e->opts.packed = &e->packed;
  }
  e->sets = settings.shape_tactics;
  const auto td = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(cuda::init_device());
  // One set of library handles for every model this engine sets up (at load and at each new
  // shape), instead of new handles per model (decision 0079).
  KILN_ASSIGN_OR_RETURN(e->opts.setup_resources, cuda::GpuResources::create());
  const auto t0 = std::chrono::steady_clock::now();
  e->load.device_ms = std::chrono::duration<double, std::milli>(t0 - td).count();
  // Shape-tensor inputs (decision 0073): no model at made-up values (a made-up shape or axes
  // would be refused, or lower a model no call uses); the first execute lowers at its values.
  const std::vector<cuda::ShapeInput> shape_inputs = cuda::shape_operand_inputs(g);
  if (!shape_inputs.empty()) {
    KILN_RETURN_IF_ERROR(cuda::check_tensor_io(g));
    e->value_keyed = true;
    e->shape_inputs = true;
    for (const cuda::ShapeInput& si : shape_inputs) e->shape_input_index.push_back(si.input);
    e->dependence = cuda::shape_input_dependence(g, shape_inputs);
    if (settings.logger)
      settings.logger(LogSeverity::kWarning, "CUDA engine: " + e->dependence +
                                                 "; each new set of input values is lowered on first use (execute only)");
    return e;
  }
  KILN_ASSIGN_OR_RETURN(cuda::ValueShapes vs, cuda::infer_value_shapes_by_reference(g, opt_shapes));
  if (vs.value_dependent) {
    e->value_keyed = true;
    e->dependence = vs.dependence;
    if (settings.logger)
      settings.logger(LogSeverity::kWarning, "CUDA engine: " + vs.dependence +
                                                 "; each new set of input values is lowered on first use (execute only)");
  }
  e->load.shapes_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  cuda::GpuBuildOptions o = e->opts;
  if (!e->sets.empty()) {
    o = e->options_for(opt_shapes);  // the opt set names every engine layer (reformats included)
    for (const auto& [name, t] : e->opts.preset_tactics) o.preset_tactics.emplace(name, t);
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<cuda::GpuModel> m, cuda::GpuModel::create(g, vs, o));
  e->load.lower_ms = m->setup_times().lower_ms - m->setup_times().weights_ms;
  e->load.weights_ms = m->setup_times().weights_ms;
  e->load.tactics_ms = m->setup_times().tactics_ms;
  e->load.restored = m->setup_times().restored;
  e->load.packed_hits = m->packed_hits();
  if (settings.logger)
    settings.logger(LogSeverity::kVerbose, "[load] weights: " + std::to_string(m->packed_hits()) +
                                               " uploaded as the plan stores them (packed), " +
                                               std::to_string(e->packed.elided.size()) + " constants stored only packed");
  for (const auto& l : m->layers())
    if (!l.restored && (tactic_id_source(l.tactic_id) == TacticSource::kCudnnGraph ||
                        tactic_id_source(l.tactic_id) == TacticSource::kCublasLt))
      ++e->load.rebuilt;
  e->models[{opt_shapes, std::string()}] = m;
  return e;
}

namespace {

// `t` as integer dtype `to`, element by element (ONNX Cast between integers: two's-complement
// truncation to the target width, sign or zero extension from a narrower source).
Tensor convert_int(const Tensor& t, DataType to) {
  Tensor r(to, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) store_from_int64(to, r.raw(), i, load_as_int64(t.dtype(), t.raw(), i));
  return r;
}

// True when a graph input or output has a dtype the engine converts on the host (narrow
// integers computed wide: decision 0069; float64 is staged as it is, decision 0075).
bool has_host_converted_io(const ir::Graph& g) {
  DataType wide;
  for (ir::ValueId v : g.inputs)
    if (cuda::narrow_int_dtype(g.value(v).dtype, &wide)) return true;
  for (ir::ValueId v : g.outputs)
    if (cuda::narrow_int_dtype(g.value(v).dtype, &wide)) return true;
  return false;
}

// The bytes of every input (dtype, then data): a value-keyed engine's model key.
std::string values_key(const std::vector<Tensor>& inputs) {
  std::string k;
  for (const Tensor& t : inputs) {
    k.push_back(static_cast<char>(t.dtype()));
    k.append(static_cast<const char*>(t.raw()), t.nbytes());
  }
  return k;
}

// prepare() for a call's inputs: `values` given (value-keyed engines) keys the model by them too.
Status prepare_for(const EngineState& e, std::shared_ptr<ContextState>& ctx, const std::vector<Shape>& shapes,
                   const std::vector<Tensor>* values) {
  std::string key = values ? values_key(*values) : std::string();
  std::string full;
  if (values && e.shape_inputs && e.shapes_follow_bound) {
    // Only the shape inputs' bytes ('S' keeps such keys apart from full ones).
    full = std::move(key);
    key = "S";
    for (size_t i : e.shape_input_index) {
      const Tensor& t = (*values)[i];
      key.push_back(static_cast<char>(t.dtype()));
      key.append(static_cast<const char*>(t.raw()), t.nbytes());
    }
  }
  if (ctx && ctx->shapes == shapes && ctx->values == key) return Status::Ok();
  std::deque<std::shared_ptr<ContextState>> parked;
  if (ctx) {
    parked = std::move(ctx->parked);
    ctx->parked.clear();
    parked.push_front(ctx);
  }
  for (auto it = parked.begin(); it != parked.end(); ++it) {
    if ((*it)->shapes != shapes || (*it)->values != key) continue;
    std::shared_ptr<ContextState> c = *it;
    parked.erase(it);
    c->parked = std::move(parked);
    ctx = c;
    return Status::Ok();
  }
  std::string used;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<cuda::GpuModel> m,
                        e.model_for(shapes, key, values, full.empty() ? nullptr : &full, &used));
  auto c = std::make_shared<ContextState>();
  c->shapes = shapes;
  c->values = used;
  c->model = m;
  c->res = parked.empty() ? nullptr : parked.front()->res;
  if (!c->res) {
    KILN_ASSIGN_OR_RETURN(c->res, cuda::GpuResources::create());
  }
  KILN_ASSIGN_OR_RETURN(c->ctx, m->create_context(c->res));
  while (parked.size() > kParkedContexts) parked.pop_back();
  c->parked = std::move(parked);
  ctx = c;
  return Status::Ok();
}

}  // namespace

Status prepare(const EngineState& e, std::shared_ptr<ContextState>& ctx, const std::vector<Shape>& shapes) {
  // A value-keyed engine is prepared by execute, which has the values.
  if (e.value_keyed) return Status::Ok();
  return prepare_for(e, ctx, shapes, nullptr);
}

std::vector<Shape> prepared_shapes(const ContextState& ctx) { return ctx.shapes; }
std::vector<Shape> output_shapes(const ContextState& ctx) { return ctx.model->output_shapes(); }

namespace {
// The model's layers (name, op, tactic) with the device times GpuContext::profile_layers measured.
std::vector<LayerTiming> layer_timings(const cuda::GpuModel& m, const std::vector<double>& ms) {
  std::vector<LayerTiming> r;
  const auto& layers = m.layers();
  for (size_t i = 0; i < layers.size() && i < ms.size(); ++i)
    r.push_back(LayerTiming{layers[i].name, layers[i].op, layers[i].tactic, ms[i]});
  return r;
}
}  // namespace

Status execute(const EngineState& e, std::shared_ptr<ContextState>& ctx, const std::vector<Tensor>& inputs,
               std::vector<Tensor>* outputs, bool cuda_graph, std::vector<LayerTiming>* timings) {
  std::vector<Shape> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.shape());
  KILN_RETURN_IF_ERROR(prepare_for(e, ctx, shapes, e.value_keyed ? &inputs : nullptr));
  // Each input in the dtype the model stages it in: the graph's declared dtype, except narrow
  // integers (uint8 / int8 / uint16 / int16 / uint32), which the model computes in int32 / int64
  // (decision 0069): converted here, and such outputs truncated back to their declared dtype below.
  const std::vector<DataType> want = ctx->model->input_dtypes();
  std::vector<Tensor> widened;
  const std::vector<Tensor>* staged = &inputs;
  for (size_t i = 0; i < inputs.size() && i < want.size(); ++i) {
    DataType wide;
    const bool narrow_int = cuda::narrow_int_dtype(inputs[i].dtype(), &wide) && wide == want[i];
    if (inputs[i].dtype() != want[i] && narrow_int) {
      if (widened.empty()) widened = inputs;
      widened[i] = convert_int(inputs[i], wide);
      staged = &widened;
      continue;
    }
    if (inputs[i].dtype() != want[i])
      return invalid_argument("input '" + e.graph.value(e.graph.inputs[i]).name + "': CUDA engines take it as " +
                              dtype_name(want[i]) + ", got " + dtype_name(inputs[i].dtype()));
  }
  ctx->ctx->use_cuda_graph(cuda_graph);
  KILN_RETURN_IF_ERROR(ctx->ctx->run(*staged, outputs));
  for (size_t k = 0; k < outputs->size() && k < e.graph.outputs.size(); ++k) {
    const DataType declared = e.graph.value(e.graph.outputs[k]).dtype;
    DataType wide;
    if ((*outputs)[k].dtype() != declared && cuda::narrow_int_dtype(declared, &wide) && (*outputs)[k].dtype() == wide)
      (*outputs)[k] = convert_int((*outputs)[k], declared);
  }
  if (timings) {
    cudaStream_t s;
    KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    auto ms = ctx->ctx->profile_layers(staged, s);
    cudaStreamDestroy(s);
    if (!ms.ok()) return ms.status();
    *timings = layer_timings(*ctx->model, *ms);
  }
  return Status::Ok();
}

Status enqueue(const EngineState& e, std::shared_ptr<ContextState>& ctx, const std::vector<Shape>& shapes,
               const std::vector<const void*>& inputs, const std::vector<void*>& outputs, CudaStream stream) {
  if (e.value_keyed)
    return unsupported("enqueue: this engine's shapes depend on its input values (" + e.dependence +
                       "), which enqueue cannot read from device memory; use set_input / execute");
  if (has_host_converted_io(e.graph))
    return unsupported("enqueue: this engine has uint8 / int8 / uint16 / int16 / uint32 inputs or outputs, "
                       "which it computes in int32 / int64 and converts on the host (decision 0069); use "
                       "set_input / execute");
  KILN_RETURN_IF_ERROR(prepare(e, ctx, shapes));
  return ctx->ctx->enqueue_device(inputs, outputs, stream);
}

StatusOr<std::vector<LayerTiming>> profile_enqueued(const EngineState& e, const std::shared_ptr<ContextState>& ctx,
                                                    CudaStream stream) {
  (void)e;
  if (!ctx || !ctx->ctx || !ctx->model)
    return invalid_argument("profile: no enqueue has prepared this execution context for its shapes yet");
  KILN_ASSIGN_OR_RETURN(std::vector<double> ms, ctx->ctx->profile_layers(nullptr, static_cast<cudaStream_t>(stream)));
  return layer_timings(*ctx->model, ms);
}

Status check_address(const void* p) {
  cudaPointerAttributes a{};
  cudaError_t err = cudaPointerGetAttributes(&a, p);
  if (err != cudaSuccess) {
    cudaGetLastError();  // reset this thread's last-error state
    return invalid_argument(std::string("cannot query the address: ") + cudaGetErrorString(err));
  }
  if (a.type == cudaMemoryTypeUnregistered)
    return invalid_argument("the address is pageable host memory; enqueue needs device memory (cudaMalloc) or pinned "
                            "host memory (cudaMallocHost / cudaHostRegister)");
  return Status::Ok();
}

GpuLoadTimes load_times(const EngineState& e) { return e.load; }

std::vector<std::pair<std::vector<Shape>, double>> shape_setup_ms(const EngineState& e) {
  std::lock_guard<std::mutex> lock(e.mu);
  return e.setup_order;
}

std::vector<DeviceLayerInfo> describe_layers(const EngineState& e) {
  std::lock_guard<std::mutex> lock(e.mu);
  std::vector<DeviceLayerInfo> r;
  auto it = e.models.find({e.opt_shapes, std::string()});
  if (it == e.models.end()) return r;
  for (const auto& l : it->second->layers())
    r.push_back(DeviceLayerInfo{l.name, l.op, l.tactic, l.tactic_id, l.tuned_ms, l.fallback, l.workspace_bytes, l.stream});
  return r;
}

DeviceMemoryInfo memory(const EngineState& e) {
  std::lock_guard<std::mutex> lock(e.mu);
  auto it = e.models.find({e.opt_shapes, std::string()});
  if (it == e.models.end()) return {};
  const cuda::GpuModel& m = *it->second;
  return DeviceMemoryInfo{m.arena_bytes(), m.activation_bytes_sum(), m.weight_bytes(), m.workspace_bytes(),
                          m.aux_streams()};
}

#else  // no CUDA backend in this build

bool available() { return false; }
PlanTarget target() { return PlanTarget{}; }
TimingCacheHeader timing_cache_header() { return TimingCacheHeader{}; }
StatusOr<GpuBuild> select_tactics(const ir::Graph&, const std::vector<Shape>&, const std::vector<std::vector<Shape>>&,
                                  const GpuSettings&) {
  return unsupported("this Kiln build has no CUDA backend");
}
struct EngineState {};
struct ContextState {};
StatusOr<std::shared_ptr<EngineState>> create_engine(const ir::Graph&, const std::vector<Shape>&,
                                                     const std::vector<plan::PlanTactic>&, const GpuSettings&) {
  return unsupported("this Kiln build has no CUDA backend");
}
Status prepare(const EngineState&, std::shared_ptr<ContextState>&, const std::vector<Shape>&) {
  return unsupported("this Kiln build has no CUDA backend");
}
std::vector<Shape> prepared_shapes(const ContextState&) { return {}; }
std::vector<Shape> output_shapes(const ContextState&) { return {}; }
Status execute(const EngineState&, std::shared_ptr<ContextState>&, const std::vector<Tensor>&, std::vector<Tensor>*, bool,
               std::vector<LayerTiming>*) {
  return unsupported("this Kiln build has no CUDA backend");
}
Status enqueue(const EngineState&, std::shared_ptr<ContextState>&, const std::vector<Shape>&,
               const std::vector<const void*>&, const std::vector<void*>&, CudaStream) {
  return unsupported("this Kiln build has no CUDA backend");
}
StatusOr<std::vector<LayerTiming>> profile_enqueued(const EngineState&, const std::shared_ptr<ContextState>&, CudaStream) {
  return unsupported("this Kiln build has no CUDA backend");
}
Status check_address(const void*) { return unsupported("this Kiln build has no CUDA backend"); }
GpuLoadTimes load_times(const EngineState&) { return {}; }
std::vector<std::pair<std::vector<Shape>, double>> shape_setup_ms(const EngineState&) { return {}; }
std::vector<DeviceLayerInfo> describe_layers(const EngineState&) { return {}; }
DeviceMemoryInfo memory(const EngineState&) { return {}; }

#endif

}  // namespace kiln::gpu
