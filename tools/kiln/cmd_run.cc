// `kiln run PLAN`: binds inputs (files or seeded random), executes once, prints every output
// (dtype, shape, min/max/mean, first values) and the latency; --output-dir writes .npy files.
// --cuda-graph (CUDA plans): the first execute captures the layers, a second replays them and
// must give the same bits. --dump-profile FILE: per-layer medians as JSON plus a table.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "io/npy.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/profile.h"
#include "tools/kiln/tensors.h"

namespace kiln::cli {

int cmd_run(const RunOptions& o) {
  auto parsed = o.inference.parse();
  if (!parsed.ok()) return report_error("run", parsed.status());
  auto engine = load_plan(o.plan, stderr_logger(false));
  if (!engine.ok()) return report_error("run", engine.status());
  auto inputs = prepare_inputs(**engine, parsed->files, parsed->shapes, parsed->seed);
  if (!inputs.ok()) return report_error("run", inputs.status());
  const bool cuda = (*engine)->header().target.backend == PlanBackend::kCuda;
  Status s = check_cuda_only_flags(cuda, o.cuda_graph, 1);
  if (!s.ok()) return report_error("run", s);
  auto ctx = (*engine)->create_execution_context();
  ctx->set_cuda_graph(o.cuda_graph);
  s = bind_inputs(*ctx, *inputs, parsed->shapes);
  if (!s.ok()) return report_error("run", s);
  for (const auto& [name, t] : *inputs)
    std::printf("input  %s%s\n", tensor_summary(name, t).c_str(), parsed->files.count(name) ? "" : " (random)");

  const auto t0 = std::chrono::steady_clock::now();
  s = ctx->execute();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!s.ok()) return report_error("run", s);
  double replay_ms = -1;
  if (o.cuda_graph) {  // the first execute captured the graph; replay it and expect the same bits
    std::vector<Tensor> first;
    for (const IOTensor& io : (*engine)->io_tensors())
      if (!io.is_input) first.push_back(ctx->output(io.desc.name).value());
    const auto t1 = std::chrono::steady_clock::now();
    s = ctx->execute();
    replay_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
    if (!s.ok()) return report_error("run", s.with_context("CUDA graph replay"));
    size_t k = 0;
    for (const IOTensor& io : (*engine)->io_tensors()) {
      if (io.is_input) continue;
      if (!ctx->output(io.desc.name).value().bit_equal(first[k++]))
        return report_error("run", internal_error("output '" + io.desc.name +
                                                  "' differs between the CUDA graph's capture run and its replay"));
    }
  }

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
  if (replay_ms >= 0)
    std::printf("latency %.3f ms (CUDA graph capture + launch), replay %.3f ms (same outputs bit for bit)\n", ms,
                replay_ms);
  else
    std::printf("latency %.3f ms\n", ms);
  if (!o.dump_profile.empty()) {
    // Medians of several runs on the GPU; one run on the CPU (the reference kernels are slow).
    const int runs = cuda ? 10 : 1;
    auto prof = collect_profile(*ctx, runs);
    if (!prof.ok()) return report_error("run", prof.status());
    s = write_profile(o.dump_profile, *prof, runs);
    if (!s.ok()) return report_error("run", s);
    print_profile_table(*prof);
    std::printf("wrote the per-layer profile to %s\n", o.dump_profile.c_str());
  }
  return kExitOk;
}

}  // namespace kiln::cli
