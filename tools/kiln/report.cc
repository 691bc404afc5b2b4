// Helpers every `kiln` subcommand shares: the error printer and shape-range text.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "onnx/importer.h"
#include "plan/plan_format.h"
#include "tools/kiln/commands.h"

namespace kiln::cli {

namespace {
thread_local Status g_last_error;
}

int report_error(const char* command, const Status& s) {
  std::fprintf(stderr, "kiln %s: %s\n", command, s.to_string().c_str());
  g_last_error = s;
  return kExitError;
}

StatusOr<std::shared_ptr<Engine>> load_plan(const std::string& path, const Logger& logger) {
  auto e = Runtime::load_engine(path, logger);
  if (e.ok() || e.status().code() != StatusCode::kInvalidPlan) return e;
  // Not a plan: say so when the file is an ONNX model (read only on this error path).
  std::ifstream f(path, std::ios::binary);
  char magic[plan::kMagicBytes] = {};
  if (!f.read(magic, sizeof magic) || std::memcmp(magic, plan::kMagic, sizeof magic) == 0) return e;
  f.seekg(0);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (!onnx_import::looks_like_onnx(bytes)) return e;
  return invalid_argument("'" + path + "' is an ONNX model, not a Kiln plan (build a plan first: kiln build " + path +
                          " -o model.plan)");
}

const Status& last_reported_error() { return g_last_error; }

std::string range_string(const ShapeRange& r) {
  if (r.min == r.max) return shape_str(r.min);
  return shape_str(r.min) + ".." + shape_str(r.max) + " (opt " + shape_str(r.opt) + ")";
}

bool is_linear_layer_op(const std::string& op) {
  return op == "Conv" || op == "FusedConv" || op == "ConvTranspose" || op == "Gemm" || op == "MatMul" ||
         op == "MatMulBias" || op == "QuantLinear" || op == "QuantConv";
}

std::string quant_precision_summary(const Engine& e) {
  int int8 = 0, fp8 = 0, kept = 0, eight_bit_out = 0;
  bool any_unfused = false;
  std::map<std::string, int> reasons;  // rule -> layers
  std::set<std::string> float_precisions;
  for (const LayerInfo& l : e.layers()) {
    if (l.op == "QuantLinear" || l.op == "QuantConv") {
      const DataType w = l.inputs.size() > 1 ? l.inputs[1].dtype : DataType::kUndefined;
      (w == DataType::kInt8 ? int8 : fp8) += 1;
      const DataType y = l.outputs.empty() ? DataType::kUndefined : l.outputs[0].dtype;
      eight_bit_out += y == DataType::kInt8 || y == DataType::kFloat8E4M3FN;
      continue;
    }
    if (!is_linear_layer_op(l.op)) continue;
    ++kept;
    float_precisions.insert(l.precision.empty() ? "FP32" : (l.precision == "fp16" ? "FP16" : l.precision == "bf16" ? "BF16" : "FP32"));
    if (l.unfused_qdq) {
      any_unfused = true;
      ++reasons[l.unfused_qdq->rule];
    } else {
      ++reasons["no Q/DQ at the layer's inputs"];
    }
  }
  if (int8 + fp8 == 0 && !any_unfused) return "";
  std::string fl;
  for (const std::string& p : float_precisions) fl += (fl.empty() ? "" : "/") + p;
  if (fl == "FP32/FP16" || fl == "FP16/FP32") fl = "FP16/FP32";
  std::string s = std::to_string(int8) + " layer" + (int8 == 1 ? "" : "s") + " INT8, " + std::to_string(fp8) + " FP8, " +
                  std::to_string(kept) + " " + (fl.empty() ? "FP32" : fl);
  // QuantConvs writing the next layer's 8-bit input (docs/decisions/0081).
  if (eight_bit_out) s += ", " + std::to_string(eight_bit_out) + " with 8-bit outputs";
  if (!reasons.empty()) {
    std::string r;
    for (const auto& [rule, count] : reasons) r += (r.empty() ? "" : "; ") + std::to_string(count) + " " + rule;
    s += " (reasons: " + r + ")";
  }
  return s;
}

}  // namespace kiln::cli
