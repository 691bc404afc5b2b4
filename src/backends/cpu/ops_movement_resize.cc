// CPU reference kernels, movement family: Resize (opsets 10, 11, 13, 18, 19) and Upsample
// (opsets 7, 9). Each axis gets a list of taps per output coordinate (input index, weight),
// built from the spec's coordinate transform and interpolation kernel. Nearest copies elements
// by byte size (any dtype); linear/cubic compute in double one axis at a time (the filters are
// separable) and round once into the output dtype.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/ops_movement_common.h"
#include "backends/cpu/resize_taps.h"

namespace kiln::cpu::movement {
namespace {

using cpu::resize::AxisSpec;
using cpu::resize::AxisTaps;
using cpu::resize::build_taps;
using cpu::resize::Coord;
using cpu::resize::Interp;
using cpu::resize::NearestMode;
using cpu::resize::ResizeParams;

// Nearest: out[o...] = x[idx...] (or the extrapolation value), any byte-sized dtype.
Tensor resize_nearest(const Tensor& x, const std::vector<AxisTaps>& taps, const Shape& out, const ResizeParams& p,
                      int esize) {
  Tensor y(x.dtype(), out);
  std::vector<char> fill(esize, 0);
  store_from_double(x.dtype(), fill.data(), 0, p.extrapolation);
  const int r = x.rank();
  const std::vector<int64_t> xs = shape_strides(x.shape());
  char* dst = static_cast<char*>(y.raw());
  if (r == 0) {
    copy_elem(x.raw(), 0, y.raw(), 0, esize);
    return y;
  }
  // Outer dims by counter; the last axis is a tight loop over its precomputed source indices.
  const AxisTaps& lt = taps[r - 1];
  const int64_t inner = out[r - 1], rows = y.numel() / inner;
  std::vector<int64_t> pos(r - 1, 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t base = 0;
    bool inside = true;
    for (int k = 0; k < r - 1 && inside; ++k) {
      const AxisTaps& t = taps[k];
      inside = !t.outside[pos[k]];
      if (inside) base += t.idx[t.begin[pos[k]]] * xs[k];
    }
    for (int64_t j = 0; j < inner; ++j, dst += esize) {
      if (inside && !lt.outside[j])
        std::memcpy(dst, static_cast<const char*>(x.raw()) + (base + lt.idx[lt.begin[j]]) * esize, esize);
      else
        std::memcpy(dst, fill.data(), esize);
    }
    for (int k = r - 2; k >= 0; --k) {
      if (++pos[k] < out[k]) break;
      pos[k] = 0;
    }
  }
  return y;
}

// Linear/cubic: one separable pass per non-identity axis, innermost axis first.
Tensor resize_filtered(const Tensor& x, const std::vector<AxisTaps>& taps, const Shape& out, const ResizeParams& p) {
  std::vector<double> cur(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) cur[i] = load_as_double(x.dtype(), x.raw(), i);
  Shape shape = x.shape();
  for (int k = x.rank() - 1; k >= 0; --k) {
    const AxisTaps& t = taps[k];
    if (t.identity) continue;
    int64_t outer = 1, inner = 1;
    for (int j = 0; j < k; ++j) outer *= shape[j];
    for (int j = k + 1; j < x.rank(); ++j) inner *= shape[j];
    const int64_t in_len = shape[k], out_len = out[k];
    std::vector<double> next(static_cast<size_t>(outer * out_len * inner), 0.0);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t c = 0; c < out_len; ++c) {
        double* dst = next.data() + (o * out_len + c) * inner;
        if (t.outside[c]) {
          std::fill(dst, dst + inner, p.extrapolation);
          continue;
        }
        for (int64_t q = t.begin[c]; q < t.begin[c + 1]; ++q) {
          if (t.w[q] == 0) continue;
          const double* src = cur.data() + (o * in_len + t.idx[q]) * inner;
          for (int64_t i = 0; i < inner; ++i) dst[i] += t.w[q] * src[i];
        }
      }
    cur.swap(next);
    shape[k] = out_len;
  }
  Tensor y(x.dtype(), out);
  const bool is_int = !dtype_is_float(x.dtype());
  double lo = 0, hi = 0;
  if (is_int) {
    const int bits = dtype_bits(x.dtype());
    lo = dtype_is_signed(x.dtype()) ? -std::ldexp(1.0, bits - 1) : 0.0;
    hi = dtype_is_signed(x.dtype()) ? std::ldexp(1.0, bits - 1) - 1 : std::ldexp(1.0, bits) - 1;
  }
  for (int64_t i = 0; i < y.numel(); ++i) {
    double v = cur[i];
    if (is_int) v = std::clamp(std::nearbyint(v), lo, hi);
    store_from_double(y.dtype(), y.raw(), i, v);
  }
  return y;
}

Status run_resize(KernelContext& ctx, const Tensor& x, std::vector<AxisSpec>& axes, const ResizeParams& p) {
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  if (p.interp != Interp::kNearest && (x.dtype() == DataType::kBool))
    return ctx.unsupported_here("linear/cubic resize of bool");
  Shape out;
  std::vector<AxisTaps> taps;
  for (const AxisSpec& a : axes) {
    if (a.out_len > 0 && a.in_len == 0) return ctx.fail("cannot resize an empty axis to a non-empty one");
    out.push_back(a.out_len);
    taps.push_back(build_taps(a, p));
  }
  if (Status st = check_out_shape(ctx, out); !st.ok()) return st;
  if (shape_numel(out) == 0) {
    ctx.set_output(0, Tensor(x.dtype(), out));
    return Status::Ok();
  }
  ctx.set_output(
      0, p.interp == Interp::kNearest ? resize_nearest(x, taps, out, p, *es) : resize_filtered(x, taps, out, p));
  return Status::Ok();
}

StatusOr<Interp> parse_interp(const KernelContext& ctx, const std::string& m) {
  Interp i;
  if (cpu::resize::parse_interp(m, &i)) return i;
  return ctx.fail("unknown mode '" + m + "'");
}

// Scales-based output: out = floor(in * scale) (times the roi extent for tf_crop_and_resize).
Status axes_from_scales(const KernelContext& ctx, const Tensor& x, const std::vector<double>& scales,
                        std::vector<AxisSpec>& axes, bool crop) {
  if (static_cast<int>(scales.size()) != x.rank())
    return ctx.fail("scales has " + std::to_string(scales.size()) + " entries for rank " + std::to_string(x.rank()));
  for (int k = 0; k < x.rank(); ++k) {
    AxisSpec& a = axes[k];
    if (!(scales[k] > 0)) return ctx.fail("scales must be positive");
    a.in_len = x.dim(k);
    a.scale = scales[k];
    const double extent = crop ? a.roi_end - a.roi_start : 1.0;
    a.len_resized = static_cast<double>(a.in_len) * extent * a.scale;
    a.out_len = static_cast<int64_t>(std::floor(a.len_resized));
  }
  return Status::Ok();
}

// Operator Upsample, since version 7 (scales attribute) / 9 (scales input): asymmetric
// coordinates, nearest rounds down.
Status upsample(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  ResizeParams p;
  auto m = parse_interp(ctx, ctx.attr_string("mode", "nearest"));
  if (!m.ok()) return m.status();
  p.interp = *m;
  if (p.interp == Interp::kCubic) return ctx.fail("Upsample has no cubic mode");
  p.coord = Coord::kAsymmetric;
  p.nearest = NearestMode::kLegacy;
  std::vector<double> scales;
  if (ctx.opset() < 9) {
    for (float f : ctx.attr_floats("scales")) scales.push_back(f);
  } else {
    if (!ctx.has_input(1)) return ctx.fail("the scales input is required");
    const Tensor& s = ctx.in(1);
    if (!dtype_is_float(s.dtype())) return ctx.fail("scales must be float");
    for (int64_t i = 0; i < s.numel(); ++i) scales.push_back(load_as_double(s.dtype(), s.raw(), i));
  }
  std::vector<AxisSpec> axes(x.rank());
  Status st = axes_from_scales(ctx, x, scales, axes, false);
  if (!st.ok()) return st;
  return run_resize(ctx, x, axes, p);
}

StatusOr<Coord> parse_coord(const KernelContext& ctx, const std::string& c) {
  Coord v;
  if (cpu::resize::parse_coord(c, &v)) return v;
  return ctx.fail("unknown coordinate_transformation_mode '" + c + "'");
}

StatusOr<NearestMode> parse_nearest(const KernelContext& ctx, const std::string& n) {
  NearestMode v;
  if (cpu::resize::parse_nearest(n, &v)) return v;
  return ctx.fail("unknown nearest_mode '" + n + "'");
}

// Operator Resize, since version 10 (X, scales; asymmetric) / 11 (roi, scales, sizes;
// coordinate modes, cubic) / 13 (optional roi/scales) / 18 (antialias, axes,
// keep_aspect_ratio_policy) / 19 (half_pixel_symmetric).
Status resize(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int r = x.rank();
  ResizeParams p;
  auto m = parse_interp(ctx, ctx.attr_string("mode", "nearest"));
  if (!m.ok()) return m.status();
  p.interp = *m;
  std::vector<AxisSpec> axes(r);
  for (int k = 0; k < r; ++k) axes[k].in_len = axes[k].out_len = x.dim(k);
  if (ctx.opset() < 11) {
    if (p.interp == Interp::kCubic) return ctx.fail("cubic mode needs opset 11");
    p.coord = Coord::kAsymmetric;
    p.nearest = NearestMode::kLegacy;
    if (!ctx.has_input(1)) return ctx.fail("the scales input is required");
    std::vector<double> scales;
    const Tensor& s = ctx.in(1);
    for (int64_t i = 0; i < s.numel(); ++i) scales.push_back(load_as_double(s.dtype(), s.raw(), i));
    Status st = axes_from_scales(ctx, x, scales, axes, false);
    if (!st.ok()) return st;
    return run_resize(ctx, x, axes, p);
  }
  auto c = parse_coord(ctx, ctx.attr_string("coordinate_transformation_mode", "half_pixel"));
  if (!c.ok()) return c.status();
  p.coord = *c;
  auto n = parse_nearest(ctx, ctx.attr_string("nearest_mode", "round_prefer_floor"));
  if (!n.ok()) return n.status();
  p.nearest = *n;
  p.cubic_a = ctx.attr_float("cubic_coeff_a", -0.75f);
  p.exclude_outside = ctx.attr_int("exclude_outside", 0) != 0;
  p.extrapolation = ctx.attr_float("extrapolation_value", 0.f);
  p.antialias = ctx.opset() >= 18 && ctx.attr_int("antialias", 0) != 0;
  // The axes that roi/scales/sizes describe (all, unless the opset-18 `axes` attribute says).
  std::vector<int> which;
  if (ctx.opset() >= 18 && ctx.has_attr("axes")) {
    for (int64_t a : ctx.attr_ints("axes")) {
      auto ax = norm_axis(ctx, a, r, "axes entry");
      if (!ax.ok()) return ax.status();
      which.push_back(*ax);
    }
  } else {
    for (int k = 0; k < r; ++k) which.push_back(k);
  }
  const size_t na = which.size();
  const Tensor* roi = ctx.input(1);
  const Tensor* scales = ctx.input(2);
  const Tensor* sizes = ctx.input(3);
  if (scales && scales->numel() == 0) scales = nullptr;
  if (sizes && sizes->numel() == 0) sizes = nullptr;
  if (!!scales == !!sizes) return ctx.fail("exactly one of scales and sizes must be given");
  if (p.coord == Coord::kTfCropAndResize && roi && roi->numel() > 0) {
    if (static_cast<size_t>(roi->numel()) != 2 * na) return ctx.fail("roi must have 2 * rank entries");
    for (size_t i = 0; i < na; ++i) {
      axes[which[i]].roi_start = load_as_double(roi->dtype(), roi->raw(), static_cast<int64_t>(i));
      axes[which[i]].roi_end = load_as_double(roi->dtype(), roi->raw(), static_cast<int64_t>(i + na));
    }
  }
  if (scales) {
    if (!dtype_is_float(scales->dtype())) return ctx.fail("scales must be float");
    if (static_cast<size_t>(scales->numel()) != na) return ctx.fail("scales has the wrong number of entries");
    std::vector<double> all(r, 1.0);
    for (size_t i = 0; i < na; ++i)
      all[which[i]] = load_as_double(scales->dtype(), scales->raw(), static_cast<int64_t>(i));
    Status st = axes_from_scales(ctx, x, all, axes, p.coord == Coord::kTfCropAndResize);
    if (!st.ok()) return st;
    return run_resize(ctx, x, axes, p);
  }
  auto sz = read_ints(ctx, *sizes, "sizes");
  if (!sz.ok()) return sz.status();
  if (sz->size() != na) return ctx.fail("sizes has the wrong number of entries");
  const std::string policy = ctx.opset() >= 18 ? ctx.attr_string("keep_aspect_ratio_policy", "stretch") : "stretch";
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return ctx.fail("unknown keep_aspect_ratio_policy '" + policy + "'");
  double common = policy == "not_larger" ? INFINITY : 0.0;
  for (size_t i = 0; i < na; ++i) {
    if ((*sz)[i] < 0) return ctx.fail("sizes must be non-negative");
    const double s = static_cast<double>((*sz)[i]) / static_cast<double>(x.dim(which[i]));
    common = policy == "not_larger" ? std::min(common, s) : std::max(common, s);
  }
  for (size_t i = 0; i < na; ++i) {
    AxisSpec& a = axes[which[i]];
    if (policy == "stretch") {
      a.out_len = (*sz)[i];
      a.scale = a.in_len == 0 ? 1.0 : static_cast<double>(a.out_len) / static_cast<double>(a.in_len);
      a.len_resized = static_cast<double>(a.out_len);
    } else {
      a.scale = common;
      a.len_resized = common * static_cast<double>(a.in_len);
      a.out_len = static_cast<int64_t>(std::round(a.len_resized));
    }
  }
  return run_resize(ctx, x, axes, p);
}

}  // namespace

void register_resize_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kResize, with_inputs<resize, 1>);
  r.add(ir::OpKind::kUpsample, with_inputs<upsample, 1>);
}

}  // namespace kiln::cpu::movement
