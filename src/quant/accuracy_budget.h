// The accuracy budget of post-training quantization (QuantizeConfig::max_error,
// docs/decisions/0062): which Conv/Gemm/MatMul layers stay float so that the quantized model's
// outputs stay within 1 - cosine <= max_error of the FP32 model's on held-out calibration samples.
// Internal to kiln_quant: quantize_onnx calls it when a budget is set.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "kiln/quantize.h"

namespace kiln::quant {

// Calibration inputs from `path` (a .npz or a directory of <input>.npy): one [samples, ...]
// tensor per input of `g`, in g.inputs order, cast to the input's dtype. InvalidArgument naming
// the file and array for a missing or extra array, another rank / trailing dims / dtype kind,
// unequal sample counts or no samples (quantize_onnx.cc).
StatusOr<std::vector<Tensor>> load_calibration_samples(const std::string& path, const ir::Graph& g);

// quantize_onnx under config.max_error (see QuantizeConfig): calibrates on the first
// config.calib_split of the samples (once; the scales then come from a calibration cache), runs the
// FP32 model and each candidate Q/DQ model on the CPU reference over the held-out rest, measures
// every target's leave-one-out sensitivity, and keeps the most sensitive ones float, one more at a
// time, until the error is <= max_error. Returns the chosen Q/DQ model; fills report (layers,
// errors) when given.
StatusOr<std::string> quantize_within_budget(const std::string& onnx_path, const QuantizeConfig& config,
                                             QuantizeReport* report);

}  // namespace kiln::quant
