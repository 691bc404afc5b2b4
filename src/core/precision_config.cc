// PrecisionConfig (kiln/precision.h): the plan-wide float precision and the combinations a build
// refuses.
#include "kiln/precision.h"

namespace kiln {

DataType PrecisionConfig::float_precision() const {
  return fp16 ? DataType::kFloat16 : bf16 ? DataType::kBFloat16 : DataType::kFloat32;
}

Status PrecisionConfig::check() const {
  // Accepting the flags and building float layers anyway would look like a quantized plan that
  // is not one; say what is missing instead.
  if (int8 && !quantized_graph)
    return invalid_argument(
        "precision int8: INT8 layers need calibration data (--calib DATA, or a calibration cache: --calib-cache "
        "FILE) or a model with QuantizeLinear/DequantizeLinear nodes (`kiln quantize` writes one); this model has "
        "no Q/DQ nodes");
  if (fp8 && !quantized_graph)
    return invalid_argument(
        "precision fp8: FP8 layers need calibration data (--calib DATA, or a calibration cache: --calib-cache "
        "FILE) or a model with QuantizeLinear/DequantizeLinear nodes (`kiln quantize --format fp8` writes one); "
        "this model has no Q/DQ nodes");
  return Status::Ok();
}

}  // namespace kiln
