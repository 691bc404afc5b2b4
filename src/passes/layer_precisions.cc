// Per-layer precision constraints (BuilderConfig::layer_precisions; TensorRT's
// ILayer::setPrecision under kOBEY_PRECISION_CONSTRAINTS, trtexec --layerPrecisions): parsing
// the CLI spec and marking the optimized graph's constrained nodes with the "precision" attribute;
// assign_precisions.cc decides the others, and the CUDA lowering (src/backends/cuda/gpu_model.cc)
// and assign_layouts read the result.
#include <string>
#include <vector>

#include "kiln/precision.h"
#include "passes/passes.h"

namespace kiln::passes {

// '*' matches any run of characters (possibly empty); everything else matches itself.
bool glob_match(const std::string& pattern, const std::string& name) {
  size_t p = 0, n = 0, star = std::string::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// BuilderConfig::layer_precisions -> the "precision" attribute ("fp32", "fp16", "bf16") of every
// matching layer of the optimized graph. A layer matches by its own name or the name of any
// node fused into it (Node::origin); later rules override earlier ones. Errors list every rule
// with an unsupported precision or no matching layer, at once.
Status apply_layer_precisions(ir::Graph& g, const std::vector<LayerPrecision>& rules) {
  std::vector<std::string> problems;
  std::vector<int> hits(rules.size(), 0);
  for (size_t r = 0; r < rules.size(); ++r) {
    const DataType t = rules[r].precision;
    if (*precision_token(t) == '\0')
      problems.push_back("'" + rules[r].pattern + "': precision " + dtype_name(t) +
                         " (per-layer precisions are fp32, fp16 and bf16)");
  }
  if (problems.empty()) {
    for (ir::Node& n : g.nodes) {
      if (n.removed) continue;
      for (size_t r = 0; r < rules.size(); ++r) {
        bool match = glob_match(rules[r].pattern, n.name);
        for (const std::string& o : n.origin) match = match || glob_match(rules[r].pattern, o);
        if (!match) continue;
        ++hits[r];
        ir::Attribute a;
        a.kind = ir::Attribute::Kind::kString;
        a.s = precision_token(rules[r].precision);
        n.attrs["precision"] = a;
        n.attrs["precision_constrained"] = ir::Attribute::of_int(1);
      }
    }
    for (size_t r = 0; r < rules.size(); ++r)
      if (hits[r] == 0)
        problems.push_back("'" + rules[r].pattern +
                           "' matches no layer (names are the ONNX node names; kiln inspect lists the plan's layers)");
  }
  if (problems.empty()) return Status::Ok();
  std::string msg = "layer precisions:";
  for (const auto& p : problems) msg += "\n  " + p;
  return invalid_argument(msg);
}

StatusOr<std::vector<LayerPrecision>> parse_layer_precisions(const std::string& spec) {
  std::vector<LayerPrecision> out;
  if (spec.empty()) return out;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(start, comma - start);
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size())
      return invalid_argument("--layer-precisions '" + item + "': expected PATTERN:PRECISION (e.g. '/fc/*:fp32')");
    const std::string prec = item.substr(colon + 1);
    LayerPrecision lp;
    lp.pattern = item.substr(0, colon);
    lp.precision = precision_from_token(prec);
    if (lp.precision == DataType::kUndefined)
      return invalid_argument("--layer-precisions '" + item + "': precision '" + prec + "', expected fp32, fp16 or bf16");
    out.push_back(lp);
    start = comma + 1;
  }
  return out;
}

}  // namespace kiln::passes
