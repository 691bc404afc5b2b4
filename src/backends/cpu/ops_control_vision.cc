// CPU reference kernels for the detection/vision ops NonMaxSuppression, GridSample,
// RoiAlign and MaxRoiPool. Values are computed in double and stored in the input dtype;
// boundary rules (RoiAlign's sample clamping, GridSample's per-tap padding) follow the
// ONNX spec and the behaviour of ONNX Runtime, whose results the conformance data matches.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "backends/cpu/ops_control.h"
#include "core/numerics.h"

namespace kiln::cpu {
namespace {

// Operator NonMaxSuppression, since version 10 (11: same semantics). Greedy per (batch,
// class): take boxes by descending score (ties: lower index first) above score_threshold,
// dropping those whose IoU with an already selected box exceeds iou_threshold.
Status non_max_suppression(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& boxes_t = ctx.in(0);
  const Tensor& scores_t = ctx.in(1);
  if (boxes_t.rank() != 3 || boxes_t.dim(2) != 4) return ctx.fail("boxes must be [batches, boxes, 4], got " + shape_str(boxes_t.shape()));
  if (scores_t.rank() != 3 || scores_t.dim(0) != boxes_t.dim(0) || scores_t.dim(2) != boxes_t.dim(1))
    return ctx.fail("scores must be [batches, classes, boxes] matching boxes " + shape_str(boxes_t.shape()) + ", got " + shape_str(scores_t.shape()));
  const auto scalar = [&](int i, double dflt) {
    const Tensor* t = ctx.input(i);
    return t && t->numel() > 0 ? load_as_double(t->dtype(), t->raw(), 0) : dflt;
  };
  const int64_t max_out = static_cast<int64_t>(scalar(2, 0));
  const double iou_threshold = scalar(3, 0);
  const bool has_score_threshold = ctx.has_input(4) && ctx.in(4).numel() > 0;
  const double score_threshold = scalar(4, 0);
  const bool center = ctx.attr_int("center_point_box", 0) != 0;
  const std::vector<double> boxes = control_doubles(boxes_t), scores = control_doubles(scores_t);
  const int64_t nb = boxes_t.dim(0), nc = scores_t.dim(1), n = boxes_t.dim(1);

  // Corners (y1, x1, y2, x2) normalised so that y1 <= y2 and x1 <= x2.
  struct Box { double y1, x1, y2, x2; };
  const auto box_at = [&](int64_t b, int64_t i) {
    const double* p = &boxes[(b * n + i) * 4];
    if (center) return Box{p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2, p[0] + p[2] / 2};
    return Box{std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
  };
  const auto suppresses = [&](const Box& a, const Box& c) {
    const double area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_c = (c.y2 - c.y1) * (c.x2 - c.x1);
    if (area_a <= 0 || area_c <= 0) return false;
    const double ih = std::max(0.0, std::min(a.y2, c.y2) - std::max(a.y1, c.y1));
    const double iw = std::max(0.0, std::min(a.x2, c.x2) - std::max(a.x1, c.x1));
    const double inter = ih * iw;
    return inter / (area_a + area_c - inter) > iou_threshold;
  };

  std::vector<int64_t> selected;  // triples (batch, class, box)
  for (int64_t b = 0; b < nb && max_out > 0; ++b) {
    for (int64_t c = 0; c < nc; ++c) {
      const double* sc = &scores[(b * nc + c) * n];
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < n; ++i)
        if (!has_score_threshold || sc[i] > score_threshold) cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t i, int64_t j) { return sc[i] > sc[j]; });
      std::vector<Box> kept;
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        const Box bi = box_at(b, i);
        bool drop = false;
        for (const Box& k : kept) drop = drop || suppresses(k, bi);
        if (drop) continue;
        kept.push_back(bi);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  Tensor out(DataType::kInt64, {static_cast<int64_t>(selected.size() / 3), 3});
  std::copy(selected.begin(), selected.end(), out.data<int64_t>());
  ctx.set_output(0, out);
  return Status::Ok();
}

// Reflects `x` into [lo, hi] (repeatedly, as a mirror at both ends).
double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x >= lo && x <= hi) return x;
  const double d = x < lo ? lo - x : x - hi;
  const int64_t flips = static_cast<int64_t>(d / range);
  const double rem = d - static_cast<double>(flips) * range;
  if (x < lo) return flips % 2 == 0 ? lo + rem : hi - rem;
  return flips % 2 == 0 ? hi - rem : lo + rem;
}

// Operator GridSample, since version 16 (2-D; version 20 renames the modes linear/cubic).
// Grid values in [-1, 1] map to pixel coordinates by align_corners; padding_mode decides
// the value of each out-of-range tap.
Status grid_sample(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& X = ctx.in(0);
  const Tensor& G = ctx.in(1);
  if (X.rank() != 4) return ctx.unsupported_here("only 4-D (N, C, H, W) input is supported, got " + shape_str(X.shape()));
  if (G.rank() != 4 || G.dim(0) != X.dim(0) || G.dim(3) != 2)
    return ctx.fail("grid must be [N, H_out, W_out, 2] matching X " + shape_str(X.shape()) + ", got " + shape_str(G.shape()));
  if (!dtype_is_float(X.dtype())) return ctx.unsupported_here(std::string("X of dtype ") + dtype_name(X.dtype()));
  std::string mode = ctx.attr_string("mode", ctx.opset() >= 20 ? "linear" : "bilinear");
  if (mode == "linear") mode = "bilinear";
  if (mode == "cubic") mode = "bicubic";
  const std::string pad = ctx.attr_string("padding_mode", "zeros");
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic") return ctx.fail("unknown mode '" + mode + "'");
  if (pad != "zeros" && pad != "border" && pad != "reflection") return ctx.fail("unknown padding_mode '" + pad + "'");
  const bool align = ctx.attr_int("align_corners", 0) != 0;
  const int64_t N = X.dim(0), C = X.dim(1), H = X.dim(2), W = X.dim(3), Ho = G.dim(1), Wo = G.dim(2);
  if (H <= 0 || W <= 0) return ctx.fail("X has empty spatial dims " + shape_str(X.shape()));
  const std::vector<double> x = control_doubles(X), grid = control_doubles(G);
  std::vector<double> y(static_cast<size_t>(N * C * Ho * Wo));

  // Coordinates are bounded so that far-outside (even infinite) grid values stay castable.
  const auto unnormalize = [&](double g, int64_t size) {
    const double p = align ? (g + 1) / 2 * static_cast<double>(size - 1) : ((g + 1) * static_cast<double>(size) - 1) / 2;
    return std::isnan(p) ? p : std::clamp(p, -1e15, 1e15);
  };
  // The value at integer tap (ix, iy) of plane `p` under the padding mode.
  const auto tap = [&](const double* p, int64_t ix, int64_t iy) {
    if (pad == "zeros") return (ix < 0 || ix >= W || iy < 0 || iy >= H) ? 0.0 : p[iy * W + ix];
    double fx = static_cast<double>(ix), fy = static_cast<double>(iy);
    if (pad == "reflection") {
      fx = align ? reflect(fx, 0, static_cast<double>(W - 1)) : reflect(fx, -0.5, static_cast<double>(W) - 0.5);
      fy = align ? reflect(fy, 0, static_cast<double>(H - 1)) : reflect(fy, -0.5, static_cast<double>(H) - 0.5);
    }
    const int64_t cx = std::clamp<int64_t>(static_cast<int64_t>(std::floor(fx + 0.5)), 0, W - 1);
    const int64_t cy = std::clamp<int64_t>(static_cast<int64_t>(std::floor(fy + 0.5)), 0, H - 1);
    return p[cy * W + cx];
  };
  // Cubic convolution weights (A = -0.75) for the taps at floor(t)-1 .. floor(t)+2.
  const auto cubic = [](double t, double w[4]) {
    const double A = -0.75;
    const auto near = [&](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };
    const auto far = [&](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };
    w[0] = far(t + 1);
    w[1] = near(t);
    w[2] = near(1 - t);
    w[3] = far(2 - t);
  };

  for (int64_t n = 0; n < N; ++n) {
    for (int64_t oh = 0; oh < Ho; ++oh) {
      for (int64_t ow = 0; ow < Wo; ++ow) {
        const double* g = &grid[((n * Ho + oh) * Wo + ow) * 2];
        const double px = unnormalize(g[0], W), py = unnormalize(g[1], H);
        for (int64_t c = 0; c < C; ++c) {
          const double* p = &x[(n * C + c) * H * W];
          double v = 0;
          if (std::isnan(px) || std::isnan(py)) {
            v = 0;
          } else if (mode == "nearest") {
            v = tap(p, static_cast<int64_t>(std::nearbyint(px)), static_cast<int64_t>(std::nearbyint(py)));
          } else if (mode == "bilinear") {
            const double fx = std::floor(px), fy = std::floor(py), lx = px - fx, ly = py - fy;
            const int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
            v = tap(p, x0, y0) * (1 - lx) * (1 - ly) + tap(p, x0 + 1, y0) * lx * (1 - ly) +
                tap(p, x0, y0 + 1) * (1 - lx) * ly + tap(p, x0 + 1, y0 + 1) * lx * ly;
          } else {
            const double fx = std::floor(px), fy = std::floor(py);
            double wx[4], wy[4];
            cubic(px - fx, wx);
            cubic(py - fy, wy);
            const int64_t x0 = static_cast<int64_t>(fx) - 1, y0 = static_cast<int64_t>(fy) - 1;
            for (int j = 0; j < 4; ++j)
              for (int i = 0; i < 4; ++i) v += tap(p, x0 + i, y0 + j) * wx[i] * wy[j];
          }
          y[((n * C + c) * Ho + oh) * Wo + ow] = v;
        }
      }
    }
  }
  ctx.set_output(0, control_tensor_from(X.dtype(), {N, C, Ho, Wo}, y));
  return Status::Ok();
}

// Operator RoiAlign, since version 10 (16 adds coordinate_transformation_mode, default
// half_pixel; version 10 behaves as output_half_pixel). Each output bin averages (or maxes)
// bilinear samples on a sampling_ratio grid (adaptive ceil(roi/bin) when 0).
Status roi_align(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(3));
  const Tensor& X = ctx.in(0);
  const Tensor& rois_t = ctx.in(1);
  const Tensor& bi_t = ctx.in(2);
  if (X.rank() != 4) return ctx.fail("X must be [N, C, H, W], got " + shape_str(X.shape()));
  if (rois_t.rank() != 2 || rois_t.dim(1) != 4) return ctx.fail("rois must be [num_rois, 4], got " + shape_str(rois_t.shape()));
  if (bi_t.numel() != rois_t.dim(0) || !dtype_is_integer(bi_t.dtype())) return ctx.fail("batch_indices must hold one integer per roi");
  if (!dtype_is_float(X.dtype())) return ctx.unsupported_here(std::string("X of dtype ") + dtype_name(X.dtype()));
  const std::string mode = ctx.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") return ctx.fail("unknown mode '" + mode + "'");
  const std::string ctm = ctx.attr_string("coordinate_transformation_mode", ctx.opset() >= 16 ? "half_pixel" : "output_half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel") return ctx.fail("unknown coordinate_transformation_mode '" + ctm + "'");
  const bool half_pixel = ctm == "half_pixel";
  const int64_t ph_n = ctx.attr_int("output_height", 1), pw_n = ctx.attr_int("output_width", 1);
  const int64_t ratio = ctx.attr_int("sampling_ratio", 0);
  const double scale = ctx.attr_float("spatial_scale", 1.0f);
  if (ph_n <= 0 || pw_n <= 0) return ctx.fail("output_height/output_width must be positive");
  const int64_t N = X.dim(0), C = X.dim(1), H = X.dim(2), W = X.dim(3), R = rois_t.dim(0);
  if (H <= 0 || W <= 0) return ctx.fail("X has empty spatial dims " + shape_str(X.shape()));
  const std::vector<double> x = control_doubles(X), rois = control_doubles(rois_t);
  std::vector<double> y(static_cast<size_t>(R * C * ph_n * pw_n));
  for (double v : rois)
    if (!std::isfinite(v) || std::fabs(v) * scale > 1e9) return ctx.fail("rois must be finite coordinates within the feature map's scale");

  for (int64_t r = 0; r < R; ++r) {
    const int64_t b = load_as_int64(bi_t.dtype(), bi_t.raw(), r);
    if (b < 0 || b >= N) return ctx.fail("batch_indices[" + std::to_string(r) + "] = " + std::to_string(b) + " is out of range");
    const double off = half_pixel ? 0.5 : 0.0;
    const double x1 = rois[r * 4] * scale - off, y1 = rois[r * 4 + 1] * scale - off;
    double rw = rois[r * 4 + 2] * scale - off - x1, rh = rois[r * 4 + 3] * scale - off - y1;
    if (!half_pixel) {  // legacy behaviour: force rois to be at least 1x1
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    const double bin_h = rh / static_cast<double>(ph_n), bin_w = rw / static_cast<double>(pw_n);
    const int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rh / static_cast<double>(ph_n)));
    const int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rw / static_cast<double>(pw_n)));
    if (gh > (1 << 12) || gw > (1 << 12)) return ctx.unsupported_here("roi " + std::to_string(r) + " needs an adaptive sampling grid over 4096 per side");
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    for (int64_t c = 0; c < C; ++c) {
      const double* p = &x[(b * C + c) * H * W];
      for (int64_t ph = 0; ph < ph_n; ++ph) {
        for (int64_t pw = 0; pw < pw_n; ++pw) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy) {
            for (int64_t ix = 0; ix < gw; ++ix) {
              double sy = y1 + static_cast<double>(ph) * bin_h + (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(gh);
              double sx = x1 + static_cast<double>(pw) * bin_w + (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(gw);
              // Samples more than one pixel outside the map contribute zero.
              double w[4] = {0, 0, 0, 0};
              int64_t idx[4] = {0, 0, 0, 0};
              if (!(sy < -1.0 || sy > static_cast<double>(H) || sx < -1.0 || sx > static_cast<double>(W))) {
                sy = std::max(sy, 0.0);
                sx = std::max(sx, 0.0);
                int64_t y_lo = static_cast<int64_t>(sy), x_lo = static_cast<int64_t>(sx), y_hi, x_hi;
                if (y_lo >= H - 1) { y_hi = y_lo = H - 1; sy = static_cast<double>(y_lo); } else { y_hi = y_lo + 1; }
                if (x_lo >= W - 1) { x_hi = x_lo = W - 1; sx = static_cast<double>(x_lo); } else { x_hi = x_lo + 1; }
                const double ly = sy - static_cast<double>(y_lo), lx = sx - static_cast<double>(x_lo);
                w[0] = (1 - ly) * (1 - lx); w[1] = (1 - ly) * lx; w[2] = ly * (1 - lx); w[3] = ly * lx;
                idx[0] = y_lo * W + x_lo; idx[1] = y_lo * W + x_hi; idx[2] = y_hi * W + x_lo; idx[3] = y_hi * W + x_hi;
              }
              if (mode == "avg") {
                for (int k = 0; k < 4; ++k) acc += w[k] * p[idx[k]];
              } else {
                // Max mode takes the largest weighted tap, as ONNX Runtime does.
                double m = w[0] * p[idx[0]];
                for (int k = 1; k < 4; ++k) m = std::max(m, w[k] * p[idx[k]]);
                acc = first ? m : std::max(acc, m);
                first = false;
              }
            }
          }
          y[((r * C + c) * ph_n + ph) * pw_n + pw] = mode == "avg" ? acc / count : acc;
        }
      }
    }
  }
  ctx.set_output(0, control_tensor_from(X.dtype(), {R, C, ph_n, pw_n}, y));
  return Status::Ok();
}

// Operator MaxRoiPool, since version 1: rois are (batch, x1, y1, x2, y2); each roi, rounded
// to the feature grid after spatial_scale, is split into pooled_shape bins and max-pooled.
Status max_roi_pool(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& X = ctx.in(0);
  const Tensor& rois_t = ctx.in(1);
  if (X.rank() != 4) return ctx.fail("X must be [N, C, H, W], got " + shape_str(X.shape()));
  if (rois_t.rank() != 2 || rois_t.dim(1) != 5) return ctx.fail("rois must be [num_rois, 5], got " + shape_str(rois_t.shape()));
  if (!dtype_is_float(X.dtype())) return ctx.unsupported_here(std::string("X of dtype ") + dtype_name(X.dtype()));
  const std::vector<int64_t> pooled = ctx.attr_ints("pooled_shape");
  if (pooled.size() != 2 || pooled[0] <= 0 || pooled[1] <= 0) return ctx.fail("pooled_shape must be two positive ints");
  const double scale = ctx.attr_float("spatial_scale", 1.0f);
  const int64_t N = X.dim(0), C = X.dim(1), H = X.dim(2), W = X.dim(3), R = rois_t.dim(0);
  const int64_t PH = pooled[0], PW = pooled[1];
  const std::vector<double> x = control_doubles(X), rois = control_doubles(rois_t);
  std::vector<double> y(static_cast<size_t>(R * C * PH * PW));
  for (double v : rois)
    if (!std::isfinite(v) || std::fabs(v) * scale > 1e15) return ctx.fail("rois must be finite coordinates");
  for (int64_t r = 0; r < R; ++r) {
    const double* roi = &rois[r * 5];
    const int64_t b = static_cast<int64_t>(roi[0]);
    if (b < 0 || b >= N) return ctx.fail("roi " + std::to_string(r) + " has batch index " + std::to_string(b) + ", out of range");
    const int64_t x1 = static_cast<int64_t>(std::round(roi[1] * scale)), y1 = static_cast<int64_t>(std::round(roi[2] * scale));
    const int64_t x2 = static_cast<int64_t>(std::round(roi[3] * scale)), y2 = static_cast<int64_t>(std::round(roi[4] * scale));
    const double bin_h = static_cast<double>(std::max<int64_t>(y2 - y1 + 1, 1)) / static_cast<double>(PH);
    const double bin_w = static_cast<double>(std::max<int64_t>(x2 - x1 + 1, 1)) / static_cast<double>(PW);
    for (int64_t c = 0; c < C; ++c) {
      const double* p = &x[(b * C + c) * H * W];
      for (int64_t ph = 0; ph < PH; ++ph) {
        const int64_t hs = std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(ph) * bin_h)) + y1, 0, H);
        const int64_t he = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(static_cast<double>(ph + 1) * bin_h)) + y1, 0, H);
        for (int64_t pw = 0; pw < PW; ++pw) {
          const int64_t ws = std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(pw) * bin_w)) + x1, 0, W);
          const int64_t we = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(static_cast<double>(pw + 1) * bin_w)) + x1, 0, W);
          double m = (he <= hs || we <= ws) ? 0.0 : -std::numeric_limits<double>::infinity();
          for (int64_t ih = hs; ih < he; ++ih)
            for (int64_t iw = ws; iw < we; ++iw) m = std::max(m, p[ih * W + iw]);
          y[((r * C + c) * PH + ph) * PW + pw] = m;
        }
      }
    }
  }
  ctx.set_output(0, control_tensor_from(X.dtype(), {R, C, PH, PW}, y));
  return Status::Ok();
}

}  // namespace

void register_control_vision_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kNonMaxSuppression, non_max_suppression);
  r.add(ir::OpKind::kGridSample, grid_sample);
  r.add(ir::OpKind::kRoiAlign, roi_align);
  r.add(ir::OpKind::kMaxRoiPool, max_roi_pool);
}

}  // namespace kiln::cpu
