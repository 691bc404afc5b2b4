// `kiln build MODEL.onnx -o PLAN`: builds a plan, reloads it to check it, writes it, and
// prints a summary (a line per optimizer pass, layers, inputs with their profile ranges,
// weights, time with the tuning share). While CUDA tactics are tuned, stderr shows progress:
// a bar redrawn in place on a terminal, one plain line per layer otherwise. Inputs with dynamic
// dims and no shapes build with 1 for each such dim, with a warning (trtexec's habit).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "builder/build_from_graph.h"
#include "io/output_file.h"
#include "onnx/importer.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/dynamic_dims.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Tuning progress on stderr and the tuning time (first "tuning" report to done == total).
struct TuningProgress {
  bool tty = ::isatty(2) != 0;
  bool started = false, drawn = false;
  Clock::time_point start, end;

  void update(const BuildProgress& p) {
    const auto now = Clock::now();
    if (!started) {
      started = true;
      start = now;
    }
    end = now;
    const double s = std::chrono::duration<double>(now - start).count();
    const bool done = p.total > 0 && p.done >= p.total;
    if (tty) {
      constexpr int kWidth = 24;
      const int filled = p.total > 0 ? static_cast<int>(static_cast<double>(kWidth) * p.done / p.total) : 0;
      std::string bar(static_cast<size_t>(filled), '#');
      bar.resize(kWidth, '.');
      std::string name = p.detail.size() > 40 ? p.detail.substr(0, 37) + "..." : p.detail;
      std::fprintf(stderr, "\r\033[Ktuning [%s] %d/%d %s %.1f s", bar.c_str(), p.done, p.total, name.c_str(), s);
      if (done) std::fprintf(stderr, "\n");
      drawn = !done;
    } else if (!done) {
      std::fprintf(stderr, "tuning %d/%d %s (%.1f s)\n", p.done + 1, p.total, p.detail.c_str(), s);
    } else {
      std::fprintf(stderr, "tuning done: %d layers in %.1f s\n", p.total, s);
    }
    std::fflush(stderr);
  }
  // Ends a half-drawn bar (a failed build) so the error starts on its own line.
  void finish() {
    if (drawn) std::fprintf(stderr, "\n");
    drawn = false;
  }
  double ms() const { return started ? std::chrono::duration<double, std::milli>(end - start).count() : 0; }
};

}  // namespace

int cmd_build(const BuildOptions& o) {
  auto config = o.to_config();
  if (!config.ok()) return report_error("build", config.status());
  const auto t0 = std::chrono::steady_clock::now();
  TuningProgress tuning;
  config->progress = [t0, &tuning](const BuildProgress& p) {
    if (p.step == "tuning") return tuning.update(p);
    if (p.step == "calibrate" && p.total > 0) {
      if (p.done == p.total || p.done == 1 || p.done % 10 == 0)
        std::fprintf(stderr, "calibration batch %d/%d\n", p.done, p.total);
      return;
    }
    tuning.finish();
    if (p.step == "warning") {
      std::fprintf(stderr, "warning: %s\n", p.detail.c_str());
      return;
    }
    if (p.step == "timing cache") {
      std::fprintf(stderr, "%s\n", p.detail.c_str());
      return;
    }
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
  auto graph = import_for_build(o.model, *config);
  tuning.finish();
  if (!graph.ok()) return report_error("build", graph.status());
  // trtexec's habit: dynamic dims without shapes build with 1 (and say so).
  for (const std::string& w : fill_dynamic_dims(*graph, &*config)) std::fprintf(stderr, "kiln build: warning: %s\n", w.c_str());
  auto plan = build_from_graph(std::move(*graph), *config);
  tuning.finish();
  if (!plan.ok()) return report_error("build", plan.status());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto engine = Runtime::deserialize_engine(*plan);
  if (!engine.ok()) return report_error("build", engine.status().with_context("the plan just built does not load"));

  // Whole or not at all: an existing plan is never half-replaced.
  if (Status s = io::write_file_atomically(o.output, plan->data(), plan->size(), "plan"); !s.ok())
    return report_error("build", s);

  const Engine& e = **engine;
  std::printf("Built '%s' -> '%s' in %.1f ms", o.model.c_str(), o.output.c_str(), ms);
  if (tuning.started) std::printf(" (tactic tuning %.1f ms, %.0f%%)", tuning.ms(), ms > 0 ? 100.0 * tuning.ms() / ms : 0.0);
  std::printf("\n");
  std::printf("  target %s, %zu layers, weights %zu bytes, plan %zu bytes\n", e.header().target.to_string().c_str(),
              e.layers().size(), e.weights_bytes(), plan->size());
  std::printf("  precision: fp32%s%s%s\n", e.tf32() ? " tf32" : "", e.fp16() ? " fp16" : "", e.bf16() ? " bf16" : "");
  std::map<std::string, int> constrained;  // per-layer precision constraints, layers per precision
  for (const LayerInfo& l : e.layers())
    if (l.precision_constrained) ++constrained[l.precision];
  for (const auto& [prec, count] : constrained)
    std::printf("  %d layer(s) constrained to %s (--layer-precisions)\n", count, prec.c_str());
  const std::string quant = quant_precision_summary(e);
  if (!quant.empty()) std::printf("  quantization: %s\n", quant.c_str());
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
