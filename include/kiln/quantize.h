// Post-training quantization of an ONNX model (issue 12, docs/decisions/0050): calibrate the
// activations that feed convolutions and matrix products on sample data, then write the model
// as standard ONNX QuantizeLinear / DequantizeLinear ("Q/DQ", ONNX Operators.md) that any runtime
// loads — `kiln quantize` — or build it directly — `kiln build --int8|--fp8 --calib DATA`, which
// quantizes in memory the same way, so both give the same plan.
//
// What is quantized: every Conv, Gemm and MatMul of the main graph whose weight (Conv input 1,
// Gemm B, MatMul B) is a float initializer and whose activation input is float:
//  - the activation gets Q -> DQ with one symmetric per-tensor scale (zero point 0):
//      scale = amax / qmax, amax from the calibrator, qmax = 127 (INT8) or 448 (FP8 E4M3FN);
//  - the weight is stored quantized (INT8 or E4M3FN initializer) with one scale per output
//    channel (Conv axis 0, Gemm axis 0 with transB = 1 else 1, MatMul axis 1; per tensor below
//    opset 13, where DequantizeLinear has no axis): scale_c = max|W_c| / qmax, q = round-half-even
//    (W / scale_c) (INT8) or the nearest E4M3FN value (saturating), then DequantizeLinear;
//    with per_tensor_weights, Gemm / MatMul weights get one scalar scale instead (see there).
// Biases stay float (TensorRT's explicit-quantization form; the fused layer scales them).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kiln/logger.h"
#include "kiln/status.h"

namespace kiln {

enum class QuantFormat : uint8_t { kInt8 = 0, kFp8E4M3 = 1 };
const char* quant_format_name(QuantFormat f);  // "int8", "fp8e4m3"

struct QuantizeConfig {
  QuantFormat format = QuantFormat::kInt8;
  // Calibration samples: a .npz archive (numpy.savez) or a directory of <input name>.npy files,
  // one array per graph input with the samples stacked along dim 0 (its other dims are the
  // input's). float64 data is converted to float32, integer data to the input's integer type.
  // "" = take every scale from `cache`.
  std::string data;
  // Calibration cache (text: a header naming the calibrator, the format and the model's hash,
  // then one "tensor: scale" line per activation). Read when the file exists and was made for
  // this model (another model's cache is refused, never overwritten); written (atomically) after
  // a calibration. "" = none.
  std::string cache;
  // How the activation amax is chosen from what the samples showed (src/quant/calibrator.h):
  //   minmax              the largest |x| seen; the default (ONNX Runtime's and ModelOpt's:
  //                       on PP-OCRv4 entropy clipped tensors to 10% of their range and read 0
  //                       of 6 test lines, min-max 6 of 6; docs/decisions/0050)
  //   entropy             KL divergence over a 2048-bin |x| histogram (TensorRT's entropy
  //                       calibration 2)
  //   percentile[:P]      the P-th percentile of |x| (default 99.99)
  //   mse                 the amax minimizing the histogram's expected squared quantization error
  //   delayed[:N[:ALGO[:M]]]  Transformer Engine's DelayedScaling: a history of the last N
  //                       batch amaxes (default 1024) reduced by ALGO = max (default) or
  //                       most_recent, the scale multiplied by 2^M (margin, default 0)
  // "" = the format's default.
  std::string calibrator;
  // Samples per calibration batch for inputs whose batch dim is dynamic; 0 = 8. An input with
  // a fixed batch dim B is fed B samples at a time (a last partial batch is left out).
  int batch_size = 0;
  int max_batches = 0;  // 0 = every batch the data holds
  // Node names (exact, or a prefix ending in '*') never quantized.
  std::vector<std::string> exclude;
  // FP8 only: node names (exact, or a prefix ending in '*') whose input activation is quantized
  // to FP8 E5M2 (5 exponent bits: range to 57344, for activations whose range overflows E4M3's
  // 448) instead of E4M3FN; weights stay E4M3FN. Each pattern must match a quantized layer.
  // TensorRT has no E5M2 Q/DQ; ONNX QuantizeLinear-19 does.
  std::vector<std::string> e5m2;
  // Gemm / MatMul weights with one per-tensor scale (a scalar DequantizeLinear scale) instead of
  // one per output channel: scale = amax / qmax, amax the largest |W| over every linear layer
  // reading the same activation (so Q/K/V share it and stay one scalar once fused horizontally).
  // Transformer Engine's and ModelOpt's FP8 recipe; on Hopper the FP8 QuantLinear then runs as one
  // cuBLASLt GEMM with the scales, bias and 16-bit output fused (decision 0085). Convs keep per-
  // channel scales. `kiln quantize|build --weight-scales per-tensor`.
  bool per_tensor_weights = false;
  // Accuracy budget (docs/decisions/0062). max_error in (0, 1): split `data` into its first
  // calib_split share of samples (calibration) and the rest (held out); measure the error
  //   max over outputs o of  1 - cos(o_quantized, o_fp32)
  // (cosine over every held-out sample of o, the FP32 run being the unquantized model on the CPU
  // reference, the quantized one the Q/DQ model), and keep the fewest, most sensitive quantized
  // layers float until it is <= max_error. A layer's sensitivity is the error drop when that layer
  // alone is left float with every other quantized (leave one out). 0 = no budget (quantize every
  // target). Needs `data`; a split must leave at least one batch on each side.
  double max_error = 0;
  double calib_split = 0.8;  // share of the samples, from the first, that calibrate; (0, 1)
  std::function<void(int done, int total)> progress;  // after each calibration batch
  Logger logger;
};

// One quantization target as the accuracy budget decided it.
struct LayerChoice {
  std::string node;          // ONNX node name
  bool quantized = true;     // false: kept float to meet the budget
  double sensitivity = 0;    // error(all quantized) - error(all but this one quantized)
};

struct QuantizeReport {
  std::string calibrator;                      // as resolved ("entropy", "percentile:99.99", ...)
  bool from_cache = false;                     // every scale came from QuantizeConfig::cache
  int batches = 0, samples = 0;                // calibration batches / samples run
  std::vector<std::string> quantized;          // node names, in graph order
  std::vector<std::string> skipped;            // "node (op): why", for Conv/Gemm/MatMul left float
  std::map<std::string, float> activation_scales;  // activation tensor -> Q/DQ scale
  // With QuantizeConfig::max_error (else empty / -1): the error with every target quantized, the
  // error of the returned model, the samples held out, and each target in graph order.
  double error_all_quantized = -1, error = -1;
  int held_out_samples = 0;
  std::vector<LayerChoice> layers;
};

// The accuracy budget's outcome as text lines (for kiln build / kiln quantize): the errors, each
// layer's sensitivity and precision. Empty without a budget.
std::vector<std::string> describe_budget(const QuantizeReport& r, const QuantizeConfig& config);

// Quantizes the ONNX model at `onnx_path` and returns it serialized (an ONNX ModelProto with the
// Q/DQ nodes; external-data weights are inlined). Errors: everything the ONNX importer reports;
// InvalidArgument for calibration data that does not fit the model (a missing or extra input,
// other trailing dims, no samples), a bad calibrator spec, a cache for another model (the hash is
// named) or without a tensor the model needs and no data to recalibrate, a max_error outside (0,
// 1) or without data, a calib_split that leaves no calibration or no held-out batch; Unsupported
// for FP8 below opset 19 (FP8 QuantizeLinear) or a model with nothing to quantize.
StatusOr<std::string> quantize_onnx(const std::string& onnx_path, const QuantizeConfig& config,
                                    QuantizeReport* report = nullptr);

}  // namespace kiln
