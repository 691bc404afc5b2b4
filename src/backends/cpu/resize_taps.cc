// The taps of ONNX Resize / Upsample along one axis (resize_taps.h).
#include "backends/cpu/resize_taps.h"

#include <algorithm>
#include <cmath>

namespace kiln::cpu::resize {

bool parse_interp(const std::string& m, Interp* out) {
  if (m == "nearest") *out = Interp::kNearest;
  else if (m == "linear" || m == "bilinear") *out = Interp::kLinear;
  else if (m == "cubic") *out = Interp::kCubic;
  else return false;
  return true;
}

bool parse_coord(const std::string& c, Coord* out) {
  if (c == "half_pixel") *out = Coord::kHalfPixel;
  else if (c == "half_pixel_symmetric") *out = Coord::kHalfPixelSymmetric;
  else if (c == "pytorch_half_pixel") *out = Coord::kPytorchHalfPixel;
  else if (c == "align_corners") *out = Coord::kAlignCorners;
  else if (c == "asymmetric") *out = Coord::kAsymmetric;
  else if (c == "tf_crop_and_resize") *out = Coord::kTfCropAndResize;
  else if (c == "tf_half_pixel_for_nn") *out = Coord::kTfHalfPixelForNn;
  else return false;
  return true;
}

bool parse_nearest(const std::string& n, NearestMode* out) {
  if (n == "round_prefer_floor") *out = NearestMode::kRoundPreferFloor;
  else if (n == "round_prefer_ceil") *out = NearestMode::kRoundPreferCeil;
  else if (n == "floor") *out = NearestMode::kFloor;
  else if (n == "ceil") *out = NearestMode::kCeil;
  else return false;
  return true;
}

namespace {

// Resize spec, "coordinate_transformation_mode": output coordinate -> input coordinate.
double to_input_coord(double x, const AxisSpec& a, Coord c) {
  const double in = static_cast<double>(a.in_len), len = a.len_resized;
  switch (c) {
    case Coord::kHalfPixel:
      return (x + 0.5) / a.scale - 0.5;
    case Coord::kHalfPixelSymmetric: {
      const double adjustment = static_cast<double>(a.out_len) / len;
      const double offset = in / 2 * (1 - adjustment);
      return offset + (x + 0.5) / a.scale - 0.5;
    }
    case Coord::kPytorchHalfPixel:
      return len > 1 ? (x + 0.5) / a.scale - 0.5 : 0.0;
    case Coord::kAlignCorners:
      return len == 1 ? 0.0 : x * (in - 1) / (len - 1);
    case Coord::kAsymmetric:
      return x / a.scale;
    case Coord::kTfCropAndResize:
      return len > 1 ? a.roi_start * (in - 1) + x * (a.roi_end - a.roi_start) * (in - 1) / (len - 1)
                     : 0.5 * (a.roi_start + a.roi_end) * (in - 1);
    case Coord::kTfHalfPixelForNn:
      return (x + 0.5) / a.scale;
  }
  return x;
}

int64_t round_nearest(double x, NearestMode m, double scale) {
  if (x == std::floor(x)) return static_cast<int64_t>(x);
  switch (m) {
    case NearestMode::kRoundPreferFloor:
      return static_cast<int64_t>(std::ceil(x - 0.5));
    case NearestMode::kRoundPreferCeil:
      return static_cast<int64_t>(std::floor(x + 0.5));
    case NearestMode::kFloor:
      return static_cast<int64_t>(std::floor(x));
    case NearestMode::kCeil:
      return static_cast<int64_t>(std::ceil(x));
    case NearestMode::kLegacy:
      return static_cast<int64_t>(scale < 1 ? std::ceil(x) : std::floor(x));
  }
  return 0;
}

// Interpolation kernels at distance d (in input pixels, already scaled for antialias).
double linear_kernel(double d) { return std::max(0.0, 1 - std::fabs(d)); }
double cubic_kernel(double d, double a) {
  d = std::fabs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

}  // namespace

AxisTaps build_taps(const AxisSpec& a, const ResizeParams& p) {
  AxisTaps t;
  const int64_t last = a.in_len - 1;
  for (int64_t o = 0; o < a.out_len; ++o) {
    t.begin.push_back(static_cast<int64_t>(t.idx.size()));
    const double x = to_input_coord(static_cast<double>(o), a, p.coord);
    const bool outside = p.coord == Coord::kTfCropAndResize && (x < 0 || x > static_cast<double>(last));
    t.outside.push_back(outside);
    if (outside) {
      t.identity = false;
      continue;
    }
    if (p.interp == Interp::kNearest) {
      const int64_t i = std::clamp<int64_t>(round_nearest(x, p.nearest, a.scale), 0, last);
      t.idx.push_back(i);
      t.w.push_back(1.0);
      t.identity = t.identity && i == o;
      continue;
    }
    // Taps at base + i for i in [start, start + n): base = ceil(x) - 1 so that the fraction
    // r = x - base lies in (0, 1]; antialias widens the kernel by 1/scale when downsampling.
    const double base = std::ceil(x) - 1, r = x - base;
    const double s = p.antialias ? std::min(a.scale, 1.0) : 1.0;
    const double support = p.interp == Interp::kLinear ? 1.0 : 2.0;
    const int64_t start = static_cast<int64_t>(std::floor(-support / s)) + 1, n = 2 - 2 * start;
    const size_t first = t.w.size();
    double sum = 0;
    for (int64_t i = start; i < start + n; ++i) {
      const int64_t src = static_cast<int64_t>(base) + i;
      const double d = (static_cast<double>(i) - r) * s;
      double w = p.interp == Interp::kLinear ? linear_kernel(d) : cubic_kernel(d, p.cubic_a);
      if (p.exclude_outside && (src < 0 || src > last)) w = 0;
      t.idx.push_back(std::clamp<int64_t>(src, 0, last));
      t.w.push_back(w);
      sum += w;
    }
    if ((p.antialias || p.exclude_outside) && sum != 0)
      for (size_t k = first; k < t.w.size(); ++k) t.w[k] /= sum;
    for (size_t k = first; k < t.w.size(); ++k)
      if (t.w[k] != 0 && !(t.idx[k] == o && t.w[k] == 1.0)) t.identity = false;
  }
  t.begin.push_back(static_cast<int64_t>(t.idx.size()));
  if (a.in_len != a.out_len) t.identity = false;
  return t;
}

}  // namespace kiln::cpu::resize
