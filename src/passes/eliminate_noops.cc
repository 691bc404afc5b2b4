// Removes layers that compute nothing at inference time:
//   Identity(x) -> x
//   Dropout(x[, ratio, training_mode=false]) -> x        (mask output unused)
//   Cast<T>(x : T) -> x
// The consumers of the removed layer's output read its input directly.
#include "core/numerics.h"
#include "passes/passes.h"

namespace kiln::passes {

namespace {

bool is_noop(const ir::Graph& g, const ir::Node& n) {
  switch (n.op) {
    case ir::OpKind::kIdentity:
      return n.inputs.size() == 1 && n.inputs[0] != ir::kNoValue;
    case ir::OpKind::kDropout: {
      if (n.outputs.size() > 1 && n.outputs[1] != ir::kNoValue) return false;  // mask is read
      if (n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue) {
        const auto& t = g.value(n.inputs[2]).constant;
        if (!t || t->numel() != 1 || load_as_double(t->dtype(), t->raw(), 0) != 0) return false;
      }
      return true;  // inference: dropout is the identity whatever the opset's is_test says
    }
    case ir::OpKind::kCast: {
      const DataType in = g.value(n.inputs[0]).dtype;
      return in != DataType::kUndefined && g.value(n.outputs[0]).dtype == in;
    }
    default:
      return false;
  }
}

}  // namespace

Status eliminate_noops(ir::Graph& g, const PassOptions&) {
  for (auto& n : g.nodes) {
    if (n.removed || !is_noop(g, n)) continue;
    if (replace_all_uses(g, n.outputs[0], n.inputs[0])) n.removed = true;
  }
  return Status::Ok();
}

}  // namespace kiln::passes
