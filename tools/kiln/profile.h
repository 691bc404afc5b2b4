// Per-layer profiles for `kiln run/bench --dump-profile`: several profiled runs of one context
// reduced to one row per layer (median ms, share of the total), written as JSON and a table.
#pragma once

#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "kiln/status.h"

namespace kiln::cli {

struct LayerProfile {
  std::string name, op, tactic;
  double median_ms = 0;  // median over the runs, milliseconds
  double share = 0;      // median_ms / sum of every layer's median_ms (0..1)
};

// Runs execute() `runs` times with profiling on (inputs already bound) and reduces the timings.
// Layers are matched by position; every run must list the same layers.
StatusOr<std::vector<LayerProfile>> collect_profile(ExecutionContext& ctx, int runs);
// Pure reduction (unit-tested): median per layer, share of the total.
StatusOr<std::vector<LayerProfile>> reduce_profile(const std::vector<std::vector<LayerTiming>>& runs);
// JSON: {"runs": N, "total_ms": sum of medians, "layers": [{name, op, tactic, median_ms, share}]}
// in execution order; the table (stdout) lists layers slowest first.
Status write_profile(const std::string& path, const std::vector<LayerProfile>& layers, int runs);
void print_profile_table(const std::vector<LayerProfile>& layers);

}  // namespace kiln::cli
