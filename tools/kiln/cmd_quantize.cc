// `kiln quantize MODEL.onnx --calib DATA -o MODEL.qdq.onnx [--format int8|fp8]`: post-training
// calibration written as a standard Q/DQ ONNX model (kiln/quantize.h, docs/decisions/0050) that
// other runtimes load; `kiln build` of it gives the plan `kiln build --int8 --calib DATA` gives.
// Prints what was quantized, what was left float and why, and each activation's scale (-v).
#include <cstdio>

#include "io/output_file.h"
#include "kiln/quantize.h"
#include "tools/kiln/commands.h"

namespace kiln::cli {

int cmd_quantize(const QuantizeOptions& o) {
  auto config = o.calib.to_config();
  if (!config.ok()) return report_error("quantize", config.status());
  config->format = o.format == "fp8" ? QuantFormat::kFp8E4M3 : QuantFormat::kInt8;
  config->progress = [](int done, int total) {
    if (done == total || done == 1 || done % 10 == 0) std::fprintf(stderr, "calibration batch %d/%d\n", done, total);
  };
  if (o.verbose)
    config->logger = [](LogSeverity, const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); };
  QuantizeReport rep;
  auto model = quantize_onnx(o.model, *config, &rep);
  if (!model.ok()) return report_error("quantize", model.status());
  // Written whole to a temporary file, then renamed: an existing output is never half-replaced.
  if (Status s = io::write_file_atomically(o.output, model->data(), model->size(), "quantized model"); !s.ok())
    return report_error("quantize", s);
  std::printf("Quantized '%s' -> '%s' (%s, calibrator %s, %s)\n", o.model.c_str(), o.output.c_str(),
              quant_format_name(config->format), rep.calibrator.c_str(),
              rep.from_cache ? ("scales from the cache '" + config->cache + "'").c_str()
                             : (std::to_string(rep.samples) + " samples in " + std::to_string(rep.batches) + " batches").c_str());
  std::printf("  %zu layers quantized, %zu activations calibrated, %zu layers left float\n", rep.quantized.size(),
              rep.activation_scales.size(), rep.skipped.size());
  for (const std::string& s : rep.skipped) std::printf("  float: %s\n", s.c_str());
  for (const std::string& line : describe_budget(rep, *config)) std::printf("  %s\n", line.c_str());
  if (o.verbose)
    for (const auto& [name, scale] : rep.activation_scales) std::printf("  scale %s: %.9g\n", name.c_str(), scale);
  return kExitOk;
}

}  // namespace kiln::cli
