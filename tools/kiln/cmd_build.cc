// `kiln build MODEL.onnx -o PLAN`: builds a plan, reloads it to check it, writes it, and
// prints a summary (a line per optimizer pass, layers, inputs with their profile ranges,
// weights, time).
#include <chrono>
#include <cstdio>
#include <fstream>

#include "tools/kiln/commands.h"

namespace kiln::cli {

int cmd_build(const BuildOptions& o) {
  auto config = o.to_config();
  if (!config.ok()) return report_error("build", config.status());
  const auto t0 = std::chrono::steady_clock::now();
  config->progress = [t0](const BuildProgress& p) {
    // Steps finish in milliseconds today; report the ones that run long.
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (p.done == 0 && s > 1.0) std::fprintf(stderr, "[%.1f s] %s...\n", s, p.step.c_str());
    // One line per pass (before -> after layers, ms) and any --dump-after IR.
    if (!p.detail.empty()) {
      std::printf("  %s\n", p.detail.c_str());
      std::fflush(stdout);  // keep the pass lines in order with the progress lines on stderr
    }
  };
  std::fprintf(stderr, "Building '%s'\n", o.model.c_str());
  auto plan = Builder::build(o.model, *config);
  if (!plan.ok()) return report_error("build", plan.status());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto engine = Runtime::deserialize_engine(*plan);
  if (!engine.ok()) return report_error("build", engine.status().with_context("the plan just built does not load"));

  std::ofstream f(o.output, std::ios::binary);
  if (f) f.write(reinterpret_cast<const char*>(plan->data()), static_cast<std::streamsize>(plan->size()));
  if (!f) return report_error("build", not_found("cannot write the plan to '" + o.output + "'"));
  f.close();

  const Engine& e = **engine;
  std::printf("Built '%s' -> '%s' in %.1f ms\n", o.model.c_str(), o.output.c_str(), ms);
  std::printf("  target %s, %zu layers, weights %zu bytes, plan %zu bytes\n", e.header().target.to_string().c_str(),
              e.layers().size(), e.weights_bytes(), plan->size());
  std::printf("  precision: fp32%s%s%s\n", e.tf32() ? " tf32" : "", e.fp16() ? " fp16" : "", e.bf16() ? " bf16" : "");
  for (const IOTensor& io : e.io_tensors()) {
    if (io.is_input) {
      const ShapeRange* r = e.profiles()[0].find(io.desc.name);
      std::printf("  input  %s %s %s, profile %s\n", io.desc.name.c_str(), dtype_name(io.desc.dtype),
                  io.desc.shape_string().c_str(), r ? range_string(*r).c_str() : "?");
    } else {
      std::printf("  output %s %s %s\n", io.desc.name.c_str(), dtype_name(io.desc.dtype), io.desc.shape_string().c_str());
    }
  }
  return kExitOk;
}

}  // namespace kiln::cli
