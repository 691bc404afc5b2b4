// Shape rules of data-movement ops whose output shape is a rearrangement of the input's:
// Reshape (0 copies a dim, -1 is inferred, symbolically when the symbols cancel), Flatten,
// Transpose, Squeeze/Unsqueeze (axes attribute before opset 13, input since), Concat, Split,
// Expand, Tile, DepthToSpace/SpaceToDepth, and the shape-tensor producers Shape, Size,
// ConstantOfShape. Shape tensors' element values are tracked through all of these.
#include <algorithm>
#include <map>

#include "core/checked_size.h"
#include "core/numerics.h"
#include "ir/shape_rules.h"

namespace kiln::ir {
namespace {

// A product of dims as constant * (multiset of symbols); `ok` false when a factor is unknown;
// `overflow` when the constant part passes int64 (no tensor has that many elements).
struct SymProduct {
  int64_t c = 1;
  std::map<std::string, int> syms;
  bool ok = true;
  bool overflow = false;
  void times(const Dim& d) {
    if (d.is_known()) overflow = overflow || !checked_mul(c, d.value, &c);
    else if (!d.symbol.empty()) ++syms[d.symbol];
    else ok = false;
  }
};

// The -1 of a Reshape target: in / (product of the other output dims), when it is a whole
// number of known extent or a single surviving symbol.
StatusOr<Dim> infer_minus_one(const ShapeContext& ctx, const SymShape& in, const SymShape& out, size_t at) {
  SymProduct pi, po;
  for (const Dim& d : in) pi.times(d);
  for (size_t i = 0; i < out.size(); ++i)
    if (i != at) po.times(out[i]);
  if (pi.overflow || po.overflow)
    return ctx.fail("cannot reshape " + sym_shape_str(in) + " to " + sym_shape_str(out) + " (the element count overflows)");
  if (!pi.ok || !po.ok || po.c == 0) return Dim{};
  for (auto& [s, n] : po.syms) {
    auto it = pi.syms.find(s);
    if (it == pi.syms.end() || it->second < n) return Dim{};
    it->second -= n;
  }
  int left = 0;
  std::string sym;
  for (auto& [s, n] : pi.syms) {
    left += n;
    if (n) sym = s;
  }
  if (pi.c % po.c != 0) {
    if (left == 0) return ctx.fail("cannot reshape " + sym_shape_str(in) + " to " + sym_shape_str(out) + " (with -1)");
    return Dim{};
  }
  const int64_t q = pi.c / po.c;
  if (left == 0) return Dim::known(q);
  if (left == 1 && q == 1) return Dim::sym(sym);
  return Dim{};
}

Status reshape_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  SymValues target;
  if (ctx.opset() > 0 && ctx.opset() < 5) {
    for (int64_t v : ctx.node().attr_ints("shape")) target.push_back(SymInt::constant(v));
  } else if (ctx.values(1)) {
    target = *ctx.values(1);
  } else {
    const auto& ts = ctx.shape(1);
    if (ts && ts->size() == 1 && (*ts)[0].is_known())
      ctx.set_output(0, ctx.dtype(0), SymShape(static_cast<size_t>((*ts)[0].value)));
    else
      ctx.set_output(0, ctx.dtype(0), std::nullopt);
    return Status::Ok();
  }
  const bool allow_zero = ctx.opset() >= 14 && ctx.node().attr_int("allowzero", 0) != 0;
  SymShape out;
  int minus_one = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    const SymInt& t = target[i];
    if (t.is_const(0) && !allow_zero) {
      if (!in) { out.push_back(Dim{}); continue; }
      if (i >= in->size()) return ctx.fail("shape[" + std::to_string(i) + "] = 0 copies a dim the input (rank " + std::to_string(in->size()) + ") lacks");
      out.push_back((*in)[i]);
    } else if (t.is_const(-1)) {
      if (minus_one >= 0) return ctx.fail("shape has more than one -1");
      minus_one = static_cast<int>(i);
      out.push_back(Dim{});
    } else if (t.is_const() && t.c < -1) {
      return ctx.fail("shape[" + std::to_string(i) + "] = " + std::to_string(t.c) + " is invalid");
    } else {
      out.push_back(t.to_dim());
    }
  }
  if (in) {
    if (minus_one >= 0) {
      KILN_ASSIGN_OR_RETURN(out[minus_one], infer_minus_one(ctx, *in, out, minus_one));
    } else {
      SymProduct pi, po;
      for (const Dim& d : *in) pi.times(d);
      for (const Dim& d : out) po.times(d);
      if (pi.overflow || po.overflow)
        return ctx.fail("cannot reshape " + sym_shape_str(*in) + " to " + sym_shape_str(out) + " (the element count overflows)");
      if (pi.ok && po.ok && pi.syms.empty() && po.syms.empty() && pi.c != po.c)
        return ctx.fail("cannot reshape " + sym_shape_str(*in) + " (" + std::to_string(pi.c) + " elements) to " + sym_shape_str(out));
    }
  }
  ctx.set_output(0, ctx.dtype(0), out);
  if (ctx.values(0) && out.size() <= 1) ctx.set_values(0, *ctx.values(0));
  return Status::Ok();
}

Status flatten_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  if (!in) { ctx.set_output(0, ctx.dtype(0), SymShape(2)); return Status::Ok(); }
  const int r = static_cast<int>(in->size());
  int64_t axis = ctx.node().attr_int("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) return ctx.fail("axis " + std::to_string(ctx.node().attr_int("axis", 1)) + " out of range for rank " + std::to_string(r));
  ctx.set_output(0, ctx.dtype(0), SymShape{dim_product(*in, 0, axis), dim_product(*in, axis, r)});
  return Status::Ok();
}

Status transpose_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  if (!in) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  const int r = static_cast<int>(in->size());
  std::vector<int64_t> perm = ctx.node().attr_ints("perm");
  if (perm.empty())
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int>(perm.size()) != r) return ctx.fail("perm has " + std::to_string(perm.size()) + " entries, input rank is " + std::to_string(r));
  std::vector<char> seen(r, 0);
  SymShape out;
  for (int64_t p : perm) {
    int64_t a;
    if (!normalize_axis(p, r, &a) || seen[a]) return ctx.fail("perm is not a permutation of 0.." + std::to_string(r - 1));
    seen[a] = 1;
    out.push_back((*in)[a]);
  }
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

Status squeeze_rule(ShapeContext& ctx) {
  const auto axes = axes_from(ctx, "axes", 1, ctx.opset() >= 13);
  const auto& in = ctx.shape(0);
  if (!in || !axes) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  const int r = static_cast<int>(in->size());
  std::vector<char> drop(r, 0);
  if (axes->empty()) {
    for (int i = 0; i < r; ++i) {
      if (!(*in)[i].is_known()) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
      drop[i] = (*in)[i].value == 1;
    }
  }
  for (int64_t a : *axes) {
    int64_t n;
    if (!normalize_axis(a, r, &n)) return ctx.fail("axis " + std::to_string(a) + " out of range for rank " + std::to_string(r));
    if ((*in)[n].is_known() && (*in)[n].value != 1)
      return ctx.fail("cannot squeeze axis " + std::to_string(a) + " of extent " + std::to_string((*in)[n].value));
    drop[n] = 1;
  }
  SymShape out;
  for (int i = 0; i < r; ++i)
    if (!drop[i]) out.push_back((*in)[i]);
  ctx.set_output(0, ctx.dtype(0), out);
  if (ctx.values(0)) ctx.set_values(0, *ctx.values(0));
  return Status::Ok();
}

Status unsqueeze_rule(ShapeContext& ctx) {
  const auto axes = axes_from(ctx, "axes", 1, ctx.opset() >= 13);
  const auto& in = ctx.shape(0);
  if (!in || !axes) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  const int r = static_cast<int>(in->size() + axes->size());
  std::vector<char> ins(r, 0);
  for (int64_t a : *axes) {
    int64_t n;
    if (!normalize_axis(a, r, &n)) return ctx.fail("axis " + std::to_string(a) + " out of range for output rank " + std::to_string(r));
    if (ins[n]) return ctx.fail("axis " + std::to_string(a) + " repeated");
    ins[n] = 1;
  }
  SymShape out;
  size_t k = 0;
  for (int i = 0; i < r; ++i) out.push_back(ins[i] ? Dim::known(1) : (*in)[k++]);
  ctx.set_output(0, ctx.dtype(0), out);
  if (ctx.values(0)) ctx.set_values(0, *ctx.values(0));
  return Status::Ok();
}

Status concat_rule(ShapeContext& ctx) {
  if (!ctx.node().has_attr("axis") && ctx.opset() >= 4) return ctx.fail("missing attribute 'axis'");
  std::optional<SymShape> out;
  int64_t axis = 0;
  bool all_ranked = true;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const auto& s = ctx.shape(i);
    if (!s) { all_ranked = false; continue; }
    if (!out) {
      if (!normalize_axis(ctx.node().attr_int("axis", 1), static_cast<int>(s->size()), &axis))
        return ctx.fail("axis " + std::to_string(ctx.node().attr_int("axis", 1)) + " out of range for rank " + std::to_string(s->size()));
      out = *s;
      continue;
    }
    if (s->size() != out->size())
      return ctx.fail("input " + std::to_string(i) + " has rank " + std::to_string(s->size()) + ", expected " + std::to_string(out->size()));
    for (size_t d = 0; d < s->size(); ++d) {
      if (static_cast<int64_t>(d) == axis) { (*out)[d] = dim_add((*out)[d], (*s)[d]); continue; }
      if (dims_conflict((*out)[d], (*s)[d]))
        return ctx.fail("input " + std::to_string(i) + " shape " + sym_shape_str(*s) + " differs from " + sym_shape_str(*out) + " outside axis " + std::to_string(axis));
      (*out)[d] = unify_dim((*out)[d], (*s)[d]);
    }
  }
  if (out && !all_ranked) (*out)[axis] = Dim{};
  ctx.set_output(0, ctx.dtype(0), out);
  SymValues vals;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.values(i)) return Status::Ok();
    vals.insert(vals.end(), ctx.values(i)->begin(), ctx.values(i)->end());
  }
  if (out && out->size() == 1) ctx.set_values(0, vals);
  return Status::Ok();
}

Status split_rule(ShapeContext& ctx) {
  const int n_out = ctx.num_outputs();
  const auto& in = ctx.shape(0);
  if (!in) {
    for (int k = 0; k < n_out; ++k) ctx.set_output(k, ctx.dtype(0), std::nullopt);
    return Status::Ok();
  }
  int64_t axis;
  if (!normalize_axis(ctx.node().attr_int("axis", 0), static_cast<int>(in->size()), &axis))
    return ctx.fail("axis out of range for rank " + std::to_string(in->size()));
  std::optional<std::vector<int64_t>> split;
  if (ctx.opset() >= 13) {
    if (ctx.has_input(1)) split = ctx.const_ints(1);
    else split = std::vector<int64_t>{};
  } else {
    split = ctx.node().attr_ints("split");
    if (split->empty() && ctx.has_input(1)) split = ctx.const_ints(1);  // Split-1's optional input
  }
  const Dim& d = (*in)[axis];
  std::vector<Dim> sizes(n_out);
  if (split && !split->empty()) {
    if (static_cast<int>(split->size()) != n_out) return ctx.fail("split has " + std::to_string(split->size()) + " entries for " + std::to_string(n_out) + " outputs");
    int64_t total = 0;
    for (int k = 0; k < n_out; ++k) { sizes[k] = Dim::known((*split)[k]); total += (*split)[k]; }
    if (d.is_known() && total != d.value) return ctx.fail("split sizes sum to " + std::to_string(total) + ", axis extent is " + std::to_string(d.value));
  } else if (split && d.is_known()) {
    // Equal parts; Split-18 with num_outputs allows a smaller last part (ceil division).
    const int64_t part = d.value / n_out + (d.value % n_out != 0);
    if (ctx.opset() < 18 && d.value % n_out) return ctx.fail("axis extent " + std::to_string(d.value) + " is not divisible into " + std::to_string(n_out) + " outputs");
    for (int k = 0; k < n_out; ++k) sizes[k] = Dim::known(std::max<int64_t>(0, std::min(part, d.value - part * k)));
  } else if (split && n_out == 1) {
    sizes[0] = d;
  }
  int64_t offset = 0;
  const SymValues* vals = ctx.values(0);
  for (int k = 0; k < n_out; ++k) {
    SymShape s = *in;
    s[axis] = sizes[k];
    ctx.set_output(k, ctx.dtype(0), s);
    if (vals && in->size() == 1 && sizes[k].is_known() && offset + sizes[k].value <= static_cast<int64_t>(vals->size())) {
      ctx.set_values(k, SymValues(vals->begin() + offset, vals->begin() + offset + sizes[k].value));
      offset += sizes[k].value;
    } else {
      vals = nullptr;
    }
  }
  return Status::Ok();
}

Status expand_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  SymShape target;
  if (ctx.values(1)) {
    for (const SymInt& v : *ctx.values(1)) target.push_back(v.to_dim());
  } else {
    const auto& ts = ctx.shape(1);
    if (!ts || ts->size() != 1 || !(*ts)[0].is_known()) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
    target = SymShape(static_cast<size_t>((*ts)[0].value));
  }
  if (!in) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  const size_t n = std::max(in->size(), target.size());
  SymShape out(n);
  for (size_t k = 0; k < n; ++k) {
    const Dim a = k + in->size() >= n ? (*in)[k + in->size() - n] : Dim::known(1);
    const Dim b = k + target.size() >= n ? target[k + target.size() - n] : Dim::known(1);
    if (!broadcast_dim(a, b, &out[k]))
      return ctx.fail("cannot expand " + sym_shape_str(*in) + " to " + sym_shape_str(target));
  }
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

Status tile_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  if (!in) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  const SymValues* reps = ctx.values(1);
  if (!reps) { ctx.set_output(0, ctx.dtype(0), SymShape(in->size())); return Status::Ok(); }
  if (reps->size() != in->size()) return ctx.fail("repeats has " + std::to_string(reps->size()) + " entries, input rank is " + std::to_string(in->size()));
  SymShape out;
  for (size_t i = 0; i < in->size(); ++i) {
    if ((*reps)[i].is_const() && (*reps)[i].c < 0) return ctx.fail("repeats must be >= 0");
    out.push_back(dim_mul((*in)[i], (*reps)[i].to_dim()));
  }
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

Status shape_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  if (!in) { ctx.set_output(0, DataType::kInt64, SymShape(1)); return Status::Ok(); }
  // Shape-15: start/end select a slice of the dims (clamped, negatives from the back).
  const int64_t r = static_cast<int64_t>(in->size());
  int64_t start = ctx.opset() >= 15 ? ctx.node().attr_int("start", 0) : 0;
  int64_t end = ctx.opset() >= 15 ? ctx.node().attr_int("end", r) : r;
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  SymValues vals;
  for (int64_t i = start; i < end; ++i) vals.push_back(SymInt::from_dim((*in)[i]));
  ctx.set_output(0, DataType::kInt64, SymShape{Dim::known(static_cast<int64_t>(vals.size()))});
  ctx.set_values(0, vals);
  return Status::Ok();
}

Status size_rule(ShapeContext& ctx) {
  ctx.set_output(0, DataType::kInt64, SymShape{});
  if (ctx.shape(0)) ctx.set_values(0, {SymInt::from_dim(dim_product(*ctx.shape(0), 0, ctx.shape(0)->size()))});
  return Status::Ok();
}

Status constant_of_shape_rule(ShapeContext& ctx) {
  DataType dt = DataType::kFloat32;
  std::optional<int64_t> fill = 0;
  auto it = ctx.node().attrs.find("value");
  if (it != ctx.node().attrs.end() && it->second.t) {
    const Tensor& v = *it->second.t;
    if (v.numel() != 1) return ctx.fail("attribute 'value' must hold one element");
    dt = v.dtype();
    fill = dtype_is_integer(dt) ? std::optional<int64_t>(load_as_int64(dt, v.raw(), 0)) : std::nullopt;
  }
  std::optional<SymShape> out;
  if (ctx.values(0)) {
    out.emplace();
    for (const SymInt& v : *ctx.values(0)) {
      if (v.is_const() && v.c < 0) return ctx.fail("shape has a negative entry " + std::to_string(v.c));
      out->push_back(v.to_dim());
    }
  } else if (ctx.shape(0) && ctx.shape(0)->size() == 1 && (*ctx.shape(0))[0].is_known()) {
    out = SymShape(static_cast<size_t>((*ctx.shape(0))[0].value));
  }
  ctx.set_output(0, dt, out);
  if (out && out->size() <= 1 && fill && dtype_is_integer(dt)) {
    const Dim n = out->empty() ? Dim::known(1) : (*out)[0];
    if (n.is_known() && n.value <= 64) ctx.set_values(0, SymValues(static_cast<size_t>(n.value), SymInt::constant(*fill)));
  }
  return Status::Ok();
}

// Constant nodes are folded at import; one built by a pass still gets its type here.
Status constant_rule(ShapeContext& ctx) {
  const Node& n = ctx.node();
  auto it = n.attrs.find("value");
  if (it != n.attrs.end() && it->second.t) {
    const Tensor& t = *it->second.t;
    SymShape s;
    for (int64_t d : t.shape()) s.push_back(Dim::known(d));
    ctx.set_output(0, t.dtype(), s);
    if (dtype_is_integer(t.dtype()) && t.rank() <= 1 && t.numel() <= 64) {
      SymValues v;
      for (int64_t i = 0; i < t.numel(); ++i) v.push_back(SymInt::constant(load_as_int64(t.dtype(), t.raw(), i)));
      ctx.set_values(0, v);
    }
  } else if (n.has_attr("value_int")) {
    ctx.set_output(0, DataType::kInt64, SymShape{});
    ctx.set_values(0, {SymInt::constant(n.attr_int("value_int", 0))});
  } else if (n.has_attr("value_float")) {
    ctx.set_output(0, DataType::kFloat32, SymShape{});
  } else if (n.has_attr("value_ints")) {
    const auto v = n.attr_ints("value_ints");
    ctx.set_output(0, DataType::kInt64, SymShape{Dim::known(static_cast<int64_t>(v.size()))});
    SymValues sv;
    for (int64_t e : v) sv.push_back(SymInt::constant(e));
    ctx.set_values(0, sv);
  } else if (n.has_attr("value_floats")) {
    ctx.set_output(0, DataType::kFloat32, SymShape{Dim::known(static_cast<int64_t>(n.attr_floats("value_floats").size()))});
  } else {
    return ctx.fail("no supported value attribute");
  }
  return Status::Ok();
}

Status depth_space_rule(ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.expect_rank(0, 4, "input"));
  const auto& in = ctx.shape(0);
  const int64_t b = ctx.node().attr_int("blocksize", 0);
  if (b <= 0 || b > (int64_t{1} << 24)) return ctx.fail("blocksize must be positive (and at most 2^24)");
  if (!in) { ctx.set_output(0, ctx.dtype(0), SymShape(4)); return Status::Ok(); }
  SymShape out = *in;
  const Dim bb = Dim::known(b), b2 = Dim::known(b * b);
  if (ctx.node().op == OpKind::kDepthToSpace) {
    const Dim& c = (*in)[1];
    if (c.is_known() && c.value % (b * b)) return ctx.fail("channels " + std::to_string(c.value) + " not divisible by blocksize^2");
    out[1] = c.is_known() ? Dim::known(c.value / (b * b)) : Dim{};
    out[2] = dim_mul((*in)[2], bb);
    out[3] = dim_mul((*in)[3], bb);
  } else {
    for (int i = 2; i < 4; ++i) {
      const Dim& d = (*in)[i];
      if (d.is_known() && d.value % b) return ctx.fail("spatial dim " + std::to_string(d.value) + " not divisible by blocksize");
      out[i] = d.is_known() ? Dim::known(d.value / b) : Dim{};
    }
    out[1] = dim_mul((*in)[1], b2);
  }
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

}  // namespace

void register_movement_shape_rules(ShapeRuleTable& t) {
  t.add(OpKind::kReshape, reshape_rule);
  t.add(OpKind::kFlatten, flatten_rule);
  t.add(OpKind::kTranspose, transpose_rule);
  t.add(OpKind::kSqueeze, squeeze_rule);
  t.add(OpKind::kUnsqueeze, unsqueeze_rule);
  t.add(OpKind::kConcat, concat_rule);
  t.add(OpKind::kSplit, split_rule);
  t.add(OpKind::kExpand, expand_rule);
  t.add(OpKind::kTile, tile_rule);
  t.add(OpKind::kShape, shape_rule);
  t.add(OpKind::kSize, size_rule);
  t.add(OpKind::kConstantOfShape, constant_of_shape_rule);
  t.add(OpKind::kConstant, constant_rule);
  t.add(OpKind::kDepthToSpace, depth_space_rule);
  t.add(OpKind::kSpaceToDepth, depth_space_rule);
}

}  // namespace kiln::ir
