// `kiln bench PLAN`: trtexec-style performance summary, preceded by the plan load time
// (deserialize + weight upload + device context). CPU plans: warm-up runs, then at least
// --iterations timed execute() calls (and at least --duration seconds); latency percentiles use
// the nearest-rank method; throughput = 1000 / mean latency (one context). CUDA plans: see
// bench_cuda.cc (--streams N contexts on N streams, data on the device, --cuda-graph).
// --dump-profile FILE (both): per-layer medians as JSON plus a table. bench_engine is the
// measurement (shared with the Python package's kiln.bench), cmd_bench the command around it.
#include <chrono>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tools/kiln/bench_cuda.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/profile.h"
#include "tools/kiln/tensors.h"

namespace kiln::cli {
namespace {

// The CPU engine's benchmark: one context, execute() on host tensors.
int bench_cpu(const BenchOptions& o, ExecutionContext& ctx, const std::vector<std::pair<std::string, Tensor>>& inputs,
              nlohmann::json* j) {
  for (int i = 0; i < o.warmup; ++i) {
    Status s = ctx.execute();
    if (!s.ok()) return report_error("bench", s);
  }
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(o.iterations));  // no regrowth inside the loop (soak RSS stays readable)
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    Status s = ctx.execute();
    const auto t1 = std::chrono::steady_clock::now();
    if (!s.ok()) return report_error("bench", s);
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    const double elapsed = std::chrono::duration<double>(t1 - start).count();
    if (static_cast<int>(ms.size()) >= o.iterations && elapsed >= o.duration_s) break;
  }
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const nlohmann::json lat = latency_stats(ms);
  const double mean = lat["mean"].get<double>();
  int64_t batch = 1;
  if (!inputs.empty() && inputs.front().second.rank() >= 1) batch = inputs.front().second.dim(0);
  const double ips = mean > 0 ? 1000.0 / mean : 0;
  (*j)["iterations"] = ms.size();
  (*j)["total_s"] = total_s;
  (*j)["latency_ms"] = lat;
  (*j)["throughput"] = {{"inferences_per_s", ips}, {"items_per_s", ips * static_cast<double>(batch)}, {"batch", batch}};

  std::printf("=== Performance summary (%zu iterations, %.2f s, target %s) ===\n", ms.size(), total_s,
              (*j)["target"].get<std::string>().c_str());
  for (const auto& [name, t] : inputs) std::printf("input %s %s %s\n", name.c_str(), dtype_name(t.dtype()), shape_str(t.shape()).c_str());
  std::printf("Latency: min = %.4f ms, max = %.4f ms, mean = %.4f ms, median = %.4f ms\n", lat["min"].get<double>(),
              lat["max"].get<double>(), mean, lat["median"].get<double>());
  std::printf("         percentile(90%%) = %.4f ms, percentile(95%%) = %.4f ms, percentile(99%%) = %.4f ms\n",
              lat["p90"].get<double>(), lat["p95"].get<double>(), lat["p99"].get<double>());
  std::printf("Throughput: %.2f inferences/s, %.2f items/s (batch %lld)\n", ips, ips * static_cast<double>(batch),
              static_cast<long long>(batch));
  return kExitOk;
}

}  // namespace

int bench_engine(const BenchOptions& o, const Engine& engine, const std::map<std::string, Shape>& shapes,
                 nlohmann::json* out) {
  nlohmann::json& j = *out;
  const bool cuda = engine.header().target.backend == PlanBackend::kCuda;
  Status s = check_cuda_only_flags(cuda, o.cuda_graph, o.streams);
  if (!s.ok()) return report_error("bench", s);
  auto inputs = prepare_inputs(engine, {}, shapes, 1);
  if (!inputs.ok()) return report_error("bench", inputs.status());
  nlohmann::json phases = nlohmann::json::object();
  for (const auto& ph : engine.load_phases()) phases[ph.name] = ph.ms;
  j["target"] = engine.header().target.to_string();
  j["plan_load_phases_ms"] = phases;
  if (cuda) {
    j["tactics_restored"] = engine.tactics_restored();
    j["tactics_rebuilt"] = engine.tactics_rebuilt();
  }
  j["warmup"] = o.warmup;
  nlohmann::json shapes_json = nlohmann::json::object();
  for (const auto& [name, t] : *inputs) shapes_json[name] = t.shape();
  j["input_shapes"] = shapes_json;

  const int rc = cuda ? bench_cuda(o, engine, *inputs, &j) : [&] {
    auto ctx = engine.create_execution_context();
    Status b = bind_inputs(*ctx, *inputs, shapes);
    if (!b.ok()) return report_error("bench", b);
    return bench_cpu(o, *ctx, *inputs, &j);
  }();
  if (rc != kExitOk) return rc;
  if (cuda) {
    // Shapes other than opt: set up on first use with the nearest tuned shape set's tactics.
    nlohmann::json setups = nlohmann::json::array();
    for (const auto& [shape_set, ms] : engine.shape_setup_ms()) {
      std::string label;
      for (const Shape& sh : shape_set) label += (label.empty() ? "" : " ") + shape_str(sh);
      std::printf("Shape setup %s: %.1f ms (first use; tactics of the nearest of %zu tuned shape sets)\n",
                  label.c_str(), ms, engine.tuned_shapes().size());
      setups.push_back({{"shapes", shape_set}, {"ms", ms}});
    }
    j["shape_setup_ms"] = setups;
    j["tuned_shape_sets"] = engine.tuned_shapes().size();
    j["weights_uploaded_packed"] = engine.weights_uploaded_packed();
  }

  if (!o.dump_profile.empty()) {
    // A separate context with host inputs: the profile runs the layers unfused from any graph.
    auto ctx = engine.create_execution_context();
    s = bind_inputs(*ctx, *inputs, shapes);
    if (!s.ok()) return report_error("bench", s);
    const int runs = cuda ? 20 : 3;
    auto prof = collect_profile(*ctx, runs);
    if (!prof.ok()) return report_error("bench", prof.status());
    s = write_profile(o.dump_profile, *prof, runs);
    if (!s.ok()) return report_error("bench", s);
    print_profile_table(*prof);
    std::printf("wrote the per-layer profile to %s\n", o.dump_profile.c_str());
  }
  return kExitOk;
}

int cmd_bench(const BenchOptions& o) {
  Status s = o.validate();
  if (!s.ok()) return report_error("bench", s);
  auto shapes = parse_shapes(o.shapes);
  if (!shapes.ok()) return report_error("bench", shapes.status().with_context("--shapes"));
  const auto load0 = std::chrono::steady_clock::now();
  auto engine = load_plan(o.plan, stderr_logger(o.verbose));
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load0).count();
  if (!engine.ok()) return report_error("bench", engine.status());
  const bool cuda = (*engine)->header().target.backend == PlanBackend::kCuda;
  s = check_cuda_only_flags(cuda, o.cuda_graph, o.streams);
  if (!s.ok()) return report_error("bench", s);
  std::printf("Plan load time: %.2f ms (", load_ms);
  for (size_t i = 0; i < (*engine)->load_phases().size(); ++i) {
    const auto& ph = (*engine)->load_phases()[i];
    std::printf("%s%s %.1f", i ? ", " : "", ph.name.c_str(), ph.ms);
  }
  std::printf(")\n");
  if (cuda)
    std::printf("Tactics: %d restored from the plan's tactic data (cuDNN plans, cuBLASLt algorithms), %d rebuilt from "
                "their heuristic rank; "
                "%d weights uploaded as packed in the plan\n",
                (*engine)->tactics_restored(), (*engine)->tactics_rebuilt(), (*engine)->weights_uploaded_packed());
  nlohmann::json j;
  j["plan"] = o.plan;
  j["plan_load_ms"] = load_ms;
  const int rc = bench_engine(o, **engine, *shapes, &j);
  if (rc != kExitOk) return rc;
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!f) return report_error("bench", not_found("cannot write '" + o.json + "'"));
  }
  return kExitOk;
}

}  // namespace kiln::cli
