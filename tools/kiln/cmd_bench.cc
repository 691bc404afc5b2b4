// `kiln bench PLAN`: trtexec-style performance summary. Warm-up runs, then at least
// --iterations timed runs (and at least --duration seconds); latency percentiles use the
// nearest-rank method; throughput = 1000 / mean latency (one context, one stream).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tools/kiln/commands.h"
#include "tools/kiln/tensors.h"

namespace kiln::cli {
namespace {

double percentile(const std::vector<double>& sorted, double p) {
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

int cmd_bench(const BenchOptions& o) {
  Status s = o.validate();
  if (!s.ok()) return report_error("bench", s);
  auto shapes = parse_shapes(o.shapes);
  if (!shapes.ok()) return report_error("bench", shapes.status().with_context("--shapes"));
  auto engine = Runtime::load_engine(o.plan);
  if (!engine.ok()) return report_error("bench", engine.status());
  auto inputs = prepare_inputs(**engine, {}, *shapes, 1);
  if (!inputs.ok()) return report_error("bench", inputs.status());
  auto ctx = (*engine)->create_execution_context();
  s = bind_inputs(*ctx, *inputs, *shapes);
  if (!s.ok()) return report_error("bench", s);

  for (int i = 0; i < o.warmup; ++i) {
    s = ctx->execute();
    if (!s.ok()) return report_error("bench", s);
  }
  std::vector<double> ms;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    s = ctx->execute();
    const auto t1 = std::chrono::steady_clock::now();
    if (!s.ok()) return report_error("bench", s);
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    const double elapsed = std::chrono::duration<double>(t1 - start).count();
    if (static_cast<int>(ms.size()) >= o.iterations && elapsed >= o.duration_s) break;
  }
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double v : ms) sum += v;
  const double mean = sum / static_cast<double>(ms.size());
  int64_t batch = 1;
  if (!inputs->empty() && inputs->front().second.rank() >= 1) batch = inputs->front().second.dim(0);
  const double ips = mean > 0 ? 1000.0 / mean : 0;

  nlohmann::json j;
  j["plan"] = o.plan;
  j["target"] = (*engine)->header().target.to_string();
  j["warmup"] = o.warmup;
  j["iterations"] = ms.size();
  j["total_s"] = total_s;
  j["latency_ms"] = {{"min", sorted.front()},          {"median", percentile(sorted, 50)}, {"mean", mean},
                     {"p90", percentile(sorted, 90)},  {"p95", percentile(sorted, 95)},    {"p99", percentile(sorted, 99)},
                     {"max", sorted.back()}};
  j["throughput"] = {{"inferences_per_s", ips}, {"items_per_s", ips * static_cast<double>(batch)}, {"batch", batch}};
  nlohmann::json shapes_json = nlohmann::json::object();
  for (const auto& [name, t] : *inputs) shapes_json[name] = t.shape();
  j["input_shapes"] = shapes_json;

  std::printf("=== Performance summary (%zu iterations, %.2f s, target %s) ===\n", ms.size(), total_s,
              (*engine)->header().target.to_string().c_str());
  for (const auto& [name, t] : *inputs) std::printf("input %s %s %s\n", name.c_str(), dtype_name(t.dtype()), shape_str(t.shape()).c_str());
  std::printf("Latency: min = %.4f ms, max = %.4f ms, mean = %.4f ms, median = %.4f ms\n", sorted.front(), sorted.back(),
              mean, percentile(sorted, 50));
  std::printf("         percentile(90%%) = %.4f ms, percentile(95%%) = %.4f ms, percentile(99%%) = %.4f ms\n",
              percentile(sorted, 90), percentile(sorted, 95), percentile(sorted, 99));
  std::printf("Throughput: %.2f inferences/s, %.2f items/s (batch %lld)\n", ips, ips * static_cast<double>(batch),
              static_cast<long long>(batch));
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!f) return report_error("bench", not_found("cannot write '" + o.json + "'"));
  }
  return kExitOk;
}

}  // namespace kiln::cli
