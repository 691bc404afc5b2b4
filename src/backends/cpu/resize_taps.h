// The taps of ONNX Resize / Upsample along one axis (Operators.md "Resize", versions 10-19;
// "Upsample", 7 / 9): for each output coordinate, the input indices and weights its value is the
// weighted sum of, from the spec's coordinate_transformation_mode, nearest_mode and interpolation
// kernel (linear; cubic with cubic_coeff_a, exclude_outside; antialias) — or, for
// tf_crop_and_resize, a mark that it takes extrapolation_value. One definition serves the CPU
// reference (ops_movement_resize.cc) and the CUDA lowering (factory_resize_taps.cc), so both
// sample at the same points with the same weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu::resize {

enum class Interp { kNearest, kLinear, kCubic };
enum class Coord {
  kHalfPixel,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfCropAndResize,
  kTfHalfPixelForNn
};
// kLegacy: Upsample and Resize-10 (floor when upsampling, ceil when downsampling).
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kLegacy };

struct ResizeParams {
  Interp interp = Interp::kNearest;
  Coord coord = Coord::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation = 0.0;
};

// One axis: in_len -> out_len with `scale`; roi [start, end] for tf_crop_and_resize.
struct AxisSpec {
  int64_t in_len = 1, out_len = 1;
  double scale = 1.0;
  double len_resized = 1.0;  // in_len * scale, not rounded: the spec's length_resized
  double roi_start = 0.0, roi_end = 1.0;
};

// Taps of one axis: output coordinate o uses idx/w[begin[o] .. begin[o+1]) (idx clamped into
// [0, in_len)); outside[o] marks a coordinate that takes the extrapolation value. identity: the
// axis maps every output to the same input index with weight 1 (nothing to do).
struct AxisTaps {
  std::vector<int64_t> begin, idx;
  std::vector<double> w;
  std::vector<bool> outside;
  bool identity = true;
};

// The names of the attributes' values; false for an unknown name.
bool parse_interp(const std::string& m, Interp* out);       // "nearest", "linear" / "bilinear", "cubic"
bool parse_coord(const std::string& c, Coord* out);         // coordinate_transformation_mode
bool parse_nearest(const std::string& n, NearestMode* out);  // nearest_mode

AxisTaps build_taps(const AxisSpec& a, const ResizeParams& p);

}  // namespace kiln::cpu::resize
