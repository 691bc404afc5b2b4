// The calibration cache file (issue 12, docs/decisions/0050): what a calibration found, so a
// rebuild needs no data. Text, one field per line:
//
//   # Kiln calibration cache
//   kiln-calibration-cache 1
//   model: fnv1a64:<16 hex digits of the ONNX file's bytes>
//   format: int8 | fp8e4m3
//   calibrator: entropy | minmax | percentile:99.99 | mse | delayed:1024:max:0
//   e5m2: PATTERN[,PATTERN...]          (FP8 with E5M2 activations only)
//   samples: <count>
//   <tensor name>: <Q/DQ scale, %.9g (round-trips a float32)>
//   ...
//
// A tensor name is everything before the line's last ": " (ONNX names may hold ':').
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kiln/status.h"

namespace kiln::quant {

struct CalibrationCache {
  uint64_t model_hash = 0;
  std::string format;      // quant_format_name()
  std::string calibrator;  // the resolved spec
  std::string e5m2;        // FP8: the E5M2 node patterns, comma-separated ("" = none; line omitted)
  int64_t samples = 0;
  std::map<std::string, float> scales;  // activation tensor -> Q/DQ scale (finite, > 0)
};

// Parses a cache file. Errors (InvalidArgument naming the path and line): not a Kiln calibration
// cache, an unknown version, a missing header field, a malformed line, a scale that is not a
// finite number > 0, a tensor named twice.
StatusOr<CalibrationCache> read_calibration_cache(const std::string& path);
// Writes `c` to `path` through a temporary file renamed over it (never half-written).
// InvalidArgument for a tensor name holding a line break, or when the file cannot be written.
Status write_calibration_cache(const std::string& path, const CalibrationCache& c);

}  // namespace kiln::quant
