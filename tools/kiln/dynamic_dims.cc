// fill_dynamic_dims (dynamic_dims.h).
#include "tools/kiln/dynamic_dims.h"

#include "core/tensor.h"

namespace kiln::cli {

std::vector<std::string> fill_dynamic_dims(const ir::Graph& g, BuilderConfig* config) {
  std::vector<std::string> warnings;
  for (ir::ValueId vid : g.inputs) {
    const ir::Value& v = g.value(vid);
    if (!v.shape) continue;
    Shape ones;
    bool dynamic = false;
    for (const ir::Dim& d : *v.shape) {
      dynamic |= !d.is_known();
      ones.push_back(d.is_known() ? d.value : 1);
    }
    if (!dynamic) continue;
    if (config->profiles.empty()) config->profiles.emplace_back();
    bool filled = false;
    for (OptimizationProfile& p : config->profiles) {
      if (p.find(v.name)) continue;
      if (!p.set_dimensions(v.name, ones, ones, ones).ok()) continue;  // dims >= 0 by construction
      filled = true;
    }
    if (filled)
      warnings.push_back("input '" + v.name + "' has dynamic dims " + ir::sym_shape_str(*v.shape) +
                         " and no shapes were given: building with " + shape_str(ones) + " (set its shapes: --shapes " +
                         v.name + ":DIMS or --min/--opt/--max-shapes)");
  }
  return warnings;
}

}  // namespace kiln::cli
