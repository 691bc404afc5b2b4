// `kiln compare PLAN MODEL.onnx`: runs the plan and the CPU reference interpreter on the
// original ONNX model with the same inputs, prints per-output accuracy metrics, and exits 1
// when any output is outside |a - r| <= atol + rtol * |r|. compare_engine is the measurement
// (shared with the Python package's kiln.compare), cmd_compare the command around it.
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "onnx/importer.h"
#include "backends/cpu/interpreter.h"
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
  const bool all_ok = j["ok"].get<bool>();
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!f) return report_error("compare", not_found("cannot write '" + o.json + "'"));
  }
  std::printf("%s (atol %g, rtol %g)\n", all_ok ? "PASS" : "FAIL", o.atol, o.rtol);
  return all_ok ? kExitOk : kExitMismatch;
}

}  // namespace kiln::cli
