// Resize (ONNX versions 10-19) and Upsample (7 / 9) on 4-D or other tensors whose resized axes are
// the last two. Nearest / linear Resize-11+ without exclude_outside, tf_crop_and_resize or
// antialias keeps its float kernel (kernels_more.h launch_resize); everything else — cubic,
// exclude_outside, tf_crop_and_resize, antialias, Resize-10 and Upsample — samples through tap
// lists built on the host by the CPU reference's own build_taps (backends/cpu/resize_taps.h), so
// both backends take the same points and weights (kernels_resize.h; docs/decisions/0075).
#include <cstring>

#include "backends/cpu/resize_taps.h"
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_resize.h"
#include "backends/cuda/layer_factory.h"
#include "core/numerics.h"

namespace kiln::cuda {
namespace {

namespace rs = cpu::resize;

// A constant float / integer input's values (absent or empty: `present` false); Unsupported when
// it is computed at run time.
Status const_values(const ir::Graph& g, const ir::Node& n, size_t k, const std::string& what, const std::string& where,
                    std::vector<double>* v, bool* present) {
  *present = false;
  v->clear();
  if (k >= n.inputs.size() || n.inputs[k] == ir::kNoValue) return Status::Ok();
  const auto& c = g.value(n.inputs[k]).constant;
  if (!c) return unsupported(where + what + " must be a constant on the GPU path");
  for (int64_t i = 0; i < c->numel(); ++i) v->push_back(load_as_double(c->dtype(), c->raw(), i));
  *present = !v->empty();
  return Status::Ok();
}

}  // namespace

bool resize_needs_taps(const ir::Node& n) {
  if (n.op == ir::OpKind::kUpsample || n.opset < 11) return true;
  return n.attr_string("mode", "nearest") == "cubic" || n.attr_int("exclude_outside", 0) != 0 ||
         n.attr_string("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize" ||
         n.attr_string("coordinate_transformation_mode", "half_pixel") == "half_pixel_symmetric" ||
         (n.opset >= 18 && n.attr_int("antialias", 0) != 0);
}

StatusOr<ResizeTapsPlan> plan_resize_taps(const ir::Node& n, const ir::Graph& g, const Shape& in, const Shape& out) {
  const std::string where = n.describe() + ": ";
  const size_t r = in.size();
  if (r < 2 || out.size() != r) return unsupported(where + "rank " + std::to_string(r) + " (2 or more on the GPU)");
  rs::ResizeParams p;
  if (!rs::parse_interp(n.attr_string("mode", "nearest"), &p.interp))
    return invalid_argument(where + "unknown mode '" + n.attr_string("mode", "nearest") + "'");
  std::vector<rs::AxisSpec> axes(r);
  for (size_t k = 0; k < r; ++k) {
    axes[k].in_len = in[k];
    axes[k].out_len = out[k];
  }
  std::vector<double> scales, sizes, roi;
  bool have_scales = false, have_sizes = false, have_roi = false;
  const bool legacy = n.op == ir::OpKind::kUpsample || n.opset < 11;
  if (legacy) {
    // Upsample and Resize-10: asymmetric coordinates, nearest floors when upsampling.
    if (p.interp == rs::Interp::kCubic) return invalid_argument(where + "no cubic mode before Resize-11");
    p.coord = rs::Coord::kAsymmetric;
    p.nearest = rs::NearestMode::kLegacy;
    if (n.op == ir::OpKind::kUpsample && n.opset < 9) {
      for (float f : n.attr_floats("scales")) scales.push_back(f);
      have_scales = !scales.empty();
    } else {
      KILN_RETURN_IF_ERROR(const_values(g, n, 1, "scales", where, &scales, &have_scales));
    }
    if (!have_scales) return invalid_argument(where + "scales are required");
  } else {
    if (!rs::parse_coord(n.attr_string("coordinate_transformation_mode", "half_pixel"), &p.coord))
      return invalid_argument(where + "unknown coordinate_transformation_mode");
    if (!rs::parse_nearest(n.attr_string("nearest_mode", "round_prefer_floor"), &p.nearest))
      return invalid_argument(where + "unknown nearest_mode");
    p.cubic_a = n.attr_float("cubic_coeff_a", -0.75f);
    p.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
    p.extrapolation = n.attr_float("extrapolation_value", 0.f);
    p.antialias = n.opset >= 18 && n.attr_int("antialias", 0) != 0;
    if (n.opset >= 18 && (n.has_attr("axes") || n.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch"))
      return unsupported(where + "axes or keep_aspect_ratio_policy");
    KILN_RETURN_IF_ERROR(const_values(g, n, 1, "roi", where, &roi, &have_roi));
    KILN_RETURN_IF_ERROR(const_values(g, n, 2, "scales", where, &scales, &have_scales));
    KILN_RETURN_IF_ERROR(const_values(g, n, 3, "sizes", where, &sizes, &have_sizes));
    if (have_scales == have_sizes) return invalid_argument(where + "exactly one of scales and sizes must be given");
    if (p.coord == rs::Coord::kTfCropAndResize && have_roi) {
      if (roi.size() != 2 * r) return invalid_argument(where + "roi must have 2 * rank entries");
      for (size_t k = 0; k < r; ++k) {
        axes[k].roi_start = roi[k];
        axes[k].roi_end = roi[k + r];
      }
    }
  }
  if (have_scales) {
    // The CPU reference's axes_from_scales: length_resized = in * roi extent * scale.
    if (scales.size() != r) return invalid_argument(where + "scales has the wrong number of entries");
    const bool crop = p.coord == rs::Coord::kTfCropAndResize;
    for (size_t k = 0; k < r; ++k) {
      if (!(scales[k] > 0)) return invalid_argument(where + "scales must be positive");
      axes[k].scale = scales[k];
      axes[k].len_resized = static_cast<double>(in[k]) * (crop ? axes[k].roi_end - axes[k].roi_start : 1.0) * scales[k];
    }
  } else {
    if (sizes.size() != r) return invalid_argument(where + "sizes has the wrong number of entries");
    for (size_t k = 0; k < r; ++k) {
      axes[k].scale = in[k] == 0 ? 1.0 : static_cast<double>(out[k]) / static_cast<double>(in[k]);
      axes[k].len_resized = static_cast<double>(out[k]);
    }
  }
  std::vector<rs::AxisTaps> taps(r);
  for (size_t k = 0; k < r; ++k) {
    taps[k] = rs::build_taps(axes[k], p);
    if (k + 2 < r && !(taps[k].identity && in[k] == out[k]))
      return unsupported(where + "resizing an axis other than the last two");
  }
  // The tables: int64 words (begin, idx, outside of H, then of W), then the weights as doubles.
  std::vector<int64_t> words;
  std::vector<double> weights;
  ResizeTapsDesc d;
  d.planes = dims_product(in, 0, r - 2);
  d.ih = in[r - 2];
  d.iw = in[r - 1];
  d.oh = out[r - 2];
  d.ow = out[r - 1];
  d.extrapolation = p.extrapolation;
  auto put = [&](const rs::AxisTaps& t, int64_t* begin, int64_t* idx, int64_t* outside, int64_t* w) {
    *begin = static_cast<int64_t>(words.size());
    words.insert(words.end(), t.begin.begin(), t.begin.end());
    *idx = static_cast<int64_t>(words.size());
    words.insert(words.end(), t.idx.begin(), t.idx.end());
    *outside = static_cast<int64_t>(words.size());
    for (bool o : t.outside) words.push_back(o ? 1 : 0);
    *w = static_cast<int64_t>(weights.size());
    weights.insert(weights.end(), t.w.begin(), t.w.end());
  };
  put(taps[r - 2], &d.h_begin, &d.h_idx, &d.h_outside, &d.h_w);
  put(taps[r - 1], &d.w_begin, &d.w_idx, &d.w_outside, &d.w_w);
  d.h_w += static_cast<int64_t>(words.size());  // weights follow the words in the one buffer
  d.w_w += static_cast<int64_t>(words.size());
  ResizeTapsPlan plan;
  plan.d = d;
  plan.table = words;
  for (double w : weights) {
    int64_t bits;
    std::memcpy(&bits, &w, 8);
    plan.table.push_back(bits);
  }
  return plan;
}

namespace {

Status lower_resize_taps(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  KILN_ASSIGN_OR_RETURN(ResizeTapsPlan p, plan_resize_taps(n, ctx.graph(), ctx.shape(n.inputs[0]), ctx.shape(n.outputs[0])));
  KILN_ASSIGN_OR_RETURN(int tab, ctx.upload_raw(n.name + ":taps", {static_cast<int64_t>(p.table.size())}, p.table.data(),
                                                p.table.size() * sizeof(int64_t), "resize taps of '" + n.name + "'"));
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  const StorageType t = ctx.storage();
  const ResizeTapsDesc d = p.d;
  auto layer = make_kernel_layer(ir::op_name(n.op), std::string("kiln.resize_taps ") + storage_name(t),
                                 [=](ExecState& s, const Layer& l) {
                                   return launch_resize_taps(s.ptr(l.ins[0]), s.ptr(l.outs[0]), t, s.ptr(l.ins[1]), d,
                                                             s.stream);
                                 });
  ctx.add_layer(std::move(layer), n.name, {x, tab}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace

Status lower_resize(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (resize_needs_taps(n)) return lower_resize_taps(ctx, n, where);
  KILN_ASSIGN_OR_RETURN(ResizeDesc d, plan_resize(n, ctx.graph(), ctx.shape(n.inputs[0]), ctx.shape(n.outputs[0])));
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  ctx.add_layer(make_resize_layer(d, ctx.storage()), n.name, {x}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
