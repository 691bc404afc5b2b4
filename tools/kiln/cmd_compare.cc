// `kiln compare PLAN MODEL.onnx`: runs the plan and the CPU reference interpreter on the
// original ONNX model with the same inputs, prints per-output accuracy metrics, and exits 1
// when any output is outside |a - r| <= atol + rtol * |r|. compare_engine is the measurement
// (shared with the Python package's kiln.compare), cmd_compare the command around it.
// `--per-layer` (compare_layers, docs/decisions/0062) runs the plan's own layer graph on the CPU
// reference kernels with every layer output observed and compares each output that is also a
// tensor of the ONNX model with the model's FP32 run, in execution order; the first layer
// outside --tolerance is named with the ONNX nodes it absorbed (Polygraphy's `--mark all`).
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "onnx/importer.h"
#include "backends/cpu/interpreter.h"
#include "runtime/engine_impl.h"
#include "core/numerics.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/metrics.h"
#include "tools/kiln/tensors.h"

namespace kiln::cli {

StatusOr<nlohmann::json> compare_engine(const Engine& engine, const ir::Graph& reference,
                                        const std::vector<std::pair<std::string, Tensor>>& inputs,
                                        const std::map<std::string, Shape>& shapes, int top_k, double atol, double rtol) {
  auto ctx = engine.create_execution_context();
  KILN_RETURN_IF_ERROR(bind_inputs(*ctx, inputs, shapes));
  Status s = ctx->execute();
  if (!s.ok()) return s.with_context("running the plan");

  // The reference takes its inputs in the model's order, matched by name.
  std::vector<Tensor> ref_inputs;
  for (ir::ValueId v : reference.inputs) {
    const std::string& name = reference.value(v).name;
    const Tensor* found = nullptr;
    for (const auto& [n, t] : inputs)
      if (n == name) found = &t;
    if (!found) return invalid_argument("the model's input '" + name + "' is not an input of the plan");
    ref_inputs.push_back(*found);
  }
  auto ref_out = interpret(reference, ref_inputs);
  if (!ref_out.ok()) return ref_out.status().with_context("running the reference");

  nlohmann::json j;
  j["atol"] = atol;
  j["rtol"] = rtol;
  j["outputs"] = nlohmann::json::array();
  bool all_ok = true;
  for (size_t k = 0; k < reference.outputs.size(); ++k) {
    const std::string& name = reference.value(reference.outputs[k]).name;
    KILN_ASSIGN_OR_RETURN(Tensor actual, ctx->output(name));
    const OutputMetrics m = compare_outputs(actual, (*ref_out)[k], top_k, atol, rtol);
    const bool ok = m.within_tolerance();
    all_ok &= ok;
    nlohmann::json oj = {{"name", name}, {"ok", ok}};
    if (!m.mismatch.empty()) {
      oj["mismatch"] = m.mismatch;
    } else {
      oj.update({{"dtype", dtype_name(actual.dtype())}, {"shape", actual.shape()}, {"max_abs_error", m.max_abs},
                 {"max_rel_error", m.max_rel}, {"normalized_error", m.normalized}, {"cosine", m.cosine},
                 {"top_k", m.top_k}, {"topk_agreement", m.topk_agreement}, {"violations", m.violations}});
    }
    j["outputs"].push_back(oj);
  }
  j["ok"] = all_ok;
  return j;
}

namespace {

// A QuantConv's 8-bit output (y_scale / y_zero_point / y_type; docs/decisions/0081) as the float
// values its codes stand for — DequantizeLinear, what the next layer reads — so it compares with
// the model's float tensor. Any other tensor is returned as is.
Tensor dequantized_layer_output(const ir::Node& n, const Tensor& t) {
  if (n.op != ir::OpKind::kQuantConv || !n.has_attr("y_type") ||
      (t.dtype() != DataType::kInt8 && t.dtype() != DataType::kFloat8E4M3FN))
    return t;
  const float s = n.attr_float("y_scale", 1.f);
  const float z = static_cast<float>(n.attr_int("y_zero_point", 0));
  Tensor f(DataType::kFloat32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i)
    f.data<float>()[i] = t.dtype() == DataType::kInt8 ? (static_cast<float>(t.data<int8_t>()[i]) - z) * s
                                                      : fp8e4m3fn_to_float(t.data<uint8_t>()[i]) * s;
  return f;
}

}  // namespace

StatusOr<nlohmann::json> compare_layers(const Engine& engine, const ir::Graph& reference,
                                        const std::vector<std::pair<std::string, Tensor>>& inputs, bool cosine,
                                        double bound) {
  if (engine.header().target.backend != PlanBackend::kCpu)
    return unsupported("--per-layer runs the plan's layers on the CPU reference kernels: build a CPU plan of the "
                       "model (kiln build --device cpu, same precision flags) and compare that");
  const ir::Graph& pg = engine_impl(engine).graph;
  auto ordered = [&inputs](const ir::Graph& g, const char* what) -> StatusOr<std::vector<Tensor>> {
    std::vector<Tensor> r;
    for (ir::ValueId v : g.inputs) {
      const std::string& name = g.value(v).name;
      const Tensor* found = nullptr;
      for (const auto& [n, t] : inputs)
        if (n == name) found = &t;
      if (!found) return invalid_argument(std::string("the ") + what + "'s input '" + name + "' is not an input of the plan");
      r.push_back(*found);
    }
    return r;
  };
  // The reference keeps only the tensors some plan layer writes under the same name.
  std::set<std::string> wanted;
  for (const ir::Node& n : pg.nodes)
    for (ir::ValueId v : n.outputs)
      if (v != ir::kNoValue) wanted.insert(pg.value(v).name);
  std::map<std::string, Tensor> ref;
  InterpreterOptions ro;
  ro.on_node = [&](const ir::Node& n, const std::vector<Tensor>& outs, double) {
    for (size_t i = 0; i < n.outputs.size() && i < outs.size(); ++i)
      if (n.outputs[i] != ir::kNoValue && wanted.count(reference.value(n.outputs[i]).name))
        ref[reference.value(n.outputs[i]).name] = outs[i];
  };
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> ref_in, ordered(reference, "model"));
  auto r = interpret(reference, ref_in, nullptr, ro);
  if (!r.ok()) return r.status().with_context("running the reference");

  nlohmann::json layers = nlohmann::json::array();
  nlohmann::json first = nullptr;
  int index = 0;
  InterpreterOptions po;
  po.on_node = [&](const ir::Node& n, const std::vector<Tensor>& outs, double) {
    const int i = index++;
    for (size_t k = 0; k < n.outputs.size() && k < outs.size(); ++k) {
      if (n.outputs[k] == ir::kNoValue) continue;
      const std::string& name = pg.value(n.outputs[k]).name;
      auto it = ref.find(name);
      if (it == ref.end()) continue;
      const OutputMetrics m = compare_outputs(dequantized_layer_output(n, outs[k]), it->second, 1, 0, 0);
      nlohmann::json lj = {{"index", i}, {"layer", n.name}, {"op", ir::op_name(n.op)}, {"tensor", name},
                           {"origin", n.origin}};
      bool ok;
      if (!m.mismatch.empty()) {
        lj["mismatch"] = m.mismatch;
        ok = false;
      } else {
        lj.update({{"cosine", m.cosine}, {"normalized_error", m.normalized}, {"max_rel_error", m.max_rel},
                   {"max_abs_error", m.max_abs}});
        ok = cosine ? m.cosine >= bound : m.normalized <= bound;  // NaN fails both
      }
      lj["ok"] = ok;
      if (!ok && first.is_null()) first = lj;
      layers.push_back(lj);
    }
  };
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> plan_in, ordered(pg, "plan"));
  auto p = interpret(pg, plan_in, nullptr, po);
  if (!p.ok()) return p.status().with_context("running the plan's layers on the CPU reference");
  return nlohmann::json{{"tolerance", {{"metric", cosine ? "cosine" : "normalized_error"}, {"bound", bound}}},
                        {"layers", layers}, {"first_failing", first}, {"ok", first.is_null()}};
}

namespace {

// Prints the --per-layer table and the verdict; returns whether every compared layer is within.
bool print_layers(const nlohmann::json& j) {
  const bool cosine = j["tolerance"]["metric"] == "cosine";
  const double bound = j["tolerance"]["bound"].get<double>();
  std::printf("Per layer (execution order; FP32 reference of the same ONNX tensor):\n");
  for (const nlohmann::json& l : j["layers"]) {
    const std::string head = "[" + std::to_string(l["index"].get<int>()) + "] " + l["layer"].get<std::string>() + " (" +
                             l["op"].get<std::string>() + ") -> " + l["tensor"].get<std::string>();
    if (l.contains("mismatch")) {
      std::printf("  %-48s FAIL %s\n", head.c_str(), l["mismatch"].get<std::string>().c_str());
      continue;
    }
    std::printf("  %-48s %s cosine %.6f  max|d|/max|ref| %.3g  max rel %.3g\n", head.c_str(),
                l["ok"].get<bool>() ? "ok  " : "FAIL", l["cosine"].get<double>(), l["normalized_error"].get<double>(),
                l["max_rel_error"].get<double>());
  }
  char b[32];
  std::snprintf(b, sizeof b, "%g", bound);
  const std::string tol = (cosine ? "cosine >= " : "max|d|/max|ref| <= ") + std::string(b);
  if (j["first_failing"].is_null()) {
    std::printf("every compared layer within %s (%zu layers)\n", tol.c_str(), j["layers"].size());
    return true;
  }
  const nlohmann::json& f = j["first_failing"];
  std::string origin;
  for (const auto& n : f["origin"]) origin += (origin.empty() ? "" : ", ") + n.get<std::string>();
  std::printf("first layer outside %s: [%d] %s (%s), output %s, ONNX nodes [%s]\n", tol.c_str(), f["index"].get<int>(),
              f["layer"].get<std::string>().c_str(), f["op"].get<std::string>().c_str(),
              f["tensor"].get<std::string>().c_str(), origin.c_str());
  return false;
}

}  // namespace

int cmd_compare(const CompareOptions& o) {
  Status s = o.validate();
  if (!s.ok()) return report_error("compare", s);
  auto parsed = o.inference.parse();
  if (!parsed.ok()) return report_error("compare", parsed.status());
  auto engine = load_plan(o.plan, stderr_logger(false));
  if (!engine.ok()) return report_error("compare", engine.status());
  auto reference = onnx_import::import_model_file(o.model);
  if (!reference.ok()) return report_error("compare", reference.status());
  auto inputs = prepare_inputs(**engine, parsed->files, parsed->shapes, parsed->seed);
  if (!inputs.ok()) return report_error("compare", inputs.status());
  auto result = compare_engine(**engine, *reference, *inputs, parsed->shapes, o.top_k, o.atol, o.rtol);
  if (!result.ok()) return report_error("compare", result.status());
  nlohmann::json per_layer;
  if (o.per_layer) {
    auto tol = o.layer_tolerance();
    auto lr = compare_layers(**engine, *reference, *inputs, tol->cosine, tol->bound);
    if (!lr.ok()) return report_error("compare", lr.status());
    per_layer = *lr;
  }

  nlohmann::json j;
  j["plan"] = o.plan;
  j["model"] = o.model;
  j.update(*result);
  for (const nlohmann::json& oj : j["outputs"]) {
    const std::string name = oj["name"].get<std::string>();
    const bool ok = oj["ok"].get<bool>();
    if (oj.contains("mismatch")) {
      std::printf("%-24s FAIL %s\n", name.c_str(), oj["mismatch"].get<std::string>().c_str());
      continue;
    }
    const int64_t violations = oj["violations"].get<int64_t>();
    std::printf("%-24s %s %s %s max|d| %.3g max rel %.3g max|d|/max|ref| %.3g cosine %.8f top-%d %.1f%%%s\n",
                name.c_str(), ok ? "ok  " : "FAIL", oj["dtype"].get<std::string>().c_str(),
                shape_str(oj["shape"].get<Shape>()).c_str(), oj["max_abs_error"].get<double>(),
                oj["max_rel_error"].get<double>(), oj["normalized_error"].get<double>(), oj["cosine"].get<double>(),
                oj["top_k"].get<int>(), 100.0 * oj["topk_agreement"].get<double>(),
                ok ? "" : (" (" + std::to_string(violations) + " elements outside tolerance)").c_str());
  }
  bool all_ok = j["ok"].get<bool>();
  if (o.per_layer) {
    all_ok &= print_layers(per_layer);
    j["per_layer"] = per_layer;
  }
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!f) return report_error("compare", not_found("cannot write '" + o.json + "'"));
  }
  std::printf("%s (atol %g, rtol %g%s)\n", all_ok ? "PASS" : "FAIL", o.atol, o.rtol,
              o.per_layer ? (", per layer " + o.tolerance).c_str() : "");
  return all_ok ? kExitOk : kExitMismatch;
}

}  // namespace kiln::cli
