// `kiln bench` on CUDA plans: N execution contexts on N streams driven by N host threads, data
// resident on the device (see bench_cuda.cc), and the statistics both bench paths share.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/runtime.h"
#include "tools/kiln/options.h"

namespace kiln::cli {

// Nearest-rank percentile of an ascending vector (p in 0..100).
double percentile(const std::vector<double>& sorted, double p);
// {"min", "median", "mean", "p90", "p95", "p99", "max"} of `ms` (milliseconds; not empty).
nlohmann::json latency_stats(std::vector<double> ms);
// Prints "<label>: min = .., median = .., p90 = .., p99 = .., max = .. ms".
void print_latency(const char* label, const nlohmann::json& stats);

// Runs the CUDA benchmark and adds its results to `j`; prints the summary. `inputs` are the
// host inputs in engine order (float32). Returns an exit code.
int bench_cuda(const BenchOptions& o, const Engine& engine, const std::vector<std::pair<std::string, Tensor>>& inputs,
               nlohmann::json* j);

}  // namespace kiln::cli
