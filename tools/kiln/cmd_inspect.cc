// `kiln inspect PLAN [--json] [--graph FILE]`: the plan's header, io tensors, profiles, every layer (op,
// ONNX nodes absorbed, inputs/outputs with shapes and dtypes, tactic) and weight bytes; for CUDA
// plans also the device layers (tactic, tuned ms, workspace, stream, fallbacks and why) and the
// device memory (activation arena vs the sum of all activations, weights, workspace, aux streams).
#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "backends/kernel.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/graph_dot.h"

namespace kiln::cli {
namespace {

nlohmann::json desc_json(const TensorDesc& d) {
  nlohmann::json dims = nlohmann::json::array();
  for (size_t i = 0; i < d.dims.size(); ++i) {
    if (d.dims[i] >= 0) dims.push_back(d.dims[i]);
    else if (i < d.symbols.size() && !d.symbols[i].empty()) dims.push_back(d.symbols[i]);
    else dims.push_back(nullptr);
  }
  nlohmann::json j = {{"name", d.name}, {"dtype", dtype_name(d.dtype)}, {"shape", d.rank_known ? dims : nlohmann::json(nullptr)}};
  if (d.quant) {
    const QuantParams& q = *d.quant;
    j["quant"] = {{"type", dtype_name(q.type)}, {"granularity", quant_granularity_name(q.granularity)},
                  {"axis", q.axis}, {"block_size", q.block_size}, {"scale_shape", q.scale_shape},
                  {"scale", q.scale}, {"zero_point", q.zero_point}, {"saturate", q.saturate}};
  }
  return j;
}

}  // namespace

nlohmann::json engine_json(const Engine& e) {
  nlohmann::json j;
  const PlanHeader& h = e.header();
  char checksum[24];
  std::snprintf(checksum, sizeof checksum, "0x%016llx", static_cast<unsigned long long>(h.checksum));
  j["format_version"] = h.format_version;
  j["kiln_version"] = h.kiln_version;
  j["target"] = {{"backend", h.target.backend == PlanBackend::kCpu ? "cpu" : "cuda"},
                 {"compute_capability", std::to_string(h.target.cc_major) + "." + std::to_string(h.target.cc_minor)},
                 {"cudnn_version", h.target.cudnn_version},
                 {"cublaslt_version", h.target.cublaslt_version}};
  j["file_bytes"] = h.file_bytes;
  j["checksum"] = checksum;
  j["build"] = {{"fp16", e.fp16()}, {"bf16", e.bf16()}, {"tf32", e.tf32()}, {"fp8", e.fp8()}, {"int8", e.int8()},
                {"opt_level", e.opt_level()}, {"workspace_limit_bytes", e.workspace_limit()},
                {"max_aux_streams", e.max_aux_streams()}};
  j["inputs"] = nlohmann::json::array();
  j["outputs"] = nlohmann::json::array();
  for (const IOTensor& io : e.io_tensors()) j[io.is_input ? "inputs" : "outputs"].push_back(desc_json(io.desc));
  j["profiles"] = nlohmann::json::array();
  for (const OptimizationProfile& p : e.profiles()) {
    nlohmann::json pj = nlohmann::json::object();
    for (const auto& [name, r] : p.ranges()) pj[name] = {{"min", r.min}, {"opt", r.opt}, {"max", r.max}};
    j["profiles"].push_back(pj);
  }
  j["layers"] = nlohmann::json::array();
  for (const LayerInfo& l : e.layers()) {
    nlohmann::json lj = {{"name", l.name}, {"op", l.op}, {"origin", l.origin}, {"tactic", l.tactic}};
    if (l.tactic_id != kNoTactic) {
      lj["tactic_id"] = l.tactic_id;
      lj["tactic_source"] = tactic_source_name(tactic_id_source(l.tactic_id));
      lj["tuned_ms"] = l.tuned_ms;
    }
    if (!l.precision.empty()) lj["precision"] = l.precision;
    if (l.precision_constrained) lj["precision_constrained"] = true;
    if (l.packed_weight_bytes) lj["packed_weight_bytes"] = l.packed_weight_bytes;
    if (!l.quantization.empty()) lj["quantization"] = l.quantization;
    if (l.unfused_qdq)
      lj["unfused_qdq"] = {{"rule", l.unfused_qdq->rule}, {"detail", l.unfused_qdq->detail},
                           {"nodes", l.unfused_qdq->nodes}, {"type", l.unfused_qdq->type}};
    lj["inputs"] = nlohmann::json::array();
    for (const TensorDesc& d : l.inputs) lj["inputs"].push_back(d.name.empty() ? nlohmann::json(nullptr) : desc_json(d));
    lj["outputs"] = nlohmann::json::array();
    for (const TensorDesc& d : l.outputs) lj["outputs"].push_back(d.name.empty() ? nlohmann::json(nullptr) : desc_json(d));
    j["layers"].push_back(lj);
  }
  const std::string quant = quant_precision_summary(e);
  if (!quant.empty()) j["quantization_summary"] = quant;
  j["weights_bytes"] = e.weights_bytes();
  if (e.header().target.backend == PlanBackend::kCuda) {
    j["tuned_shapes"] = e.tuned_shapes();
    j["weights_uploaded_packed"] = e.weights_uploaded_packed();
  }
  const std::vector<DeviceLayerInfo> dl = e.device_layers();
  if (!dl.empty()) {
    j["device_layers"] = nlohmann::json::array();
    for (const DeviceLayerInfo& l : dl)
      j["device_layers"].push_back({{"name", l.name}, {"op", l.op}, {"tactic", l.tactic},
                                    {"tactic_id", l.tactic_id == kNoTactic ? nlohmann::json(nullptr) : nlohmann::json(l.tactic_id)},
                                    {"tuned_ms", l.tuned_ms},
                                    {"workspace_bytes", l.workspace_bytes}, {"stream", l.stream},
                                    {"fallback", l.fallback.empty() ? nlohmann::json(nullptr) : nlohmann::json(l.fallback)}});
    const DeviceMemoryInfo m = e.device_memory();
    j["device_memory"] = {{"arena_bytes", m.arena_bytes}, {"activation_bytes_sum", m.activation_bytes_sum},
                          {"weight_bytes", m.weight_bytes}, {"workspace_bytes", m.workspace_bytes},
                          {"aux_streams", m.aux_streams}};
  }
  return j;
}

namespace {

// " [id 0x01000001 cudnn#1]" for a tactic id, "" for none.
std::string tactic_id_text(uint32_t id) {
  if (id == kNoTactic) return "";
  char b[64];
  std::snprintf(b, sizeof b, " [id 0x%08x %s#%u]", id, tactic_source_name(tactic_id_source(id)), tactic_id_variant(id));
  return b;
}

std::string desc_text(const TensorDesc& d) {
  if (d.name.empty()) return "(none)";
  return d.name + " " + dtype_name(d.dtype) + " " + d.shape_string() +
         (d.quant ? " quant " + quant_params_summary(*d.quant) : "");
}

}  // namespace

int cmd_inspect(const InspectOptions& o) {
  const auto load0 = std::chrono::steady_clock::now();
  auto engine = load_plan(o.plan, stderr_logger(o.verbose));
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load0).count();
  if (!engine.ok()) return report_error("inspect", engine.status());
  const Engine& e = **engine;
  if (!o.graph.empty()) {
    Status s = write_graph(e, o.graph);
    if (!s.ok()) return report_error("inspect", s);
    std::fprintf(stderr, "wrote the layer graph to %s\n", o.graph.c_str());
  }
  if (o.json) {
    nlohmann::json j = engine_json(e);
    j["load_ms"] = load_ms;
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  const PlanHeader& h = e.header();
  std::printf("Plan '%s': %llu bytes, format version %u, written by kiln %s, checksum 0x%016llx\n", o.plan.c_str(),
              static_cast<unsigned long long>(h.file_bytes), h.format_version, h.kiln_version.c_str(),
              static_cast<unsigned long long>(h.checksum));
  std::printf("Target: %s\n", h.target.to_string().c_str());
  std::printf("Load time: %.2f ms (", load_ms);
  for (size_t i = 0; i < e.load_phases().size(); ++i)
    std::printf("%s%s %.1f", i ? ", " : "", e.load_phases()[i].name.c_str(), e.load_phases()[i].ms);
  std::printf(")\n");
  std::printf("Build: fp32%s%s%s%s%s, opt level %d, workspace %s, max aux streams %s\n", e.tf32() ? " tf32" : "",
              e.fp16() ? " fp16" : "", e.bf16() ? " bf16" : "", e.fp8() ? " fp8" : "", e.int8() ? " int8" : "",
              e.opt_level(), e.workspace_limit() ? (std::to_string(e.workspace_limit()) + " bytes").c_str() : "unlimited",
              e.max_aux_streams() < 0 ? "auto" : std::to_string(e.max_aux_streams()).c_str());
  std::printf("Inputs:\n");
  for (const IOTensor& io : e.io_tensors())
    if (io.is_input) std::printf("  %s\n", desc_text(io.desc).c_str());
  std::printf("Outputs:\n");
  for (const IOTensor& io : e.io_tensors())
    if (!io.is_input) std::printf("  %s\n", desc_text(io.desc).c_str());
  for (size_t p = 0; p < e.profiles().size(); ++p) {
    std::printf("Profile %zu:\n", p);
    for (const auto& [name, r] : e.profiles()[p].ranges())
      std::printf("  %s: min %s opt %s max %s\n", name.c_str(), shape_str(r.min).c_str(), shape_str(r.opt).c_str(),
                  shape_str(r.max).c_str());
  }
  std::printf("Layers (%zu):\n", e.layers().size());
  for (size_t i = 0; i < e.layers().size(); ++i) {
    const LayerInfo& l = e.layers()[i];
    std::string origin;
    for (const auto& n : l.origin) origin += (origin.empty() ? "" : ", ") + n;
    const std::string precision = l.precision.empty() ? ""
                                  : ", precision " + l.precision + (l.precision_constrained ? " (constrained)" : "");
    std::printf("  [%zu] %s (%s) tactic %s%s, absorbs [%s]%s%s\n", i, l.name.c_str(), l.op.c_str(), l.tactic.c_str(),
                tactic_id_text(l.tactic_id).c_str(), origin.c_str(), precision.c_str(),
                l.packed_weight_bytes ? (", packed weights " + std::to_string(l.packed_weight_bytes) + " bytes").c_str() : "");
    if (!l.quantization.empty()) std::printf("        quant %s\n", l.quantization.c_str());
    if (l.unfused_qdq)
      std::printf("        unfused Q/DQ %s (%s): %s%s\n", l.unfused_qdq->nodes.c_str(), l.unfused_qdq->type.c_str(),
                  l.unfused_qdq->rule.c_str(), l.unfused_qdq->detail.empty() ? "" : (" (" + l.unfused_qdq->detail + ")").c_str());
    for (const TensorDesc& d : l.inputs) std::printf("        in  %s\n", desc_text(d).c_str());
    for (const TensorDesc& d : l.outputs) std::printf("        out %s\n", desc_text(d).c_str());
  }
  std::vector<const LayerInfo*> unfused;
  for (const LayerInfo& l : e.layers())
    if (l.unfused_qdq) unfused.push_back(&l);
  const std::string quant = quant_precision_summary(e);
  if (!quant.empty()) {
    std::printf("Quantization: %s\n", quant.c_str());
    std::printf("Unfused Q/DQ pairs (%zu):\n", unfused.size());
    for (const LayerInfo* l : unfused)
      std::printf("  %s -> %s (%s): %s%s\n", l->unfused_qdq->nodes.c_str(), l->name.c_str(), l->op.c_str(),
                  l->unfused_qdq->rule.c_str(), l->unfused_qdq->detail.empty() ? "" : (" (" + l->unfused_qdq->detail + ")").c_str());
  }
  std::printf("Weights: %zu bytes\n", e.weights_bytes());
  if (e.header().target.backend == PlanBackend::kCuda) {
    std::string sets;
    for (const auto& ss : e.tuned_shapes()) {
      std::string one;
      for (const Shape& sh : ss) one += (one.empty() ? "" : " ") + shape_str(sh);
      sets += (sets.empty() ? "" : ", ") + one;
    }
    std::printf("Tactics tuned at: %s; %d weights uploaded as packed in the plan\n", sets.c_str(),
                e.weights_uploaded_packed());
  }
  const std::vector<DeviceLayerInfo> dl = e.device_layers();
  if (!dl.empty()) {
    std::printf("Device layers (%zu, as the GPU runs them at the opt shapes):\n", dl.size());
    double tuned_sum = 0;
    size_t fallbacks = 0;
    const int aux_streams = e.device_memory().aux_streams;  // streams shown only when there are several
    for (size_t i = 0; i < dl.size(); ++i) {
      const DeviceLayerInfo& l = dl[i];
      std::string extra;
      if (l.tuned_ms > 0) {
        char b[48];
        std::snprintf(b, sizeof b, ", tuned %.4f ms", l.tuned_ms);
        extra += b;
        tuned_sum += l.tuned_ms;
      }
      if (l.workspace_bytes) extra += ", workspace " + std::to_string(l.workspace_bytes) + " bytes";
      if (aux_streams > 0) extra += ", stream " + std::to_string(l.stream);
      std::printf("  [%zu] %s (%s) %s%s%s\n", i, l.name.c_str(), l.op.c_str(), l.tactic.c_str(),
                  tactic_id_text(l.tactic_id).c_str(), extra.c_str());
      if (!l.fallback.empty()) {
        std::printf("        FALLBACK: %s\n", l.fallback.c_str());
        ++fallbacks;
      }
    }
    std::printf("  sum of tuned times %.3f ms; %zu layer(s) fell back to a slower path\n", tuned_sum, fallbacks);
    const DeviceMemoryInfo m = e.device_memory();
    const double saved = m.activation_bytes_sum ? 100.0 * (1.0 - static_cast<double>(m.arena_bytes) /
                                                                  static_cast<double>(m.activation_bytes_sum))
                                                : 0.0;
    std::printf("Device memory: activation arena %zu bytes (all activations %zu bytes: reuse saves %.0f%%), "
                "weights %zu bytes, workspace %zu bytes\n",
                m.arena_bytes, m.activation_bytes_sum, saved, m.weight_bytes, m.workspace_bytes);
    std::printf("Streams: the caller's + %d aux stream(s) for independent branches\n", m.aux_streams);
  }
  return kExitOk;
}

}  // namespace kiln::cli
