// Cast and CastLike (ONNX Cast; CastLike: to the dtype of its input 1, whose values are not read —
// the output's dtype says it). To a float type: storage already holds the layer's float type, so a
// float-to-float Cast is a view, except that float32 storage of a float16 result is rounded to
// half as the CPU reference does (ONNX Cast: round to nearest even); int32 /
// int64 / bool sources are converted on the device, float64 ones rounded once to the result's type
// (docs/decisions/0075). To int32 / int64 / bool (an exact node, docs/decisions/0051): one
// cast layer of kernels_exact.h from the source as stored (a float source in its own float
// storage), or a view when the source already has the output's storage. To a narrow integer
// type computed wide (docs/decisions/0076): kernels_qint.h's cast, which keeps the low bits of
// the source's integer value (a float truncated as the CPU's Cast), a canonical value.
#include "backends/cuda/exact_layers.h"
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_qint.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {
namespace {

Status lower_cast_exact(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const DataType from = ctx.dtype(n.inputs[0]);
  StorageType src_t;
  if (!exact_storage(from, &src_t)) {
    if (!is_float(from)) return unsupported(where + "Cast from " + std::string(dtype_name(from)));
    src_t = stored_float_type(ctx, n.inputs[0]);
  }
  KILN_ASSIGN_OR_RETURN(int x, ctx.operand_as(n.inputs[0], src_t));
  const StorageType t = ctx.storage();
  const int out = ctx.new_output(n);
  NarrowType q;
  if (narrow_type_of(declared_narrow_dtype(ctx.value_shapes(), n.outputs[0]), &q)) {
    if (src_t == StorageType::kBool) return unsupported(where + "Cast from bool to a narrow integer type");
    const int64_t count = shape_numel(ctx.shape(n.inputs[0]));
    auto layer = make_kernel_layer(ir::op_name(n.op), std::string("kiln.cast_narrow ") + storage_name(src_t),
                                   [=](ExecState& s, const Layer& l) {
                                     return launch_cast_to_narrow(s.ptr(l.ins[0]), src_t, s.ptr(l.outs[0]), t, q, count,
                                                                  s.stream);
                                   });
    ctx.add_layer(std::move(layer), n.name, {x}, {out}, n.origin);
    return Status::Ok();
  }
  if (src_t == t) {
    ctx.alias(out, x);
    return Status::Ok();
  }
  ctx.add_layer(make_cast_layer(shape_numel(ctx.shape(n.inputs[0])), src_t, t), n.name, {x}, {out}, n.origin);
  return Status::Ok();
}

}  // namespace

Status lower_cast(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (!storage_is_float(ctx.storage())) return lower_cast_exact(ctx, n, where);
  const DataType from = ctx.dtype(n.inputs[0]);
  StorageType exact_t;
  const bool from_exact = exact_storage(from, &exact_t) && !ctx.graph().value(n.inputs[0]).constant;
  const StorageType st = ctx.storage();
  const int64_t count = shape_numel(ctx.shape(n.inputs[0]));
  const bool to_half = ctx.dtype(n.outputs[0]) == DataType::kFloat16;
  if (from_exact && exact_t == StorageType::kF64) {
    // float64 (docs/decisions/0075): rounded once to the output's type on the device, as the
    // CPU reference's Cast does; a float16 result in wider storage is then widened exactly.
    KILN_ASSIGN_OR_RETURN(int x, ctx.operand_as(n.inputs[0], StorageType::kF64));
    const StorageType direct = to_half ? StorageType::kF16 : st;
    if (direct == st) {
      ctx.add_layer(make_cast_layer(count, StorageType::kF64, st), n.name, {x}, {ctx.new_output(n)}, n.origin);
      return Status::Ok();
    }
    const int h = ctx.new_value(n.name + ":half", ctx.shape(n.inputs[0]), direct, false);
    ctx.add_layer(make_cast_layer(count, StorageType::kF64, direct), n.name + ":half", {x}, {h}, n.origin);
    ctx.add_layer(make_cast_layer(count, direct, st), n.name, {h}, {ctx.new_output(n)}, n.origin);
    return Status::Ok();
  }
  const bool from_int = from_exact;
  // A bfloat16 value (a graph input: float nodes do not write bfloat16) is held exactly by float32
  // storage and rounded by 16-bit storage as any float activation: a Cast from it is one of the
  // float cases below.
  const bool from_bf16 = from == DataType::kBFloat16;
  if (!is_float(from) && !from_bf16 && !from_int) return unsupported(where + "Cast from " + std::string(dtype_name(from)));
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  // Only float32 storage rounds: fp16 storage already holds halves, and bf16 storage keeps
  // fewer mantissa bits than a half (a view, like a Cast to float32 in fp16 storage).
  const bool round = st == StorageType::kF32 && to_half && (from == DataType::kFloat32 || from_bf16 || from_int);
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
