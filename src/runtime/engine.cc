// Runtime and Engine: a validated plan becomes an immutable Engine (graph, profiles, layer
// table, weights shared by every execution context). Refuses plans for another target and
// plans whose tactics this build cannot run.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>

#include "backends/cpu/cpu_kernel.h"
#include "core/host_memory.h"
#include "core/parallel.h"
#include "io/input_file.h"
#include "ir/layer_annotations.h"
#include "plan/plan_format.h"
#include "runtime/engine_impl.h"
#ifdef KILN_HAVE_CUDA
#include "backends/cuda/device.h"
#endif

namespace kiln {

namespace {

// QuantLinear's / QuantConv's scales as LayerInfo::quantization: the activation's (attributes) and the weight's
// (its constant scale vector), each in quant_params_summary's form.
std::string quant_linear_summary(const ir::Graph& g, const ir::Node& n) {
  if (n.inputs.size() < 3 || n.inputs[1] == ir::kNoValue || n.inputs[2] == ir::kNoValue) return "";
  const auto& w = g.value(n.inputs[1]).constant;
  const auto& ws = g.value(n.inputs[2]).constant;
  if (!w || !ws || ws->dtype() != DataType::kFloat32) return "";
  QuantParams x;
  x.type = w->dtype();
  x.scale = {n.attr_float("x_scale", 0.f)};
  if (x.type == DataType::kInt8) x.zero_point = {static_cast<int32_t>(n.attr_int("x_zero_point", 0))};
  QuantParams q;
  q.type = w->dtype();
  q.granularity = QuantGranularity::kPerAxis;
  q.axis = 0;
  q.scale_shape = {ws->numel()};
  q.scale.assign(ws->data<float>(), ws->data<float>() + ws->numel());
  std::string s = "x " + quant_params_summary(x);
  // An 8-bit X (docs/decisions/0081): read as stored, the producer quantized it.
  const DataType xt = g.value(n.inputs[0]).dtype;
  if (xt == DataType::kInt8 || xt == DataType::kFloat8E4M3FN) s += " (8-bit input)";
  s += "; w " + quant_params_summary(q);
  if (n.attr_string("activation", "") == "Relu") s += "; +relu";
  const std::string yt = n.attr_string("y_type", "");
  if (!yt.empty()) {
    QuantParams y;
    y.type = dtype_from_name(yt);
    y.scale = {n.attr_float("y_scale", 0.f)};
    if (y.type == DataType::kInt8) y.zero_point = {static_cast<int32_t>(n.attr_int("y_zero_point", 0))};
    s += "; y " + quant_params_summary(y);
  }
  return s;
}

}  // namespace
namespace {

constexpr const char* kCpuReferenceTactic = "cpu.ref";
// A Concat whose producers write into its output (passes/concat_in_place.cc; still the reference kernels).
constexpr const char* kCpuConcatInPlaceTactic = "cpu.concat_in_place";

TensorDesc describe_value(const ir::Graph& g, ir::ValueId id) {
  TensorDesc d;
  if (id == ir::kNoValue) return d;
  const ir::Value& v = g.value(id);
  d.name = v.name;
  d.dtype = v.dtype;
  d.rank_known = v.shape.has_value();
  d.quant = v.quant;
  if (v.shape) {
    for (const ir::Dim& dim : *v.shape) {
      d.dims.push_back(dim.is_known() ? dim.value : -1);
      d.symbols.push_back(dim.symbol);
    }
  }
  return d;
}

Status check_target(const PlanTarget& t) {
  if (t.backend == PlanBackend::kCpu) return Status::Ok();
#ifdef KILN_HAVE_CUDA
  const cuda::DeviceInfo& d = cuda::device_info();
  if (!d.available)
    return invalid_plan("target mismatch: the plan targets " + t.to_string() + ", but this machine has no CUDA GPU");
  if (static_cast<uint32_t>(d.cc_major) != t.cc_major || static_cast<uint32_t>(d.cc_minor) != t.cc_minor)
    return invalid_plan("target mismatch: the plan targets " + t.to_string() + ", but this GPU is " + d.name + " (sm_" +
                        std::to_string(d.cc_major) + std::to_string(d.cc_minor) + "); rebuild the plan here");
  if (t.cudnn_version / 100 != d.cudnn_version / 100)
    return invalid_plan("target mismatch: the plan was built with cuDNN " + std::to_string(t.cudnn_version) +
                        ", this machine has " + std::to_string(d.cudnn_version) + "; rebuild the plan here");
  return Status::Ok();
#else
  return invalid_plan("target mismatch: the plan targets " + t.to_string() +
                      ", but this Kiln build has no CUDA backend; rebuild the plan here (kiln build --device cpu)");
#endif
}

bool has_all_kernels(const ir::Graph& g, const cpu::KernelRegistry& reg, std::string* missing) {
  for (const ir::Node& n : g.nodes) {
    if (!reg.find(n.op)) {
      *missing = n.describe();
      return false;
    }
    for (const auto& [k, a] : n.attrs)
      if (a.kind == ir::Attribute::Kind::kGraph && a.g && !has_all_kernels(*a.g, reg, missing)) return false;
  }
  return true;
}

}  // namespace

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

const PlanHeader& Engine::header() const { return impl_->header; }
const std::vector<IOTensor>& Engine::io_tensors() const { return impl_->io; }
const std::vector<OptimizationProfile>& Engine::profiles() const { return impl_->profiles; }
const std::vector<LayerInfo>& Engine::layers() const { return impl_->layers; }
size_t Engine::weights_bytes() const { return impl_->weights_bytes; }
bool Engine::fp16() const { return impl_->build.precision.fp16; }
bool Engine::bf16() const { return impl_->build.precision.bf16; }
bool Engine::tf32() const { return impl_->build.precision.tf32; }
bool Engine::fp8() const { return impl_->build.precision.fp8; }
bool Engine::int8() const { return impl_->build.precision.int8; }
int Engine::opt_level() const { return impl_->build.opt_level; }
uint64_t Engine::workspace_limit() const { return impl_->build.workspace_limit; }
int Engine::max_aux_streams() const { return impl_->build.max_aux_streams; }
const Engine::Impl& engine_impl(const Engine& engine) { return *engine.impl_; }
std::vector<DeviceLayerInfo> Engine::device_layers() const {
  return impl_->gpu ? gpu::describe_layers(*impl_->gpu) : std::vector<DeviceLayerInfo>{};
}
const std::vector<Engine::LoadPhase>& Engine::load_phases() const { return impl_->load_phases; }
int Engine::weights_uploaded_packed() const { return impl_->gpu ? gpu::load_times(*impl_->gpu).packed_hits : 0; }
std::vector<std::vector<Shape>> Engine::tuned_shapes() const { return impl_->tuned_shapes; }
std::vector<std::pair<std::vector<Shape>, double>> Engine::shape_setup_ms() const {
  return impl_->gpu ? gpu::shape_setup_ms(*impl_->gpu) : std::vector<std::pair<std::vector<Shape>, double>>{};
}
int Engine::tactics_restored() const { return impl_->gpu ? gpu::load_times(*impl_->gpu).restored : 0; }
int Engine::tactics_rebuilt() const { return impl_->gpu ? gpu::load_times(*impl_->gpu).rebuilt : 0; }
DeviceMemoryInfo Engine::device_memory() const { return impl_->gpu ? gpu::memory(*impl_->gpu) : DeviceMemoryInfo{}; }

const IOTensor* Engine::find_io(const std::string& name) const {
  for (const IOTensor& t : impl_->io)
    if (t.desc.name == name) return &t;
  return nullptr;
}

std::unique_ptr<ExecutionContext> Engine::create_execution_context() const {
  return std::unique_ptr<ExecutionContext>(new ExecutionContext(shared_from_this()));
}

StatusOr<std::shared_ptr<Engine>> Runtime::deserialize_engine(const uint8_t* data, size_t size, const Logger& logger) {
  return deserialize(data, size, nullptr, logger);
}

StatusOr<std::shared_ptr<Engine>> Runtime::deserialize(const uint8_t* data, size_t size, std::shared_ptr<void> owner,
                                                       const Logger& logger) {
  const auto t0 = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(plan::Plan p, plan::read_plan(data, size, std::move(owner)));
  const double parse_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // The first CUDA call of a process (checking the target probes the device) initializes the
  // driver: counted in the "device" phase with the context and library loading.
  const auto tc = std::chrono::steady_clock::now();
  KILN_RETURN_IF_ERROR(check_target(p.header.target));
  const double driver_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - tc).count();
  auto impl = std::make_unique<Engine::Impl>();
  impl->header = p.header;
  impl->graph = std::move(p.graph);
  impl->profiles = std::move(p.profiles);
  impl->build = p.build;
  impl->weights_bytes = p.weights_bytes;
  const ir::Graph& g = impl->graph;
  std::string missing;
  // CUDA engines also need the CPU kernels: shapes are discovered by one reference run.
  if (!has_all_kernels(g, cpu::KernelRegistry::get(), &missing))
    return unsupported(missing + ": the plan's tactic '" + kCpuReferenceTactic + "' has no kernel in this build");
  const bool cuda = p.header.target.backend == PlanBackend::kCuda;
  std::map<std::string, uint64_t> packed_bytes_by_layer;  // LayerInfo::packed_weight_bytes
  if (cuda) {
    if (impl->profiles.empty()) return invalid_plan("a CUDA plan needs an optimization profile");
    std::vector<Shape> opt;
    for (ir::ValueId v : g.inputs) {
      const ShapeRange* r = impl->profiles[0].find(g.value(v).name);
      if (!r) return invalid_plan("profile 0 has no range for input '" + g.value(v).name + "'");
      opt.push_back(r->opt);
    }
    gpu::GpuSettings settings;
    settings.precision = p.build.precision;
    settings.workspace_limit = p.build.workspace_limit;
    settings.tactic_data = std::move(p.tactic_data);
    for (const auto& [key, b] : p.packed_weights) packed_bytes_by_layer[plan::Plan::packed_key_layer(key)] += b.bytes;
    impl->tuned_shapes.push_back(opt);
    for (size_t i = 1; i < p.shape_tactics.size(); ++i) impl->tuned_shapes.push_back(p.shape_tactics[i].shapes);
    settings.packed_weights = std::move(p.packed_weights);
    settings.elided_constants = std::move(p.elided_constants);
    settings.shape_tactics = std::move(p.shape_tactics);
    settings.max_aux_streams = p.build.max_aux_streams;
    settings.logger = logger;
    KILN_ASSIGN_OR_RETURN(impl->gpu, gpu::create_engine(g, opt, p.tactics, settings));
  }
  impl->load_phases.push_back({"parse", parse_ms});
  if (impl->gpu) {
    const gpu::GpuLoadTimes t = gpu::load_times(*impl->gpu);
    impl->load_phases.push_back({"device", driver_ms + t.device_ms});
    impl->load_phases.push_back({"shapes", t.shapes_ms});
    impl->load_phases.push_back({"lower", t.lower_ms});
    impl->load_phases.push_back({"weights", t.weights_ms});
    impl->load_phases.push_back({"tactics", t.tactics_ms});
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const std::string& tactic = p.tactics[i].name;
    const bool in_place = n.op == ir::OpKind::kConcat && tactic == kCpuConcatInPlaceTactic;
    if (!cuda && tactic != kCpuReferenceTactic && !in_place)
      return invalid_plan("layer " + std::to_string(i) + ", " + n.describe() + ": unknown tactic '" + tactic +
                          "' (this build runs '" + kCpuReferenceTactic + "', and '" + kCpuConcatInPlaceTactic +
                          "' for a Concat)");
    LayerInfo l;
    l.name = n.name;
    l.op = ir::op_name(n.op);
    l.origin = n.origin;
    for (ir::ValueId v : n.inputs) l.inputs.push_back(describe_value(g, v));
    for (ir::ValueId v : n.outputs) l.outputs.push_back(describe_value(g, v));
    l.tactic = tactic;
    l.tactic_id = p.tactics[i].id;
    l.tuned_ms = p.tactics[i].tuned_ms;
    l.precision = n.attr_string("precision", "");
    l.precision_constrained = n.attr_int("precision_constrained", 0) != 0;
    if ((n.op == ir::OpKind::kQuantLinear || n.op == ir::OpKind::kQuantConv) && n.inputs.size() >= 3)
      l.quantization = quant_linear_summary(g, n);
    if (auto b = ir::qdq_blocked(n)) l.unfused_qdq = UnfusedQdq{b->rule, b->detail, b->nodes, b->type};
    auto pb = packed_bytes_by_layer.find(n.name);
    if (pb != packed_bytes_by_layer.end()) l.packed_weight_bytes = pb->second;
    impl->layers.push_back(std::move(l));
  }
  for (ir::ValueId v : g.inputs) impl->io.push_back(IOTensor{describe_value(g, v), true});
  for (ir::ValueId v : g.outputs) impl->io.push_back(IOTensor{describe_value(g, v), false});
  return std::shared_ptr<Engine>(new Engine(std::move(impl)));
}

StatusOr<std::shared_ptr<Engine>> Runtime::deserialize_engine(const std::vector<uint8_t>& plan, const Logger& logger) {
  return deserialize_engine(plan.data(), plan.size(), logger);
}

StatusOr<std::shared_ptr<Engine>> Runtime::load_engine(const std::string& path, const Logger& logger) {
  const auto t0 = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(const int64_t size, io::check_input_file(path, "plan file"));
  // One 64-byte aligned buffer that the engine's constants keep pointing into (no weights copy).
  // A large plan (an LLM's weights) gets its own huge-page mapping: a 16 GB read then faults in
  // 2 MiB pages, not 4 KiB ones (core/host_memory.h).
  const size_t alloc = (static_cast<size_t>(size) + 64) / 64 * 64;
  std::shared_ptr<void> buf;
  if (alloc >= static_cast<size_t>(kHugeAllocationBytes)) {
    buf = huge_buffer(alloc);
  } else {
    buf = std::shared_ptr<void>(std::aligned_alloc(64, alloc), [](void* q) { std::free(q); });
  }
  if (!buf) return Status(StatusCode::kOutOfMemory, "cannot allocate " + std::to_string(alloc) + " bytes for plan '" + path + "'");
  // Read in 64 MiB pieces on several threads (pread: no shared file position): a plan of GiBs in
  // the page cache comes in at several times one thread's copy rate.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return invalid_argument("plan file '" + path + "' cannot be opened: " + std::strerror(errno));
  constexpr int64_t kPiece = int64_t{64} << 20;
  std::atomic<int64_t> short_at{-1};
  std::atomic<int> read_errno{0};
  parallel_for((size + kPiece - 1) / kPiece, size >> 4, [&](int64_t b, int64_t e) {
    for (int64_t piece = b; piece < e; ++piece) {
      int64_t off = piece * kPiece;
      const int64_t end = std::min<int64_t>(size, off + kPiece);
      while (off < end) {
        const ssize_t got = ::pread(fd, static_cast<char*>(buf.get()) + off, static_cast<size_t>(end - off), off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
          if (got < 0) read_errno = errno;
          int64_t want = -1;
          short_at.compare_exchange_strong(want, off);
          return;
        }
        off += got;
      }
    }
  });
  ::close(fd);
  if (short_at.load() >= 0)
    return not_found("plan file '" + path + "': read failed at byte " + std::to_string(short_at.load()) + " of " +
                     std::to_string(size) + (read_errno.load() ? std::string(": ") + std::strerror(read_errno.load()) : ""));
  const double read_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const uint8_t* data = static_cast<const uint8_t*>(buf.get());
  auto e = deserialize(data, static_cast<size_t>(size), std::move(buf), logger);
  if (!e.ok()) return e.status().with_context("plan '" + path + "'");
  (*e)->impl_->load_phases.insert((*e)->impl_->load_phases.begin(), Engine::LoadPhase{"read", read_ms});
  return e;
}

}  // namespace kiln
