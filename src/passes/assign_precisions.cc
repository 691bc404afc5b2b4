// Precision assignment: the one decision of each layer's precision (the storage of its float
// outputs and of its weights), from the PrecisionConfig, the per-layer constraints and what the
// target's tactics support. The CUDA lowering and assign_layouts read the result; nothing
// downstream decides again (docs/decisions/0033-precision-as-data.md).
//
//   rule(n)     = the last --layer-precisions rule matching n's name or origin, if any
//   decided(n)  = rule(n)                      if rule(n) exists   (error unless support(n, rule(n)))
//               = config.float_precision()     if support(n, it)   (fp16 if --fp16, bf16 if --bf16, else fp32)
//               = fp32                         otherwise
//   n.attrs["precision"] = token(decided(n));  n.attrs["precision_constrained"] = 1 iff rule(n) exists
//
// Integer outputs keep their dtype whatever the decision (it applies to float tensors). The CPU
// target records the decision and computes in float32.
#include <string>
#include <vector>

#include "kiln/precision.h"
#include "passes/passes.h"

namespace kiln::passes {

bool float_storage_support(const ir::Graph&, const ir::Node&, DataType precision) {
  return precision == DataType::kFloat32 || precision == DataType::kFloat16 || precision == DataType::kBFloat16;
}

Status assign_precisions(ir::Graph& g, const PrecisionConfig& config, PrecisionSupport support) {
  KILN_RETURN_IF_ERROR(config.check());
  // Decisions are made here only: drop whatever a node carried in (an imported attribute).
  for (ir::Node& n : g.nodes) {
    n.attrs.erase("precision");
    n.attrs.erase("precision_constrained");
  }
  KILN_RETURN_IF_ERROR(apply_layer_precisions(g, config.layer_precisions));
  const DataType dflt = config.float_precision();
  std::vector<std::string> refused;
  for (ir::Node& n : g.nodes) {
    if (n.removed) continue;
    if (n.has_attr("precision_constrained")) {
      const DataType want = ir::node_precision(n);
      if (!support(g, n, want))
        refused.push_back(n.describe() + ": constrained to " + precision_token(want) +
                          ", which this target's tactics do not support for it");
      continue;
    }
    const DataType d = support(g, n, dflt) ? dflt : DataType::kFloat32;
    n.attrs["precision"] = ir::Attribute::of_string(precision_token(d));
  }
  if (refused.empty()) return Status::Ok();
  std::string msg = "layer precisions:";
  for (const auto& r : refused) msg += "\n  " + r;
  return invalid_argument(msg);
}

}  // namespace kiln::passes
