// Shape rules of indexing and resampling ops: Slice (attributes before opset 10, inputs since;
// negative steps), Gather/GatherElements/GatherND, the Scatter family, Pad (paddings/pads
// attributes before opset 11, inputs since, axes since 18), Resize/Upsample, Compress, OneHot,
// EyeLike, Range, and the data-dependent NonZero/Unique (unknown dims, not errors).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/checked_size.h"
#include "ir/shape_rules.h"

namespace kiln::ir {
namespace {

// Elements selected along one axis of extent d by (start, end, step), per Operator Slice-13.
int64_t slice_count(int64_t d, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += d;
  if (end < 0) end += d;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, d);
    end = std::clamp<int64_t>(end, 0, d);
    return end > start ? (end - start + step - 1) / step : 0;
  }
  start = std::clamp<int64_t>(start, 0, d - 1);
  end = std::clamp<int64_t>(end, -1, d - 1);
  return start > end ? (start - end + (-step) - 1) / (-step) : 0;
}

int64_t slice_first(int64_t d, int64_t start, int64_t step) {
  if (start < 0) start += d;
  return step > 0 ? std::clamp<int64_t>(start, 0, d) : std::clamp<int64_t>(start, 0, d - 1);
}

Status slice_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (ctx.opset() > 0 && ctx.opset() < 10) {
    starts = ctx.node().attr_ints("starts");
    ends = ctx.node().attr_ints("ends");
    axes = ctx.node().attr_ints("axes");
  } else {
    starts = ctx.const_ints(1);
    ends = ctx.const_ints(2);
    axes = ctx.has_input(3) ? ctx.const_ints(3) : std::vector<int64_t>{};
    steps = ctx.has_input(4) ? ctx.const_ints(4) : std::vector<int64_t>{};
  }
  if (!in) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  const int r = static_cast<int>(in->size());
  if (!starts || !ends || !axes || (ctx.opset() >= 10 && !steps)) {
    // Unknown slicing parameters: the rank survives; sliced axes, if known, become unknown.
    SymShape out = *in;
    if (axes && !axes->empty()) {
      for (int64_t a : *axes) {
        int64_t n;
        if (normalize_axis(a, r, &n)) out[n] = Dim{};
      }
    } else {
      out = SymShape(r);
    }
    ctx.set_output(0, ctx.dtype(0), out);
    return Status::Ok();
  }
  if (starts->size() != ends->size()) return ctx.fail("starts and ends differ in length");
  if (axes->empty())
    for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i));
  if (!steps || steps->empty()) steps = std::vector<int64_t>(starts->size(), 1);
  if (axes->size() != starts->size() || steps->size() != starts->size())
    return ctx.fail("starts, ends, axes and steps differ in length");
  SymShape out = *in;
  std::vector<char> seen(r, 0);
  for (size_t i = 0; i < axes->size(); ++i) {
    int64_t a;
    if (!normalize_axis((*axes)[i], r, &a)) return ctx.fail("axis " + std::to_string((*axes)[i]) + " out of range for rank " + std::to_string(r));
    if (seen[a]) return ctx.fail("axis " + std::to_string((*axes)[i]) + " repeated");
    seen[a] = 1;
    const int64_t st = (*steps)[i];
    if (st == 0) return ctx.fail("step 0 is invalid");
    const Dim& d = (*in)[a];
    if (d.is_known()) {
      out[a] = Dim::known(slice_count(d.value, (*starts)[i], (*ends)[i], st));
    } else {
      // A symbolic extent survives only a full forward slice.
      const bool full = st == 1 && (*starts)[i] == 0 && (*ends)[i] >= std::numeric_limits<int32_t>::max();
      out[a] = full ? d : Dim{};
    }
  }
  ctx.set_output(0, ctx.dtype(0), out);
  if (const SymValues* v = ctx.values(0); v && r == 1 && out[0].is_known()) {
    const int64_t d = static_cast<int64_t>(v->size());
    const int64_t first = slice_first(d, (*starts)[0], (*steps)[0]);
    SymValues sv;
    for (int64_t k = 0, p = first; k < out[0].value; ++k, p += (*steps)[0]) sv.push_back((*v)[p]);
    ctx.set_values(0, sv);
  }
  return Status::Ok();
}

Status gather_rule(ShapeContext& ctx) {
  const auto& data = ctx.shape(0);
  const auto& idx = ctx.shape(1);
  if (!data || !idx) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  const int r = static_cast<int>(data->size());
  if (r == 0) return ctx.fail("data must have rank >= 1");
  int64_t axis;
  if (!normalize_axis(ctx.node().attr_int("axis", 0), r, &axis)) return ctx.fail("axis " + std::to_string(ctx.node().attr_int("axis", 0)) + " out of range for rank " + std::to_string(r));
  SymShape out(data->begin(), data->begin() + axis);
  out.insert(out.end(), idx->begin(), idx->end());
  out.insert(out.end(), data->begin() + axis + 1, data->end());
  ctx.set_output(0, ctx.dtype(0), out);
  const SymValues* v = ctx.values(0);
  auto ix = ctx.const_ints(1);
  if (v && ix && r == 1 && idx->size() <= 1) {
    SymValues sv;
    const int64_t n = static_cast<int64_t>(v->size());
    for (int64_t i : *ix) {
      if (i < -n || i >= n) return ctx.fail("index " + std::to_string(i) + " out of range for extent " + std::to_string(n));
      sv.push_back((*v)[i < 0 ? i + n : i]);
    }
    ctx.set_values(0, sv);
  }
  return Status::Ok();
}

Status gather_elements_rule(ShapeContext& ctx) {
  const auto& data = ctx.shape(0);
  const auto& idx = ctx.shape(1);
  if (data && idx && data->size() != idx->size()) return ctx.fail("indices rank " + std::to_string(idx->size()) + " differs from data rank " + std::to_string(data->size()));
  ctx.set_output(0, ctx.dtype(0), idx);
  return Status::Ok();
}

Status gather_nd_rule(ShapeContext& ctx) {
  const auto& data = ctx.shape(0);
  const auto& idx = ctx.shape(1);
  if (!data || !idx || idx->empty() || !idx->back().is_known()) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  const int64_t b = ctx.node().attr_int("batch_dims", 0);
  const int64_t last = idx->back().value;
  if (b + last > static_cast<int64_t>(data->size())) return ctx.fail("indices' last dim " + std::to_string(last) + " plus batch_dims exceeds data rank " + std::to_string(data->size()));
  SymShape out(idx->begin(), idx->end() - 1);
  out.insert(out.end(), data->begin() + b + last, data->end());
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

Status scatter_rule(ShapeContext& ctx) {
  ctx.set_output(0, ctx.dtype(0), ctx.shape(0));
  return Status::Ok();
}

Status pad_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  std::optional<std::vector<int64_t>> pads;
  std::optional<std::vector<int64_t>> axes = std::vector<int64_t>{};
  if (ctx.opset() > 0 && ctx.opset() < 11) {
    pads = ctx.node().attr_ints(ctx.opset() < 2 ? "paddings" : "pads");
  } else {
    pads = ctx.const_ints(1);
    if (ctx.opset() >= 18 && ctx.has_input(3)) axes = ctx.const_ints(3);
  }
  if (!in) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  const int r = static_cast<int>(in->size());
  if (!pads || !axes) { ctx.set_output(0, ctx.dtype(0), SymShape(r)); return Status::Ok(); }
  if (axes->empty())
    for (int i = 0; i < r; ++i) axes->push_back(i);
  if (pads->size() != 2 * axes->size())
    return ctx.fail("pads has " + std::to_string(pads->size()) + " entries, expected " + std::to_string(2 * axes->size()));
  SymShape out = *in;
  const size_t na = axes->size();
  for (size_t i = 0; i < na; ++i) {
    int64_t a;
    if (!normalize_axis((*axes)[i], r, &a)) return ctx.fail("axis out of range for rank " + std::to_string(r));
    const __int128 add = __int128{(*pads)[i]} + (*pads)[i + na];  // 128 bits: huge pads must not wrap
    if (out[a].is_known()) {
      const __int128 extent = out[a].value + add;
      if (extent < 0) return ctx.fail("negative pads remove more than the extent of axis " + std::to_string(a));
      if (extent > kMaxTensorElements) return ctx.fail("pads make axis " + std::to_string(a) + " longer than the largest tensor extent");
      out[a] = Dim::known(static_cast<int64_t>(extent));
    } else if (add != 0) {
      out[a] = Dim{};
    }
  }
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

bool input_empty(const ShapeContext& ctx, int i) {
  if (!ctx.has_input(i)) return true;
  const auto& s = ctx.shape(i);
  return s && s->size() == 1 && s->at(0).is_known() && s->at(0).value == 0;
}

// Resize-10/11/13/18 and Upsample-7/9: sizes win; otherwise floor(in * scale) per axis.
Status resize_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  if (!in) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  const int r = static_cast<int>(in->size());
  const bool upsample = ctx.node().op == OpKind::kUpsample;
  int scales_in = -1, sizes_in = -1;
  if (upsample) scales_in = ctx.opset() >= 9 ? 1 : -1;
  else if (ctx.opset() == 10) scales_in = 1;
  else { scales_in = 2; sizes_in = 3; }
  std::vector<int64_t> axes = ctx.node().attr_ints("axes");
  if (axes.empty() || ctx.opset() < 18)
    for (int i = static_cast<int>(axes.size()); i < r; ++i) axes.push_back(i);
  for (int64_t& a : axes)
    if (!normalize_axis(a, r, &a)) return ctx.fail("axis out of range for rank " + std::to_string(r));
  SymShape out = *in;
  if (sizes_in >= 0 && !input_empty(ctx, sizes_in)) {
    const SymValues* sizes = ctx.values(sizes_in);
    if (!sizes) { ctx.set_output(0, ctx.dtype(0), SymShape(r)); return Status::Ok(); }
    if (sizes->size() != axes.size()) return ctx.fail("sizes has " + std::to_string(sizes->size()) + " entries, expected " + std::to_string(axes.size()));
    const std::string policy = ctx.node().attr_string("keep_aspect_ratio_policy", "stretch");
    if (ctx.opset() >= 18 && policy != "stretch") {
      // One scale for all axes: the smallest (not_larger) or largest (not_smaller) ratio.
      double scale = policy == "not_larger" ? 1e300 : 0;
      for (size_t i = 0; i < axes.size(); ++i) {
        if (!(*sizes)[i].is_const() || !(*in)[axes[i]].is_known() || (*in)[axes[i]].value == 0) { ctx.set_output(0, ctx.dtype(0), SymShape(r)); return Status::Ok(); }
        const double s = static_cast<double>((*sizes)[i].c) / static_cast<double>((*in)[axes[i]].value);
        scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
      }
      for (int64_t a : axes) {
        int64_t e = 0;
        if (!extent_from_double(std::floor(scale * static_cast<double>((*in)[a].value) + 0.5), &e))
          return ctx.fail("sizes give axis " + std::to_string(a) + " an extent past the largest tensor extent");
        out[a] = Dim::known(e);
      }
    } else {
      for (size_t i = 0; i < axes.size(); ++i) out[axes[i]] = (*sizes)[i].to_dim();
    }
    ctx.set_output(0, ctx.dtype(0), out);
    return Status::Ok();
  }
  std::optional<std::vector<double>> scales;
  if (scales_in >= 0) scales = ctx.const_doubles(scales_in);
  else if (upsample) scales = std::vector<double>(ctx.node().attr_floats("scales").begin(), ctx.node().attr_floats("scales").end());
  if (!scales) { ctx.set_output(0, ctx.dtype(0), SymShape(r)); return Status::Ok(); }
  if (scales->size() != axes.size()) return ctx.fail("scales has " + std::to_string(scales->size()) + " entries, expected " + std::to_string(axes.size()));
  const bool crop = ctx.node().attr_string("coordinate_transformation_mode", "") == "tf_crop_and_resize";
  auto roi = crop && ctx.has_input(1) ? ctx.const_doubles(1) : std::nullopt;
  for (size_t i = 0; i < axes.size(); ++i) {
    const Dim& d = (*in)[axes[i]];
    const double s = (*scales)[i];
    if (!(s > 0)) return ctx.fail("scale " + std::to_string(s) + " must be positive");
    if (!d.is_known()) { out[axes[i]] = s == 1.0 ? d : Dim{}; continue; }
    double extent = static_cast<double>(d.value);
    if (roi && roi->size() == 2 * axes.size()) extent *= (*roi)[axes.size() + i] - (*roi)[i];
    int64_t e = 0;
    if (!extent_from_double(std::floor(extent * s), &e))
      return ctx.fail("scale " + std::to_string(s) + " gives axis " + std::to_string(axes[i]) + " an extent that is not a valid size");
    out[axes[i]] = Dim::known(e);
  }
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

Status compress_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  if (!ctx.node().has_attr("axis")) {
    // No axis: the flattened input's elements where the condition is true.
    Dim n;
    auto c = ctx.const_ints(1);
    if (c && in) {
      const Dim total = dim_product(*in, 0, in->size());
      if (total.is_known()) {
        int64_t k = 0;
        for (int64_t i = 0; i < static_cast<int64_t>(c->size()) && i < total.value; ++i) k += (*c)[i] != 0;
        n = Dim::known(k);
      }
    }
    ctx.set_output(0, ctx.dtype(0), SymShape{n});
    return Status::Ok();
  }
  if (!in) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  int64_t axis;
  if (!normalize_axis(ctx.node().attr_int("axis", 0), static_cast<int>(in->size()), &axis)) return ctx.fail("axis out of range for rank " + std::to_string(in->size()));
  SymShape out = *in;
  out[axis] = Dim{};
  if (auto c = ctx.const_ints(1)) {
    int64_t n = 0;
    for (size_t i = 0; i < c->size() && (!(*in)[axis].is_known() || static_cast<int64_t>(i) < (*in)[axis].value); ++i) n += (*c)[i] != 0;
    if ((*in)[axis].is_known()) out[axis] = Dim::known(n);
  }
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

Status one_hot_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  if (!in) { ctx.set_output(0, ctx.dtype(2), std::nullopt); return Status::Ok(); }
  const int r = static_cast<int>(in->size()) + 1;
  int64_t axis;
  if (!normalize_axis(ctx.node().attr_int("axis", -1), r, &axis)) return ctx.fail("axis out of range for output rank " + std::to_string(r));
  Dim depth;
  if (auto d = ctx.const_doubles(1); d && d->size() == 1) {
    int64_t e = 0;
    if (!extent_from_double((*d)[0], &e)) return ctx.fail("depth " + std::to_string((*d)[0]) + " is not a valid size");
    depth = Dim::known(e);
  }
  SymShape out = *in;
  out.insert(out.begin() + axis, depth);
  ctx.set_output(0, ctx.dtype(2), out);
  return Status::Ok();
}

Status eye_like_rule(ShapeContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.expect_rank(0, 2, "input"));
  const DataType dt = ctx.node().has_attr("dtype") ? dtype_from_onnx_code(ctx.node().attr_int("dtype", 1)) : ctx.dtype(0);
  ctx.set_output(0, dt, ctx.shape(0));
  return Status::Ok();
}

Status range_rule(ShapeContext& ctx) {
  auto s = ctx.const_doubles(0), l = ctx.const_doubles(1), d = ctx.const_doubles(2);
  if (!s || !l || !d || s->size() != 1 || l->size() != 1 || d->size() != 1) {
    ctx.set_output(0, ctx.dtype(0), SymShape{Dim{}});
    return Status::Ok();
  }
  if ((*d)[0] == 0) return ctx.fail("delta is 0");
  // Operator Range-11: number_of_elements = max(ceil((limit - start) / delta), 0).
  const double count = std::ceil(((*l)[0] - (*s)[0]) / (*d)[0]);
  int64_t n = 0;
  if (!(count <= 0) && !extent_from_double(count, &n))
    return ctx.fail("start, limit and delta give " + std::to_string(count) + " elements, past the largest tensor");
  ctx.set_output(0, ctx.dtype(0), SymShape{Dim::known(n)});
  // Element values are tracked only when each fits int64 exactly enough to cast.
  const double last = (*s)[0] + static_cast<double>(n) * (*d)[0];
  const bool fits = std::fabs((*s)[0]) < 9.0e18 && std::fabs(last) < 9.0e18;
  if (dtype_is_integer(ctx.dtype(0)) && n <= 64 && fits) {
    SymValues v;
    for (int64_t i = 0; i < n; ++i) v.push_back(SymInt::constant(static_cast<int64_t>((*s)[0] + static_cast<double>(i) * (*d)[0])));
    ctx.set_values(0, v);
  }
  return Status::Ok();
}

Status non_zero_rule(ShapeContext& ctx) {
  const auto r = ctx.rank(0);
  ctx.set_output(0, DataType::kInt64, SymShape{r ? Dim::known(*r) : Dim{}, Dim{}});
  return Status::Ok();
}

Status unique_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  std::optional<SymShape> y = SymShape{Dim{}};
  Dim inverse_len;
  if (ctx.node().has_attr("axis")) {
    y = std::nullopt;
    if (in) {
      int64_t axis;
      if (!normalize_axis(ctx.node().attr_int("axis", 0), static_cast<int>(in->size()), &axis)) return ctx.fail("axis out of range for rank " + std::to_string(in->size()));
      y = *in;
      (*y)[axis] = Dim{};
      inverse_len = (*in)[axis];
    }
  } else if (in) {
    inverse_len = dim_product(*in, 0, in->size());
  }
  ctx.set_output(0, ctx.dtype(0), y);
  ctx.set_output(1, DataType::kInt64, SymShape{Dim{}});
  ctx.set_output(2, DataType::kInt64, SymShape{inverse_len});
  ctx.set_output(3, DataType::kInt64, SymShape{Dim{}});
  return Status::Ok();
}

}  // namespace

void register_indexing_shape_rules(ShapeRuleTable& t) {
  t.add(OpKind::kSlice, slice_rule);
  t.add(OpKind::kGather, gather_rule);
  t.add(OpKind::kGatherElements, gather_elements_rule);
  t.add(OpKind::kGatherND, gather_nd_rule);
  t.add(OpKind::kScatter, scatter_rule);
  t.add(OpKind::kScatterElements, scatter_rule);
  t.add(OpKind::kScatterND, scatter_rule);
  t.add(OpKind::kPad, pad_rule);
  t.add(OpKind::kResize, resize_rule);
  t.add(OpKind::kUpsample, resize_rule);
  t.add(OpKind::kCompress, compress_rule);
  t.add(OpKind::kOneHot, one_hot_rule);
  t.add(OpKind::kEyeLike, eye_like_rule);
  t.add(OpKind::kRange, range_rule);
  t.add(OpKind::kNonZero, non_zero_rule);
  t.add(OpKind::kUnique, unique_rule);
}

}  // namespace kiln::ir
