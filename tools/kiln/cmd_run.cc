// `kiln run PLAN`: binds inputs (files or seeded random), executes once, prints every output
// (dtype, shape, min/max/mean, first values) and the latency; --output-dir writes .npy files.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "io/npy.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/tensors.h"

namespace kiln::cli {

int cmd_run(const RunOptions& o) {
  auto parsed = o.inference.parse();
  if (!parsed.ok()) return report_error("run", parsed.status());
  auto engine = Runtime::load_engine(o.plan);
  if (!engine.ok()) return report_error("run", engine.status());
  auto inputs = prepare_inputs(**engine, parsed->files, parsed->shapes, parsed->seed);
  if (!inputs.ok()) return report_error("run", inputs.status());
  auto ctx = (*engine)->create_execution_context();
  Status s = bind_inputs(*ctx, *inputs, parsed->shapes);
  if (!s.ok()) return report_error("run", s);
  for (const auto& [name, t] : *inputs)
    std::printf("input  %s%s\n", tensor_summary(name, t).c_str(), parsed->files.count(name) ? "" : " (random)");

  const auto t0 = std::chrono::steady_clock::now();
  s = ctx->execute();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!s.ok()) return report_error("run", s);

  if (!o.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.output_dir, ec);
    if (ec) return report_error("run", not_found("cannot create '" + o.output_dir + "': " + ec.message()));
  }
  for (const IOTensor& io : (*engine)->io_tensors()) {
    if (io.is_input) continue;
    auto out = ctx->output(io.desc.name);
    if (!out.ok()) return report_error("run", out.status());
    std::printf("output %s\n", tensor_summary(io.desc.name, *out).c_str());
    if (o.output_dir.empty()) continue;
    const std::string path = o.output_dir + "/" + sanitize_file_name(io.desc.name) + ".npy";
    const Tensor writable = npy_compatible(*out);
    if (writable.dtype() != out->dtype())
      std::fprintf(stderr, "note: %s is %s, written as %s\n", io.desc.name.c_str(), dtype_name(out->dtype()),
                   dtype_name(writable.dtype()));
    s = io::write_npy(path, writable);
    if (!s.ok()) return report_error("run", s);
  }
  std::printf("latency %.3f ms\n", ms);
  return kExitOk;
}

}  // namespace kiln::cli
