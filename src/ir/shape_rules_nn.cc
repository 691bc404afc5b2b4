// Shape rules of the neural-network layers: Conv/ConvInteger/QLinearConv and ConvTranspose
// (auto_pad, output_shape), the pools (ceil_mode, dilations), global pools, RoI pools,
// MaxUnpool, Gemm (transA/transB), MatMul and its integer/quantized forms, GridSample, and the
// recurrent layers RNN/GRU/LSTM (layout attribute since opset 14).
#include "core/checked_size.h"
#include "ir/shape_rules.h"

namespace kiln::ir {
namespace {

// Kernel extents from the kernel_shape attribute or the weight's spatial dims.
std::optional<std::vector<int64_t>> kernel_of(const ShapeContext& ctx, const std::optional<SymShape>& w) {
  if (ctx.node().has_attr("kernel_shape")) return ctx.node().attr_ints("kernel_shape");
  if (!w || w->size() < 2) return std::nullopt;
  std::vector<int64_t> k;
  for (size_t i = 2; i < w->size(); ++i) {
    if (!(*w)[i].is_known()) return std::nullopt;
    k.push_back((*w)[i].value);
  }
  return k;
}

Status conv_like(ShapeContext& ctx, int xi, int wi, DataType out_dtype) {
  const auto& x = ctx.shape(xi);
  const auto& w = ctx.shape(wi);
  if (x && x->size() < 3) return ctx.fail("input rank " + std::to_string(x->size()) + ", expected >= 3");
  if (x && w && w->size() != x->size())
    return ctx.fail("weight rank " + std::to_string(w->size()) + ", expected " + std::to_string(x->size()));
  const int64_t group = ctx.node().attr_int("group", 1);
  if (group <= 0) return ctx.fail("group must be positive");
  if (x && w && (*x)[1].is_known() && (*w)[1].is_known() && (*x)[1].value != __int128{(*w)[1].value} * group)
    return ctx.fail("input has " + std::to_string((*x)[1].value) + " channels, weight expects " +
                    std::to_string((*w)[1].value) + " x group " + std::to_string(group));
  if (!x) { ctx.set_output(0, out_dtype, std::nullopt); return Status::Ok(); }
  const Dim m = w ? (*w)[0] : Dim{};
  const auto k = kernel_of(ctx, w);
  if (!k) {
    SymShape out(x->size());
    out[0] = (*x)[0];
    out[1] = m;
    ctx.set_output(0, out_dtype, out);
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(SymShape out, window_output_shape(ctx, *x, *k, false, m));
  ctx.set_output(0, out_dtype, out);
  return Status::Ok();
}

Status conv_rule(ShapeContext& ctx) { return conv_like(ctx, 0, 1, ctx.dtype(0)); }
// QuantConv (ops.def; docs/decisions/0078, 0081): Y is float (X's dtype, float32 when X is
// already 8-bit) or, with a y_type attribute, the 8-bit codes of that type.
Status quant_conv_rule(ShapeContext& ctx) {
  const std::string yt = ctx.node().attr_string("y_type", "");
  DataType out = ctx.dtype(0);
  if (out == DataType::kInt8 || out == DataType::kFloat8E4M3FN) out = DataType::kFloat32;
  if (!yt.empty()) {
    out = dtype_from_name(yt);
    if (out != DataType::kInt8 && out != DataType::kFloat8E4M3FN)
      return ctx.fail("y_type '" + yt + "', expected int8 or fp8e4m3fn");
  }
  return conv_like(ctx, 0, 1, out);
}
Status conv_integer_rule(ShapeContext& ctx) { return conv_like(ctx, 0, 1, DataType::kInt32); }
Status qlinear_conv_rule(ShapeContext& ctx) {
  return conv_like(ctx, 0, 3, ctx.has_input(7) ? ctx.dtype(7) : ctx.dtype(0));
}

// Operator ConvTranspose-11: out = stride*(in-1) + output_padding + ((k-1)*dilation+1) - pads;
// with auto_pad SAME_* out = in*stride; an explicit output_shape wins.
Status conv_transpose_rule(ShapeContext& ctx) {
  const auto& x = ctx.shape(0);
  const auto& w = ctx.shape(1);
  if (x && x->size() < 3) return ctx.fail("input rank " + std::to_string(x->size()) + ", expected >= 3");
  if (x && w && w->size() != x->size()) return ctx.fail("weight rank " + std::to_string(w->size()) + ", expected " + std::to_string(x->size()));
  const int64_t group = ctx.node().attr_int("group", 1);
  if (x && w && dims_conflict((*x)[1], (*w)[0])) return ctx.fail("input channels " + sym_shape_str(*x) + " differ from weight's first dim " + sym_shape_str(*w));
  if (!x) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  const size_t ns = x->size() - 2;
  SymShape out{(*x)[0], w ? dim_mul((*w)[1], Dim::known(group)) : Dim{}};
  const auto k = kernel_of(ctx, w);
  const auto& n = ctx.node();
  const auto out_shape = n.attr_ints("output_shape");
  if (!out_shape.empty()) {
    if (out_shape.size() < ns) return ctx.fail("output_shape has fewer entries than spatial dims");
    for (size_t i = out_shape.size() - ns; i < out_shape.size(); ++i) out.push_back(Dim::known(out_shape[i]));
    ctx.set_output(0, ctx.dtype(0), out);
    return Status::Ok();
  }
  const auto strides = n.attr_ints("strides", std::vector<int64_t>(ns, 1));
  const auto dil = n.attr_ints("dilations", std::vector<int64_t>(ns, 1));
  const auto opad = n.attr_ints("output_padding", std::vector<int64_t>(ns, 0));
  auto pads = n.attr_ints("pads", std::vector<int64_t>(2 * ns, 0));
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (strides.size() != ns || dil.size() != ns || opad.size() != ns || pads.size() != 2 * ns || (k && k->size() != ns))
    return ctx.fail("strides/dilations/output_padding/pads/kernel do not match " + std::to_string(ns) + " spatial dims");
  for (size_t i = 0; i < ns; ++i) {
    const Dim& in = (*x)[2 + i];
    if (!in.is_known()) { out.push_back(Dim{}); continue; }
    // In 128 bits: attributes near int64's range must not wrap.
    using Wide = __int128;
    Wide o;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      o = Wide{in.value} * strides[i];
    } else {
      if (!k) { out.push_back(Dim{}); continue; }
      const Wide p = auto_pad == "VALID" ? 0 : Wide{pads[i]} + pads[i + ns];
      o = Wide{strides[i]} * (in.value - 1) + opad[i] + Wide{(*k)[i] - 1} * dil[i] + 1 - p;
    }
    if (o < 0) return ctx.fail("output spatial dim would be negative");
    if (o > kMaxTensorElements)
      return ctx.fail("output spatial dim " + wide_str(o) + " passes the largest tensor extent " + std::to_string(kMaxTensorElements));
    out.push_back(Dim::known(static_cast<int64_t>(o)));
  }
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

Status pool_rule(ShapeContext& ctx) {
  const auto& x = ctx.shape(0);
  if (!ctx.node().has_attr("kernel_shape")) return ctx.fail("missing attribute 'kernel_shape'");
  if (x && x->size() < 3) return ctx.fail("input rank " + std::to_string(x->size()) + ", expected >= 3");
  std::optional<SymShape> out;
  if (x) {
    const bool ceil_mode = ctx.node().attr_int("ceil_mode", 0) != 0;
    KILN_ASSIGN_OR_RETURN(out, window_output_shape(ctx, *x, ctx.node().attr_ints("kernel_shape"), ceil_mode, (*x)[1]));
  }
  ctx.set_output(0, ctx.dtype(0), out);
  ctx.set_output(1, DataType::kInt64, out);  // MaxPool's Indices
  return Status::Ok();
}

Status global_pool_rule(ShapeContext& ctx) {
  const auto& x = ctx.shape(0);
  std::optional<SymShape> out;
  if (x) {
    if (x->size() < 2) return ctx.fail("input rank " + std::to_string(x->size()) + ", expected >= 2");
    out = *x;
    for (size_t i = 2; i < out->size(); ++i) (*out)[i] = Dim::known(1);
  }
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

Status roi_pool_rule(ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.expect_rank(0, 4, "input"));
  KILN_RETURN_IF_ERROR(ctx.expect_rank(1, 2, "rois"));
  const auto& x = ctx.shape(0);
  const auto& rois = ctx.shape(1);
  Dim ph, pw;
  if (ctx.node().op == OpKind::kMaxRoiPool) {
    const auto ps = ctx.node().attr_ints("pooled_shape");
    if (ps.size() != 2) return ctx.fail("pooled_shape must have 2 entries");
    ph = Dim::known(ps[0]);
    pw = Dim::known(ps[1]);
  } else {
    ph = Dim::known(ctx.node().attr_int("output_height", 1));
    pw = Dim::known(ctx.node().attr_int("output_width", 1));
  }
  ctx.set_output(0, ctx.dtype(0), SymShape{rois ? (*rois)[0] : Dim{}, x ? (*x)[1] : Dim{}, ph, pw});
  return Status::Ok();
}

Status max_unpool_rule(ShapeContext& ctx) {
  const auto& x = ctx.shape(0);
  if (ctx.has_input(2)) {
    std::optional<SymShape> out;
    if (const SymValues* v = ctx.values(2)) {
      out.emplace();
      for (const SymInt& e : *v) out->push_back(e.to_dim());
    } else if (x) {
      out = SymShape(x->size());
    }
    ctx.set_output(0, ctx.dtype(0), out);
    return Status::Ok();
  }
  if (!x) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  if (x->size() < 3) return ctx.fail("input rank " + std::to_string(x->size()) + ", expected >= 3");
  const auto k = ctx.node().attr_ints("kernel_shape");
  const size_t ns = x->size() - 2;
  if (k.size() != ns) return ctx.fail("kernel_shape must have " + std::to_string(ns) + " entries");
  const auto strides = ctx.node().attr_ints("strides", std::vector<int64_t>(ns, 1));
  const auto pads = ctx.node().attr_ints("pads", std::vector<int64_t>(2 * ns, 0));
  if (strides.size() != ns || pads.size() != 2 * ns) return ctx.fail("strides/pads do not match the spatial dims");
  SymShape out{(*x)[0], (*x)[1]};
  for (size_t i = 0; i < ns; ++i) {
    const Dim& d = (*x)[2 + i];
    if (!d.is_known()) { out.push_back(Dim{}); continue; }
    // In 128 bits: attributes near int64's range must not wrap.
    const __int128 o = __int128{d.value - 1} * strides[i] + k[i] - pads[i] - __int128{pads[i + ns]};
    if (o < 0 || o > kMaxTensorElements)
      return ctx.fail("output spatial dim " + wide_str(o) + " is negative or passes the largest tensor extent " + std::to_string(kMaxTensorElements));
    out.push_back(Dim::known(static_cast<int64_t>(o)));
  }
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

Status gemm_rule(ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.expect_rank(0, 2, "A"));
  KILN_RETURN_IF_ERROR(ctx.expect_rank(1, 2, "B"));
  const auto& a = ctx.shape(0);
  const auto& b = ctx.shape(1);
  const bool ta = ctx.node().attr_int("transA", 0) != 0, tb = ctx.node().attr_int("transB", 0) != 0;
  const Dim m = a ? (*a)[ta ? 1 : 0] : Dim{};
  const Dim ka = a ? (*a)[ta ? 0 : 1] : Dim{};
  const Dim kb = b ? (*b)[tb ? 1 : 0] : Dim{};
  const Dim n = b ? (*b)[tb ? 0 : 1] : Dim{};
  if (dims_conflict(ka, kb))
    return ctx.fail("inner dims differ: A " + sym_shape_str(*a) + (ta ? " (transposed)" : "") + ", B " + sym_shape_str(*b) + (tb ? " (transposed)" : ""));
  SymShape out{m, n};
  if (const auto& c = ctx.shape(2); c && c->size() <= 2) {
    // C broadcasts unidirectionally onto (M, N).
    for (size_t i = 0; i < c->size(); ++i) {
      const Dim& cd = (*c)[i];
      const Dim& od = out[2 - c->size() + i];
      if (cd.is_known() && cd.value != 1 && dims_conflict(cd, od))
        return ctx.fail("C " + sym_shape_str(*c) + " does not broadcast to " + sym_shape_str(out));
    }
  }
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

Status matmul_rule(ShapeContext& ctx) {
  KILN_ASSIGN_OR_RETURN(auto s, matmul_shape(ctx, ctx.shape(0), ctx.shape(1)));
  ctx.set_output(0, ctx.dtype(0), s);
  return Status::Ok();
}

Status matmul_integer_rule(ShapeContext& ctx) {
  KILN_ASSIGN_OR_RETURN(auto s, matmul_shape(ctx, ctx.shape(0), ctx.shape(1)));
  ctx.set_output(0, DataType::kInt32, s);
  return Status::Ok();
}

Status qlinear_matmul_rule(ShapeContext& ctx) {
  KILN_ASSIGN_OR_RETURN(auto s, matmul_shape(ctx, ctx.shape(0), ctx.shape(3)));
  ctx.set_output(0, ctx.has_input(7) ? ctx.dtype(7) : ctx.dtype(0), s);
  return Status::Ok();
}

Status grid_sample_rule(ShapeContext& ctx) {
  const auto& x = ctx.shape(0);
  const auto& grid = ctx.shape(1);
  if (x && grid && x->size() != grid->size()) return ctx.fail("grid rank " + std::to_string(grid->size()) + " differs from input rank " + std::to_string(x->size()));
  if (!x || !grid) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  if (x->size() < 3) return ctx.fail("input rank must be >= 3");
  SymShape out{unify_dim((*x)[0], (*grid)[0]), (*x)[1]};
  out.insert(out.end(), grid->begin() + 1, grid->end() - 1);
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

// RNN/GRU/LSTM (layout 0): X [seq, batch, in] -> Y [seq, dirs, batch, hidden],
// Y_h (and LSTM's Y_c) [dirs, batch, hidden]; layout 1 puts batch first.
Status recurrent_rule(ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.expect_rank(0, 3, "X"));
  const auto& x = ctx.shape(0);
  const auto& r = ctx.shape(2);
  const int64_t dirs = ctx.node().attr_string("direction", "forward") == "bidirectional" ? 2 : 1;
  Dim hidden = ctx.node().has_attr("hidden_size") ? Dim::known(ctx.node().attr_int("hidden_size", 0))
                                                  : (r && r->size() == 3 ? (*r)[2] : Dim{});
  const bool batch_first = ctx.opset() >= 14 && ctx.node().attr_int("layout", 0) == 1;
  const Dim seq = x ? (*x)[batch_first ? 1 : 0] : Dim{};
  const Dim batch = x ? (*x)[batch_first ? 0 : 1] : Dim{};
  const Dim nd = Dim::known(dirs);
  if (batch_first) {
    ctx.set_output(0, ctx.dtype(0), SymShape{batch, seq, nd, hidden});
    for (int k = 1; k < 3; ++k) ctx.set_output(k, ctx.dtype(0), SymShape{batch, nd, hidden});
  } else {
    ctx.set_output(0, ctx.dtype(0), SymShape{seq, nd, batch, hidden});
    for (int k = 1; k < 3; ++k) ctx.set_output(k, ctx.dtype(0), SymShape{nd, batch, hidden});
  }
  return Status::Ok();
}

}  // namespace

void register_nn_shape_rules(ShapeRuleTable& t) {
  t.add(OpKind::kConv, conv_rule);
  t.add(OpKind::kFusedConv, conv_rule);  // act(Conv(x, W, B) + R): Conv's output shape
  t.add(OpKind::kQuantConv, quant_conv_rule);  // 8-bit Conv (+ bias, residual, Relu): Conv's output shape
  t.add(OpKind::kConvInteger, conv_integer_rule);
  t.add(OpKind::kQLinearConv, qlinear_conv_rule);
  t.add(OpKind::kConvTranspose, conv_transpose_rule);
  for (OpKind op : {OpKind::kAveragePool, OpKind::kMaxPool, OpKind::kLpPool}) t.add(op, pool_rule);
  for (OpKind op : {OpKind::kGlobalAveragePool, OpKind::kGlobalMaxPool, OpKind::kGlobalLpPool}) t.add(op, global_pool_rule);
  t.add(OpKind::kMaxRoiPool, roi_pool_rule);
  t.add(OpKind::kRoiAlign, roi_pool_rule);
  t.add(OpKind::kMaxUnpool, max_unpool_rule);
  t.add(OpKind::kGemm, gemm_rule);
  t.add(OpKind::kMatMul, matmul_rule);
  t.add(OpKind::kMatMulInteger, matmul_integer_rule);
  t.add(OpKind::kQLinearMatMul, qlinear_matmul_rule);
  t.add(OpKind::kGridSample, grid_sample_rule);
  for (OpKind op : {OpKind::kRNN, OpKind::kGRU, OpKind::kLSTM}) t.add(op, recurrent_rule);
}

}  // namespace kiln::ir
