// Views: Reshape, Flatten, Squeeze, Unsqueeze, Identity and (inference) Dropout change only the
// shape of a row-major tensor, so the output aliases the input's bytes — no layer, no copy. An
// NHWC input is reformatted to row-major first (the view's element order is NCHW's). The output
// keeps the input's storage type (integer token ids stay integers). Dropout must be in inference
// (training_mode absent, false, or a zero ratio; constants) and its optional mask is filled with
// true by one layer.
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_more.h"
#include "backends/cuda/layer_factory.h"
#include "core/numerics.h"

namespace kiln::cuda {

namespace {

// Dropout (opset 12+: ratio and training_mode inputs) is the identity unless training_mode is
// true and the ratio nonzero (then the CPU reference drops elements at random): both must be
// constants here, and training is refused.
Status check_inference_dropout(const LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.opset < 12 || n.inputs.size() < 3 || n.inputs[2] == ir::kNoValue) return Status::Ok();
  const auto& tm = ctx.graph().value(n.inputs[2]).constant;
  if (!tm || tm->numel() != 1) return unsupported(where + "training_mode must be a constant scalar on the GPU path");
  if (load_as_double(tm->dtype(), tm->raw(), 0) == 0.0) return Status::Ok();
  double ratio = 0.5;
  if (n.inputs.size() > 1 && n.inputs[1] != ir::kNoValue) {
    const auto& rc = ctx.graph().value(n.inputs[1]).constant;
    if (!rc || rc->numel() != 1) return unsupported(where + "training-mode Dropout with a non-constant ratio");
    ratio = load_as_double(rc->dtype(), rc->raw(), 0);
  }
  if (ratio != 0.0) return unsupported(where + "training-mode Dropout (random masks)");
  return Status::Ok();
}

}  // namespace

Status lower_view(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.op == ir::OpKind::kDropout) KILN_RETURN_IF_ERROR(check_inference_dropout(ctx, n, where));
  KILN_ASSIGN_OR_RETURN(int a, ctx.activation(n.inputs[0]));
  a = ctx.as_layout(a, false);
  const int out = ctx.new_value(ctx.graph().value(n.outputs[0]).name, ctx.shape(n.outputs[0]), ctx.value_type(a), false);
  ctx.alias(out, a);
  ctx.bind(n.outputs[0], out);
  // Dropout's mask: all true (bool since opset 10; before, ones of x's type).
  if (n.op == ir::OpKind::kDropout && n.outputs.size() > 1 && n.outputs[1] != ir::kNoValue) {
    const DataType mdt = ctx.dtype(n.outputs[1]);
    const StorageType mt = mdt == DataType::kBool ? StorageType::kBool : ctx.value_type(a);
    const Shape& ms = ctx.shape(n.outputs[1]);
    const int mask = ctx.new_value(ctx.graph().value(n.outputs[1]).name, ms, mt, false);
    const int64_t count = shape_numel(ms);
    ctx.add_layer(make_kernel_layer("Dropout", std::string("kiln.fill ") + storage_name(mt),
                                    [=](ExecState& s, const Layer& l) {
                                      return launch_fill(s.ptr(l.outs[0]), mt, count, 1.f, s.stream);
                                    }),
                  n.name + "_mask", {a}, {mask}, n.origin);
    ctx.bind(n.outputs[1], mask);
  }
  return Status::Ok();
}

}  // namespace kiln::cuda
