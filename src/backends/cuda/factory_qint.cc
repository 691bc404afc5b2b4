// Narrow integer ops on the GPU (docs/decisions/0076): QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, integer Clip, BitShift, MaxPool of 8- / 16-bit values, MatMulInteger,
// QLinearMatMul, ConvInteger, QLinearConv. Their narrow operands are int32 (int64 for uint32)
// values that widen_narrow_integers (narrow_ints.cc) proved canonical; the kernels
// (kernels_qint.h) compute the declared narrow type's result, as the CPU reference does.
// Optional inputs that are absent are null pointers to the kernels.
#include "backends/cuda/exact_layers.h"
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_qint.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {
namespace {

bool present(const ir::Node& n, size_t k) { return k < n.inputs.size() && n.inputs[k] != ir::kNoValue; }

// The declared dtype of a value: a constant's own dtype, a widened value's narrow dtype, else
// the lowering's.
DataType declared(LowerContext& ctx, ir::ValueId v) {
  if (const auto& c = ctx.graph().value(v).constant) return c->dtype();
  const DataType d = declared_narrow_dtype(ctx.value_shapes(), v);
  return d != DataType::kUndefined ? d : ctx.dtype(v);
}

bool is_8bit(DataType dt) { return dt == DataType::kUInt8 || dt == DataType::kInt8; }

// QLinearMatMul / QLinearConv: inputs 0..7 are required.
Status check_qlinear_inputs(const ir::Node& n, const std::string& where) {
  for (size_t k = 0; k < 8; ++k)
    if (!present(n, k)) return invalid_argument(where + "input " + std::to_string(k) + " is required");
  return Status::Ok();
}

// Device pointer of layer input k (or null when that input was absent: index -1).
template <typename T>
T* in_ptr(ExecState& s, const Layer& l, int k) {
  return k < 0 ? nullptr : static_cast<T*>(s.ptr(l.ins[static_cast<size_t>(k)]));
}

// Appends node input k as an operand of type t to `ins`; its index there, or -1 when absent.
StatusOr<int> add_operand(LowerContext& ctx, const ir::Node& n, size_t k, StorageType t, std::vector<int>* ins) {
  if (!present(n, k)) return -1;
  KILN_ASSIGN_OR_RETURN(int a, ctx.operand_as(n.inputs[k], t));
  ins->push_back(a);
  return static_cast<int>(ins->size()) - 1;
}

// The scale / zero-point indexing of x (QuantizeLinear / DequantizeLinear): per tensor when the
// scale has one element, per axis when it is 1-D of x's dim(axis); blocked scales are refused.
StatusOr<QuantAxis> quant_axis(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& x = ctx.shape(n.inputs[0]);
  const Shape& s = ctx.shape(n.inputs[1]);
  if (n.attr_int("block_size", 0) != 0) return unsupported(where + "blocked quantization (block_size)");
  QuantAxis a;
  a.count = shape_numel(x);
  const int64_t ns = shape_numel(s);
  if (present(n, 2) && shape_numel(ctx.shape(n.inputs[2])) != ns)
    return unsupported(where + "the zero point's element count differs from the scale's");
  if (ns == 1) return a;
  int64_t axis = n.attr_int("axis", 1);
  const int64_t r = static_cast<int64_t>(x.size());
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r || s.size() != 1 || s[0] != x[static_cast<size_t>(axis)])
    return unsupported(where + "scale " + shape_str(s) + " is neither per tensor nor per axis of x " + shape_str(x));
  a.per_axis = true;
  a.dim = x[static_cast<size_t>(axis)];
  a.inner = dims_product(x, static_cast<size_t>(axis) + 1, x.size());
  return a;
}

Status check_f32(LowerContext& ctx, const ir::Node& n, size_t k, const char* what, const std::string& where) {
  if (present(n, k) && ctx.dtype(n.inputs[k]) != DataType::kFloat32)
    return unsupported(where + what + " has dtype " + dtype_name(ctx.dtype(n.inputs[k])) + " (float32 only)");
  return Status::Ok();
}

Status lower_quantize(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (!present(n, 0) || !present(n, 1)) return invalid_argument(where + "x and the scale are required");
  NarrowType q;
  const DataType yt = declared(ctx, n.outputs[0]);
  if (!narrow_type_of(yt, &q) || q.bits > 16) return unsupported(where + "QuantizeLinear to " + dtype_name(yt));
  KILN_RETURN_IF_ERROR(check_f32(ctx, n, 0, "x", where));
  KILN_RETURN_IF_ERROR(check_f32(ctx, n, 1, "the scale", where));
  if (const int64_t p = n.attr_int("quantize_precision", 0); p != 0 && p != 1)
    return unsupported(where + "precision " + std::to_string(p) + " (float32 division only)");
  KILN_ASSIGN_OR_RETURN(QuantAxis a, quant_axis(ctx, n, where));
  std::vector<int> ins;
  KILN_RETURN_IF_ERROR(add_operand(ctx, n, 0, StorageType::kF32, &ins).status());
  KILN_RETURN_IF_ERROR(add_operand(ctx, n, 1, StorageType::kF32, &ins).status());
  KILN_ASSIGN_OR_RETURN(int iz, add_operand(ctx, n, 2, StorageType::kI32, &ins));
  auto layer = make_kernel_layer(ir::op_name(n.op), std::string("kiln.quantize ") + dtype_name(yt),
                                 [=](ExecState& s, const Layer& l) {
                                   return launch_quantize_linear(in_ptr<const float>(s, l, 0), in_ptr<const float>(s, l, 1),
                                                                 in_ptr<const int32_t>(s, l, iz),
                                                                 static_cast<int32_t*>(s.ptr(l.outs[0])), q, a, s.stream);
                                 });
  ctx.add_layer(std::move(layer), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

Status lower_dynamic_quantize(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  KILN_RETURN_IF_ERROR(check_f32(ctx, n, 0, "x", where));
  std::vector<int> ins;
  KILN_RETURN_IF_ERROR(add_operand(ctx, n, 0, StorageType::kF32, &ins).status());
  const int64_t count = shape_numel(ctx.shape(n.inputs[0]));
  std::vector<int> outs = {ctx.new_output(n)};
  // y_scale (float32) and y_zero_point (uint8 computed as int32): scalars, written even when
  // the graph does not read them.
  const char* names[] = {":scale", ":zero_point"};
  const StorageType types[] = {StorageType::kF32, StorageType::kI32};
  for (size_t k = 1; k <= 2; ++k) {
    const bool wanted = k < n.outputs.size() && n.outputs[k] != ir::kNoValue;
    const std::string name = wanted ? ctx.graph().value(n.outputs[k]).name : n.name + names[k - 1];
    const int v = ctx.new_value(name, Shape{}, types[k - 1], false);
    if (wanted) ctx.bind(n.outputs[k], v);
    outs.push_back(v);
  }
  auto layer = make_kernel_layer(ir::op_name(n.op), "kiln.dynamic_quantize", [=](ExecState& s, const Layer& l) {
    return launch_dynamic_quantize_linear(in_ptr<const float>(s, l, 0), count, static_cast<int32_t*>(s.ptr(l.outs[0])),
                                          static_cast<float*>(s.ptr(l.outs[1])), static_cast<int32_t*>(s.ptr(l.outs[2])),
                                          s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, ins, outs, n.origin);
  return Status::Ok();
}

Status lower_int_clip(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const StorageType t = ctx.storage();
  if (!storage_is_int(t)) return unsupported(where + "output storage " + storage_name(t));
  if (n.has_attr("min") || n.has_attr("max")) return unsupported(where + "Clip-6 bounds (attributes) on integers");
  std::vector<int> ins;
  KILN_RETURN_IF_ERROR(add_operand(ctx, n, 0, t, &ins).status());
  int bound[2] = {-1, -1};
  for (size_t k = 1; k <= 2; ++k) {
    // An empty bound tensor is no bound (the CPU reference reads one of a single element).
    if (!present(n, k) || shape_numel(ctx.shape(n.inputs[k])) == 0) continue;
    if (shape_numel(ctx.shape(n.inputs[k])) != 1) return unsupported(where + "Clip bounds must be scalars");
    KILN_ASSIGN_OR_RETURN(bound[k - 1], add_operand(ctx, n, k, t, &ins));
  }
  const int64_t count = shape_numel(ctx.shape(n.inputs[0]));
  const int lo = bound[0], hi = bound[1];
  auto layer = make_kernel_layer(ir::op_name(n.op), std::string("kiln.int_clip ") + storage_name(t),
                                 [=](ExecState& s, const Layer& l) {
                                   return launch_int_clip(s.ptr(l.ins[0]), in_ptr<const void>(s, l, lo),
                                                          in_ptr<const void>(s, l, hi), s.ptr(l.outs[0]), t, count, s.stream);
                                 });
  ctx.add_layer(std::move(layer), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

Status lower_bit_shift(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  NarrowType q;
  const DataType dt = declared(ctx, n.outputs[0]);
  if (!narrow_type_of(dt, &q) || q.is_signed) return unsupported(where + "BitShift on " + dtype_name(dt));
  const std::string dir = n.attr_string("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") return invalid_argument(where + "direction '" + dir + "' is not LEFT or RIGHT");
  const StorageType t = ctx.storage();
  std::vector<int> ins;
  KILN_RETURN_IF_ERROR(add_operand(ctx, n, 0, t, &ins).status());
  KILN_RETURN_IF_ERROR(add_operand(ctx, n, 1, t, &ins).status());
  auto d = broadcast_desc(ctx.shape(n.inputs[0]), ctx.shape(n.inputs[1]), ctx.shape(n.outputs[0]));
  if (!d.ok()) return unsupported(where + d.status().message());
  const BroadcastDesc bd = *d;
  const bool left = dir == "LEFT";
  auto layer = make_kernel_layer(ir::op_name(n.op), std::string("kiln.bit_shift ") + dtype_name(dt),
                                 [=](ExecState& s, const Layer& l) {
                                   return launch_bit_shift(s.ptr(l.ins[0]), s.ptr(l.ins[1]), s.ptr(l.outs[0]), t, q, left, bd,
                                                           s.stream);
                                 });
  ctx.add_layer(std::move(layer), n.name, ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

// 8-bit operand k of a MatMulInteger / ConvInteger family node.
Status check_8bit(LowerContext& ctx, const ir::Node& n, size_t k, const std::string& where) {
  if (!present(n, k)) return Status::Ok();
  const DataType dt = declared(ctx, n.inputs[k]);
  if (!is_8bit(dt)) return unsupported(where + "input " + std::to_string(k) + " has dtype " + dtype_name(dt) + " (int8 / uint8)");
  return Status::Ok();
}

// QLinear*'s requantization of `acc` into the node's output (ins: acc, then s1, s2, y_scale,
// y_zero_point and the bias, as operand indices of the node).
Status add_requantize(LowerContext& ctx, const ir::Node& n, int acc, size_t s1, size_t s2, size_t bias_k, RequantDesc d,
                      const std::string& where) {
  for (size_t k : {s1, s2, size_t{6}}) KILN_RETURN_IF_ERROR(check_f32(ctx, n, k, "a scale", where));
  const DataType yt = declared(ctx, n.outputs[0]);
  if (!is_8bit(yt) || !narrow_type_of(yt, &d.q)) return unsupported(where + "output dtype " + dtype_name(yt));
  if (shape_numel(ctx.shape(n.inputs[6])) != 1 || shape_numel(ctx.shape(n.inputs[7])) != 1)
    return unsupported(where + "y_scale and y_zero_point must be scalars");
  std::vector<int> ins = {acc};
  for (size_t k : {s1, s2, size_t{6}}) KILN_RETURN_IF_ERROR(add_operand(ctx, n, k, StorageType::kF32, &ins).status());
  KILN_RETURN_IF_ERROR(add_operand(ctx, n, 7, StorageType::kI32, &ins).status());
  int ib = -1;
  if (bias_k > 0 && present(n, bias_k)) {
    if (ctx.dtype(n.inputs[bias_k]) != DataType::kInt32) return unsupported(where + "the bias must be int32");
    KILN_ASSIGN_OR_RETURN(ib, add_operand(ctx, n, bias_k, StorageType::kI32, &ins));
  }
  auto layer = make_kernel_layer(ir::op_name(n.op), std::string("kiln.requantize ") + dtype_name(yt),
                                 [=](ExecState& s, const Layer& l) {
                                   return launch_requantize(in_ptr<const int32_t>(s, l, 0), in_ptr<const int32_t>(s, l, ib),
                                                            in_ptr<const float>(s, l, 1), in_ptr<const float>(s, l, 2),
                                                            in_ptr<const float>(s, l, 3), in_ptr<const int32_t>(s, l, 4),
                                                            static_cast<int32_t*>(s.ptr(l.outs[0])), d, s.stream);
                                 });
  ctx.add_layer(std::move(layer), n.name + ":requantize", ins, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

// A per-tensor (1 element) or per-`extent` operand; `per` says which.
Status per_or_scalar(LowerContext& ctx, const ir::Node& n, size_t k, int64_t extent, const char* what, bool* per,
                     const std::string& where) {
  *per = false;
  if (!present(n, k)) return Status::Ok();
  const int64_t c = shape_numel(ctx.shape(n.inputs[k]));
  if (c == 1) return Status::Ok();
  if (c != extent) return unsupported(where + what + " " + shape_str(ctx.shape(n.inputs[k])) + " is neither per tensor nor per axis");
  *per = true;
  return Status::Ok();
}

Status lower_int_matmul(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const bool ql = n.op == ir::OpKind::kQLinearMatMul;
  if (ql) KILN_RETURN_IF_ERROR(check_qlinear_inputs(n, where));
  const size_t ka = 0, kb = ql ? 3 : 1, kza = 2, kzb = ql ? 5 : 3;
  for (size_t k : {ka, kb, kza, kzb}) KILN_RETURN_IF_ERROR(check_8bit(ctx, n, k, where));
  Shape a = ctx.shape(n.inputs[ka]), b = ctx.shape(n.inputs[kb]);
  if (a.empty() || b.empty()) return invalid_argument(where + "MatMul operands must have rank >= 1");
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  IntMatMulDesc d;
  d.m = a[a.size() - 2];
  d.k = a.back();
  d.n = b.back();
  if (b[b.size() - 2] != d.k) return invalid_argument(where + "inner dims differ: " + shape_str(a) + " x " + shape_str(b));
  const size_t br = std::max(a.size(), b.size()) - 2;
  if (br > static_cast<size_t>(kMaxRank)) return unsupported(where + "more than 6 batch dims");
  d.batch_rank = static_cast<int>(br);
  int64_t sa = 1, sb = 1;
  for (size_t r = br; r-- > 0;) {
    const size_t off_a = br - (a.size() - 2), off_b = br - (b.size() - 2);
    const int64_t da = r >= off_a ? a[r - off_a] : 1, db = r >= off_b ? b[r - off_b] : 1;
    if (da != db && da != 1 && db != 1) return invalid_argument(where + "batch dims do not broadcast");
    d.batch_dims[r] = std::max(da, db);
    d.a_bstrides[r] = da == 1 ? 0 : sa;
    d.b_bstrides[r] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
  }
  KILN_RETURN_IF_ERROR(per_or_scalar(ctx, n, kza, d.m, "a_zero_point", &d.za_per_row, where));
  KILN_RETURN_IF_ERROR(per_or_scalar(ctx, n, kzb, d.n, "b_zero_point", &d.zb_per_col, where));
  std::vector<int> ins;
  KILN_RETURN_IF_ERROR(add_operand(ctx, n, ka, StorageType::kI32, &ins).status());
  KILN_ASSIGN_OR_RETURN(int iza, add_operand(ctx, n, kza, StorageType::kI32, &ins));
  KILN_RETURN_IF_ERROR(add_operand(ctx, n, kb, StorageType::kI32, &ins).status());
  const int ib = static_cast<int>(ins.size()) - 1;
  KILN_ASSIGN_OR_RETURN(int izb, add_operand(ctx, n, kzb, StorageType::kI32, &ins));
  const int acc = ql ? ctx.new_value(n.name + ":acc", ctx.shape(n.outputs[0]), StorageType::kI32, false) : ctx.new_output(n);
  auto layer = make_kernel_layer(ir::op_name(n.op), "kiln.int_matmul", [=](ExecState& s, const Layer& l) {
    return launch_int_matmul(in_ptr<const int32_t>(s, l, 0), in_ptr<const int32_t>(s, l, iza),
                             in_ptr<const int32_t>(s, l, ib), in_ptr<const int32_t>(s, l, izb),
                             static_cast<int32_t*>(s.ptr(l.outs[0])), d, s.stream);
  });
  ctx.add_layer(std::move(layer), ql ? n.name + ":int_matmul" : n.name, ins, {acc}, n.origin);
  if (!ql) return Status::Ok();
  RequantDesc r;
  r.count = shape_numel(ctx.shape(n.outputs[0]));
  KILN_RETURN_IF_ERROR(per_or_scalar(ctx, n, 1, d.m, "a_scale", &r.s1_per, where));
  KILN_RETURN_IF_ERROR(per_or_scalar(ctx, n, 4, d.n, "b_scale", &r.s2_per, where));
  r.s1_div = d.n;
  r.s1_mod = d.m;
  r.s2_div = 1;
  r.s2_mod = d.n;
  return add_requantize(ctx, n, acc, 1, 4, 0, r, where);
}

Status lower_int_conv(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const bool ql = n.op == ir::OpKind::kQLinearConv;
  if (ql) KILN_RETURN_IF_ERROR(check_qlinear_inputs(n, where));
  const size_t kx = 0, kw = ql ? 3 : 1, kzx = 2, kzw = ql ? 5 : 3;
  for (size_t k : {kx, kw, kzx, kzw}) KILN_RETURN_IF_ERROR(check_8bit(ctx, n, k, where));
  const Shape& x = ctx.shape(n.inputs[kx]);
  const Shape& w = ctx.shape(n.inputs[kw]);
  const Shape& y = ctx.shape(n.outputs[0]);
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size())
    return unsupported(where + "convolution of a rank-" + std::to_string(x.size()) + " input (1 to 3 spatial dims)");
  std::vector<int64_t> kernel = n.attr_ints("kernel_shape", std::vector<int64_t>(w.begin() + 2, w.end()));
  WindowGeometry g;
  KILN_RETURN_IF_ERROR(window_geometry(n, x, kernel, false, true, where, &g));
  IntConvDesc d;
  d.n = x[0];
  d.c = x[1];
  d.m = w[0];
  d.group = n.attr_int("group", 1);
  if (d.group < 1 || d.c % d.group != 0 || d.m % d.group != 0 || w[1] != d.c / d.group)
    return invalid_argument(where + "group " + std::to_string(d.group) + " does not fit x " + shape_str(x) + " and W " +
                            shape_str(w));
  Shape want = {d.n, d.m};
  want.insert(want.end(), g.out.begin(), g.out.end());
  if (want != y) return invalid_argument(where + "output shape " + shape_str(y) + " differs from the geometry's " + shape_str(want));
  const int nd = static_cast<int>(x.size()) - 2;
  for (int i = 0; i < nd; ++i) {
    const int j = 3 - nd + i;
    d.in[j] = g.in[i];
    d.out[j] = g.out[i];
    d.kernel[j] = g.kernel[i];
    d.stride[j] = g.stride[i];
    d.dilation[j] = g.dilation[i];
    d.pad_begin[j] = g.pad_begin[i];
  }
  if (present(n, kzx) && shape_numel(ctx.shape(n.inputs[kzx])) != 1) return unsupported(where + "x_zero_point must be a scalar");
  KILN_RETURN_IF_ERROR(per_or_scalar(ctx, n, kzw, d.m, "w_zero_point", &d.zw_per_channel, where));
  std::vector<int> ins;
  KILN_RETURN_IF_ERROR(add_operand(ctx, n, kx, StorageType::kI32, &ins).status());
  KILN_ASSIGN_OR_RETURN(int izx, add_operand(ctx, n, kzx, StorageType::kI32, &ins));
  KILN_RETURN_IF_ERROR(add_operand(ctx, n, kw, StorageType::kI32, &ins).status());
  const int iw = static_cast<int>(ins.size()) - 1;
  KILN_ASSIGN_OR_RETURN(int izw, add_operand(ctx, n, kzw, StorageType::kI32, &ins));
  const int acc = ql ? ctx.new_value(n.name + ":acc", y, StorageType::kI32, false) : ctx.new_output(n);
  auto layer = make_kernel_layer(ir::op_name(n.op), "kiln.int_conv", [=](ExecState& s, const Layer& l) {
    return launch_int_conv(in_ptr<const int32_t>(s, l, 0), in_ptr<const int32_t>(s, l, izx), in_ptr<const int32_t>(s, l, iw),
                           in_ptr<const int32_t>(s, l, izw), static_cast<int32_t*>(s.ptr(l.outs[0])), d, s.stream);
  });
  ctx.add_layer(std::move(layer), ql ? n.name + ":int_conv" : n.name, ins, {acc}, n.origin);
  if (!ql) return Status::Ok();
  RequantDesc r;
  r.count = shape_numel(y);
  if (shape_numel(ctx.shape(n.inputs[1])) != 1) return unsupported(where + "x_scale must be a scalar");
  KILN_RETURN_IF_ERROR(per_or_scalar(ctx, n, 4, d.m, "w_scale", &r.s2_per, where));
  if (present(n, 8) && shape_numel(ctx.shape(n.inputs[8])) != d.m)
    return invalid_argument(where + "B must have one value per output channel");
  r.s2_div = d.out[0] * d.out[1] * d.out[2];  // the output channel of element i (w_scale's and B's index)
  r.s2_mod = d.m;
  return add_requantize(ctx, n, acc, 1, 4, 8, r, where);
}

}  // namespace

Status lower_narrow_int(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  using ir::OpKind;
  // The inputs every op here requires (optional ones are checked by each lowering).
  const size_t required = n.op == OpKind::kBitShift || n.op == OpKind::kMatMulInteger || n.op == OpKind::kConvInteger ? 2 : 1;
  for (size_t k = 0; k < required; ++k)
    if (!present(n, k)) return invalid_argument(where + "input " + std::to_string(k) + " is required");
  switch (n.op) {
    case OpKind::kQuantizeLinear: return lower_quantize(ctx, n, where);
    case OpKind::kDynamicQuantizeLinear: return lower_dynamic_quantize(ctx, n, where);
    case OpKind::kClip: return lower_int_clip(ctx, n, where);
    case OpKind::kBitShift: return lower_bit_shift(ctx, n, where);
    case OpKind::kMatMulInteger: case OpKind::kQLinearMatMul: return lower_int_matmul(ctx, n, where);
    case OpKind::kConvInteger: case OpKind::kQLinearConv: return lower_int_conv(ctx, n, where);
    case OpKind::kMaxPool: {
      // Kiln's N-D pool kernel reads int32 through float: exact for 8- and 16-bit values.
      NarrowType q;
      const DataType dt = declared(ctx, n.inputs[0]);
      if (!narrow_type_of(dt, &q) || q.bits > 16) return unsupported(where + "MaxPool of " + dtype_name(dt));
      return lower_pool(ctx, n, where);
    }
    default: return unsupported(where + "not a narrow integer op");
  }
}

Status lower_dequantize_linear(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (!present(n, 0) || !present(n, 1)) return invalid_argument(where + "x and the scale are required");
  const DataType xt = declared(ctx, n.inputs[0]);
  NarrowType q;
  if ((!narrow_type_of(xt, &q) || q.bits > 16) && xt != DataType::kInt32)
    return unsupported(where + "DequantizeLinear of " + dtype_name(xt));
  KILN_RETURN_IF_ERROR(check_f32(ctx, n, 1, "the scale", where));
  if (ctx.dtype(n.outputs[0]) != DataType::kFloat32)
    return unsupported(where + "output dtype " + dtype_name(ctx.dtype(n.outputs[0])) + " (float32 only)");
  KILN_ASSIGN_OR_RETURN(QuantAxis a, quant_axis(ctx, n, where));
  std::vector<int> ins;
  KILN_RETURN_IF_ERROR(add_operand(ctx, n, 0, StorageType::kI32, &ins).status());
  KILN_RETURN_IF_ERROR(add_operand(ctx, n, 1, StorageType::kF32, &ins).status());
  KILN_ASSIGN_OR_RETURN(int iz, add_operand(ctx, n, 2, StorageType::kI32, &ins));
  auto layer = make_kernel_layer(ir::op_name(n.op), std::string("kiln.dequantize ") + dtype_name(xt),
                                 [=](ExecState& s, const Layer& l) {
                                   return launch_dequantize_linear(in_ptr<const int32_t>(s, l, 0), in_ptr<const float>(s, l, 1),
                                                                   in_ptr<const int32_t>(s, l, iz),
                                                                   static_cast<float*>(s.ptr(l.outs[0])), a, s.stream);
                                 });
  // The float32 result, converted to a 16-bit layer's storage (rounded to nearest even) when the
  // plan computes this layer in fp16 / bf16.
  const StorageType st = ctx.storage();
  const int y = st == StorageType::kF32 ? ctx.new_output(n)
                                        : ctx.new_value(n.name + ":f32", ctx.shape(n.outputs[0]), StorageType::kF32, false);
  ctx.add_layer(std::move(layer), n.name, ins, {y}, n.origin);
  if (st != StorageType::kF32)
    ctx.add_layer(make_cast_layer(a.count, StorageType::kF32, st), n.name + ":to_" + storage_name(st), {y},
                  {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
