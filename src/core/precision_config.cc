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
  if (int8)
    return invalid_argument(
        "precision int8: INT8 layers need calibration data or a model with QuantizeLinear/DequantizeLinear "
        "nodes, and INT8 tactics (issue 12: calibration and Q/DQ); this Kiln does not build them yet. Build "
        "without --int8 (a model's Q/DQ nodes then run as float operations)");
  if (fp8)
    return invalid_argument(
        "precision fp8: FP8 layers need calibration data or a model with QuantizeLinear/DequantizeLinear "
        "nodes, and FP8 tactics (issue 12); this Kiln does not build them yet. Build without --fp8");
  return Status::Ok();
}

}  // namespace kiln
