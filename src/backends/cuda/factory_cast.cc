// Cast between float types, and from int32/int64 activations (token ids, positions) to a float
// type. Storage already holds the layer's float type, so a float-to-float Cast is a view, except
// that float32 storage of a float16 result is rounded to half as the CPU reference does (ONNX Cast:
// round to nearest even). Integer activations are converted on the device.
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {

Status lower_cast(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const DataType from = ctx.dtype(n.inputs[0]);
  const bool from_int = (from == DataType::kInt64 || from == DataType::kInt32) && !ctx.graph().value(n.inputs[0]).constant;
  if (!is_float(from) && !from_int) return unsupported(where + "Cast from " + std::string(dtype_name(from)));
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  const StorageType st = ctx.storage();
  // Only float32 storage rounds: fp16 storage already holds halves, and bf16 storage keeps
  // fewer mantissa bits than a half (a view, like a Cast to float32 in fp16 storage).
  const bool round = st == StorageType::kF32 && ctx.dtype(n.outputs[0]) == DataType::kFloat16 &&
                     (from == DataType::kFloat32 || from_int);
  const int64_t count = shape_numel(ctx.shape(n.inputs[0]));
  if (from_int) {
    // float32 storage of a float16 result: then rounded to half, as the CPU reference does.
    const int conv = round ? ctx.new_value(n.name + ":converted", ctx.shape(n.inputs[0]), st, false) : ctx.new_output(n);
    ctx.add_layer(make_convert_layer(count, ctx.value_type(x), st), n.name, {x}, {conv}, n.origin);
    if (round) ctx.add_layer(make_round_to_half_layer(count), n.name + ":round", {conv}, {ctx.new_output(n)}, n.origin);
    return Status::Ok();
  }
  if (round) {
    ctx.add_layer(make_round_to_half_layer(count), n.name, {x}, {ctx.new_output(n)}, n.origin);
    return Status::Ok();
  }
  ctx.alias(ctx.new_output(n), x);
  return Status::Ok();
}

}  // namespace kiln::cuda
