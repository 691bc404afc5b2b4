// TopK, OneHot and Compress (ONNX Operators.md; kernels_select.h): ops whose output extent is an
// operand's *value* (TopK's K, OneHot's depth, the count of Compress's true conditions). The
// lowering's concrete shapes hold that extent; the factories trust it only where it is the
// operand's value for every run of the layer: a constant operand (checked against the shape), or
// a model the engine keys by its input values (ValueShapes::value_dependent: it is lowered again
// at each call's own values, docs/decisions/0069). Otherwise the node is refused, naming the
// operand. Data is copied by element size (any storage type: float and exact tables).
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_select.h"
#include "backends/cuda/layer_factory.h"
#include "core/numerics.h"

namespace kiln::cuda {
namespace {

// OK when the extent the shapes give for output size `what` can be trusted (see above): input
// `k` is a constant whose value `from_value` turns into `extent`, or the model is value-keyed.
template <typename FromValue>
Status trusted_extent(LowerContext& ctx, const ir::Node& n, size_t k, int64_t extent, const std::string& what,
                      const std::string& where, FromValue from_value) {
  if (const auto& c = ctx.graph().value(n.inputs[k]).constant) {
    KILN_ASSIGN_OR_RETURN(int64_t v, from_value(*c));
    if (v != extent)
      return invalid_argument(where + what + " is " + std::to_string(v) + " but the output's extent is " +
                              std::to_string(extent));
    return Status::Ok();
  }
  if (ctx.value_shapes().value_dependent) return Status::Ok();
  return unsupported(where + what + " comes from a value the build cannot read and the engine is not keyed by its "
                     "input values (docs/decisions/0069)");
}

StatusOr<int64_t> scalar_of(const Tensor& t, const char* what) {
  if (t.numel() != 1) return invalid_argument(std::string(what) + " must hold one value, got " + shape_str(t.shape()));
  return static_cast<int64_t>(load_as_double(t.dtype(), t.raw(), 0));
}

bool present(const ir::Node& n, size_t k) { return k < n.inputs.size() && n.inputs[k] != ir::kNoValue; }

// Output k of `n` as a new row-major value of storage `t` (bound to the graph value), or an
// unbound scratch value of `shape` when the model does not use that output.
int output_of(LowerContext& ctx, const ir::Node& n, size_t k, const Shape& shape, StorageType t) {
  const bool used = k < n.outputs.size() && n.outputs[k] != ir::kNoValue;
  const std::string name = used ? ctx.graph().value(n.outputs[k]).name : n.name + ":unused" + std::to_string(k);
  const int v = ctx.new_value(name, shape, t, false);
  if (used) ctx.bind(n.outputs[k], v);
  return v;
}

}  // namespace

Status lower_topk(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& x = ctx.shape(n.inputs.at(0));
  const int64_t r = static_cast<int64_t>(x.size());
  int64_t axis = n.attr_int("axis", -1);
  if (axis < -r || axis >= r) return invalid_argument(where + "axis " + std::to_string(axis) + " out of range");
  if (axis < 0) axis += r;
  const ir::ValueId out0 = n.outputs.empty() ? ir::kNoValue : n.outputs[0];
  const ir::ValueId out1 = n.outputs.size() > 1 ? n.outputs[1] : ir::kNoValue;
  const ir::ValueId shaped = out0 != ir::kNoValue ? out0 : out1;
  if (shaped == ir::kNoValue) return invalid_argument(where + "no output");
  const Shape y = ctx.shape(shaped);
  if (static_cast<int64_t>(y.size()) != r) return invalid_argument(where + "output rank differs from the input's");
  const int64_t k = y[axis];
  if (n.opset >= 10 || present(n, 1)) {
    if (!present(n, 1)) return invalid_argument(where + "input K is missing");
    KILN_RETURN_IF_ERROR(
        trusted_extent(ctx, n, 1, k, "K", where, [](const Tensor& t) { return scalar_of(t, "K"); }));
  } else if (n.attr_int("k", -1) != k) {
    return invalid_argument(where + "attribute k does not match the output's extent " + std::to_string(k));
  }
  if (k < 0 || k > x[axis]) return invalid_argument(where + "K = " + std::to_string(k) + " is outside [0, " +
                                                    std::to_string(x[axis]) + "]");
  const StorageType t = ctx.storage();
  if (t == StorageType::kBool) return unsupported(where + "bool input");
  const int64_t outer = dims_product(x, 0, static_cast<size_t>(axis));
  const int64_t inner = dims_product(x, static_cast<size_t>(axis) + 1, x.size());
  const bool largest = n.attr_int("largest", 1) != 0;
  KILN_ASSIGN_OR_RETURN(int xv, ctx.row_major_operand(n.inputs[0]));
  const int vals = output_of(ctx, n, 0, y, t);
  const int idx = output_of(ctx, n, 1, y, StorageType::kI64);
  const int64_t nn = x[axis];
  auto layer = make_kernel_layer("TopK", "kiln.topk", [=](ExecState& s, const Layer& l) {
    return launch_topk(s.ptr(l.ins[0]), s.ptr(l.outs[0]), static_cast<int64_t*>(s.ptr(l.outs[1])), outer, nn, inner, k,
                       largest, t, s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, {xv}, {vals, idx}, n.origin);
  return Status::Ok();
}

Status lower_one_hot(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (!present(n, 0) || !present(n, 1) || !present(n, 2))
    return invalid_argument(where + "indices, depth and values are required");
  const Shape& y = ctx.shape(n.outputs.at(0));
  const int64_t r = static_cast<int64_t>(y.size());
  int64_t axis = n.attr_int("axis", -1);
  if (axis < -r || axis >= r) return invalid_argument(where + "axis " + std::to_string(axis) + " out of range");
  if (axis < 0) axis += r;
  const int64_t depth = y[axis];
  KILN_RETURN_IF_ERROR(
      trusted_extent(ctx, n, 1, depth, "depth", where, [](const Tensor& t) { return scalar_of(t, "depth"); }));
  if (shape_numel(ctx.shape(n.inputs[2])) != 2)
    return invalid_argument(where + "values must hold [off_value, on_value]");
  StorageType it;
  switch (ctx.dtype(n.inputs[0])) {
    case DataType::kInt64: it = StorageType::kI64; break;
    case DataType::kInt32: it = StorageType::kI32; break;
    case DataType::kFloat32: case DataType::kFloat16: case DataType::kBFloat16: it = StorageType::kF32; break;
    default:
      return unsupported(where + "indices of dtype " + dtype_name(ctx.dtype(n.inputs[0])));
  }
  const int64_t outer = dims_product(y, 0, static_cast<size_t>(axis));
  const int64_t inner = dims_product(y, static_cast<size_t>(axis) + 1, y.size());
  KILN_ASSIGN_OR_RETURN(int idx, ctx.operand_as(n.inputs[0], it));
  KILN_ASSIGN_OR_RETURN(int vals, ctx.operand_as(n.inputs[2], ctx.storage()));
  const int eb = static_cast<int>(storage_bytes(ctx.storage()));
  auto layer = make_kernel_layer("OneHot", "kiln.one_hot", [=](ExecState& s, const Layer& l) {
    return launch_one_hot(s.ptr(l.ins[0]), it, s.ptr(l.ins[1]), s.ptr(l.outs[0]), eb, outer, depth, inner, s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, {idx, vals}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

Status lower_compress(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (!present(n, 1)) return invalid_argument(where + "condition is required");
  const Shape& x = ctx.shape(n.inputs[0]);
  const Shape& c = ctx.shape(n.inputs[1]);
  if (c.size() != 1) return invalid_argument(where + "condition must be 1-D, got " + shape_str(c));
  const int64_t r = static_cast<int64_t>(x.size());
  int64_t outer = 1, nn = shape_numel(x), inner = 1, axis = 0;
  const bool has_axis = n.has_attr("axis");
  if (has_axis) {
    axis = n.attr_int("axis", 0);
    if (axis < -r || axis >= r) return invalid_argument(where + "axis " + std::to_string(axis) + " out of range");
    if (axis < 0) axis += r;
    outer = dims_product(x, 0, static_cast<size_t>(axis));
    nn = x[axis];
    inner = dims_product(x, static_cast<size_t>(axis) + 1, x.size());
  }
  const int64_t len = c[0];
  if (len > nn)
    return invalid_argument(where + "condition has " + std::to_string(len) + " entries for a dim of " +
                            std::to_string(nn));
  const Shape& y = ctx.shape(n.outputs.at(0));
  const int64_t kept = has_axis ? y.at(axis) : shape_numel(y);
  KILN_RETURN_IF_ERROR(trusted_extent(ctx, n, 1, kept, "the count of true conditions", where, [](const Tensor& t) {
    int64_t count = 0;
    for (int64_t i = 0; i < t.numel(); ++i) count += load_as_double(t.dtype(), t.raw(), i) != 0.0;
    return StatusOr<int64_t>(count);
  }));
  KILN_ASSIGN_OR_RETURN(int xv, ctx.row_major_operand(n.inputs[0]));
  KILN_ASSIGN_OR_RETURN(int cv, ctx.operand_as(n.inputs[1], StorageType::kBool));
  const int eb = static_cast<int>(storage_bytes(ctx.storage()));
  auto layer = make_kernel_layer("Compress", "kiln.compress", [=](ExecState& s, const Layer& l) {
    return launch_compress(s.ptr(l.ins[0]), static_cast<const uint8_t*>(s.ptr(l.ins[1])), len, s.ptr(l.outs[0]), eb,
                           outer, nn, inner, kept, s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, {xv, cv}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

// NonMaxSuppression: its output's row count is the selection's size, trusted only in a value-keyed
// model (no constant operand fixes it). Float operands read in float32, max_output_boxes_per_class
// as int64; absent scalars are 0 (score_threshold absent: no threshold).
Status lower_nms(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (!present(n, 0) || !present(n, 1)) return invalid_argument(where + "boxes and scores are required");
  const Shape& boxes = ctx.shape(n.inputs[0]);
  const Shape& scores = ctx.shape(n.inputs[1]);
  if (boxes.size() != 3 || boxes[2] != 4)
    return invalid_argument(where + "boxes must be [batches, boxes, 4], got " + shape_str(boxes));
  if (scores.size() != 3 || scores[0] != boxes[0] || scores[2] != boxes[1])
    return invalid_argument(where + "scores must be [batches, classes, boxes] matching boxes " + shape_str(boxes) +
                            ", got " + shape_str(scores));
  const Shape& y = ctx.shape(n.outputs.at(0));
  if (y.size() != 2 || y[1] != 3) return invalid_argument(where + "output must be [selected, 3], got " + shape_str(y));
  if (!ctx.value_shapes().value_dependent)
    return unsupported(where + "the number of selected boxes depends on the input values and the engine is not keyed "
                       "by them (docs/decisions/0069)");
  std::vector<int> ins(5, -1);
  for (size_t k = 0; k < 5; ++k) {
    if (!present(n, k) || shape_numel(ctx.shape(n.inputs[k])) == 0) continue;
    KILN_ASSIGN_OR_RETURN(ins[k], ctx.operand_as(n.inputs[k], k == 2 ? StorageType::kI64 : StorageType::kF32));
  }
  const bool has_thr = ins[4] >= 0;
  const bool center = n.attr_int("center_point_box", 0) != 0;
  const int64_t batches = boxes[0], classes = scores[1], nb = boxes[1], count = y[0];
  auto layer = make_kernel_layer("NonMaxSuppression", "kiln.nms", [=](ExecState& s, const Layer& l) {
    auto in = [&](int k) -> void* { return l.ins[k] < 0 ? nullptr : s.ptr(l.ins[k]); };
    return launch_nms(static_cast<const float*>(in(0)), static_cast<const float*>(in(1)),
                      static_cast<const int64_t*>(in(2)), static_cast<const float*>(in(3)),
                      static_cast<const float*>(in(4)), has_thr, center, batches, classes, nb,
                      static_cast<int64_t*>(s.ptr(l.outs[0])), count, s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

// NonZero: y [rank, count] int64 (a scalar counts as 1-D); the count is y's extent, trusted in a
// value-keyed model only.
Status lower_nonzero(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  Shape x = ctx.shape(n.inputs.at(0));
  if (x.empty()) x = {1};
  if (x.size() > static_cast<size_t>(kMaxRank)) return unsupported(where + "rank above 6");
  const Shape& y = ctx.shape(n.outputs.at(0));
  if (y.size() != 2 || y[0] != static_cast<int64_t>(x.size()))
    return invalid_argument(where + "output must be [" + std::to_string(x.size()) + ", count], got " + shape_str(y));
  if (!ctx.value_shapes().value_dependent)
    return unsupported(where + "the number of nonzero elements depends on the input values and the engine is not keyed "
                       "by them (docs/decisions/0069)");
  DataType narrow_dt = declared_narrow_dtype(ctx.value_shapes(), n.inputs[0]);
  if (narrow_dt != DataType::kUndefined) return unsupported(where + "NonZero of " + dtype_name(narrow_dt));
  const ir::Value& xv = ctx.graph().value(n.inputs[0]);
  StorageType t = StorageType::kF32;
  if (!exact_storage(ctx.dtype(n.inputs[0]), &t)) {
    if (!is_float(ctx.dtype(n.inputs[0]))) return unsupported(where + "NonZero of " + dtype_name(ctx.dtype(n.inputs[0])));
    t = xv.constant ? StorageType::kF32 : stored_float_type(ctx, n.inputs[0]);
  }
  KILN_ASSIGN_OR_RETURN(int xa, ctx.operand_as(n.inputs[0], t));
  NonZeroDesc d;
  d.rank = static_cast<int>(x.size());
  for (size_t k = 0; k < x.size(); ++k) d.dims[k] = x[k];
  const int64_t count = y[1];
  auto layer = make_kernel_layer("NonZero", "kiln.nonzero", [=](ExecState& s, const Layer& l) {
    return launch_nonzero(s.ptr(l.ins[0]), t, d, static_cast<int64_t*>(s.ptr(l.outs[0])), count, s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, {xa}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

// Unique: outputs Y (x's storage), indices, inverse_indices, counts (int64); the group count is the
// outputs' extent, trusted in a value-keyed model only.
Status lower_unique(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& x = ctx.shape(n.inputs.at(0));
  if (n.outputs.empty() || n.outputs[0] == ir::kNoValue) return invalid_argument(where + "output Y is required");
  const Shape& y = ctx.shape(n.outputs[0]);
  const int64_t r = static_cast<int64_t>(x.size());
  int64_t outer = 1, nn = shape_numel(x), inner = 1, axis = 0, groups = shape_numel(y);
  if (n.has_attr("axis")) {
    axis = n.attr_int("axis", 0);
    if (axis < -r || axis >= r) return invalid_argument(where + "axis " + std::to_string(axis) + " out of range");
    if (axis < 0) axis += r;
    outer = dims_product(x, 0, static_cast<size_t>(axis));
    nn = x[axis];
    inner = dims_product(x, static_cast<size_t>(axis) + 1, x.size());
    if (y.size() != x.size()) return invalid_argument(where + "Y's rank differs from X's");
    groups = y[axis];
  }
  if (!ctx.value_shapes().value_dependent)
    return unsupported(where + "the number of unique values depends on the input values and the engine is not keyed "
                       "by them (docs/decisions/0069)");
  const StorageType t = ctx.storage();
  if (t == StorageType::kBool) return unsupported(where + "bool input");
  KILN_ASSIGN_OR_RETURN(int xv, ctx.row_major_operand(n.inputs[0]));
  std::vector<int> outs = {ctx.new_output(n, 0)};
  int slot[3] = {-1, -1, -1};  // indices, inverse_indices, counts: their positions in outs
  for (size_t k = 1; k < 4; ++k) {
    if (k >= n.outputs.size() || n.outputs[k] == ir::kNoValue) continue;
    slot[k - 1] = static_cast<int>(outs.size());
    outs.push_back(output_of(ctx, n, k, ctx.shape(n.outputs[k]), StorageType::kI64));
  }
  const int rep = static_cast<int>(outs.size());
  outs.push_back(ctx.new_value(n.name + ":representatives", {nn}, StorageType::kI64, false));
  const bool sorted = n.attr_int("sorted", 1) != 0;
  auto layer = make_kernel_layer("Unique", "kiln.unique", [=](ExecState& s, const Layer& l) {
    auto out = [&](int k) { return k < 0 ? nullptr : static_cast<int64_t*>(s.ptr(l.outs[k])); };
    return launch_unique(s.ptr(l.ins[0]), t, outer, nn, inner, sorted, groups, out(rep), s.ptr(l.outs[0]), out(slot[0]),
                         out(slot[1]), out(slot[2]), s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, {xv}, outs, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
