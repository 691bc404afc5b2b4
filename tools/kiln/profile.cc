// --dump-profile (see profile.h).
#include "tools/kiln/profile.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

namespace kiln::cli {

StatusOr<std::vector<LayerProfile>> reduce_profile(const std::vector<std::vector<LayerTiming>>& runs) {
  if (runs.empty() || runs[0].empty()) return invalid_argument("profile: no layer timings were recorded");
  const size_t n = runs[0].size();
  std::vector<LayerProfile> out(n);
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> ms;
    for (const auto& r : runs) {
      if (r.size() != n || r[i].name != runs[0][i].name)
        return internal_error("profile: runs list different layers (layer " + std::to_string(i) + ")");
      ms.push_back(r[i].ms);
    }
    std::sort(ms.begin(), ms.end());
    const size_t k = ms.size();
    out[i].name = runs[0][i].name;
    out[i].op = runs[0][i].op;
    out[i].tactic = runs[0][i].tactic;
    out[i].median_ms = k % 2 ? ms[k / 2] : 0.5 * (ms[k / 2 - 1] + ms[k / 2]);
    total += out[i].median_ms;
  }
  for (auto& l : out) l.share = total > 0 ? l.median_ms / total : 0;
  return out;
}

StatusOr<std::vector<LayerProfile>> collect_profile(ExecutionContext& ctx, int runs) {
  std::vector<std::vector<LayerTiming>> all;
  ctx.set_profiling(true);
  for (int r = 0; r < runs; ++r) {
    Status s = ctx.execute();
    if (!s.ok()) {
      ctx.set_profiling(false);
      return s.with_context("profiling run " + std::to_string(r));
    }
    all.push_back(ctx.layer_timings());
  }
  ctx.set_profiling(false);
  return reduce_profile(all);
}

Status write_profile(const std::string& path, const std::vector<LayerProfile>& layers, int runs) {
  nlohmann::json j;
  double total = 0;
  j["runs"] = runs;
  j["layers"] = nlohmann::json::array();
  for (const LayerProfile& l : layers) {
    total += l.median_ms;
    j["layers"].push_back(
        {{"name", l.name}, {"op", l.op}, {"tactic", l.tactic}, {"median_ms", l.median_ms}, {"share", l.share}});
  }
  j["total_ms"] = total;
  std::ofstream f(path);
  f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  if (!f) return not_found("cannot write the profile to '" + path + "'");
  return Status::Ok();
}

void print_profile_table(const std::vector<LayerProfile>& layers) {
  std::vector<const LayerProfile*> order;
  double total = 0;
  for (const auto& l : layers) {
    order.push_back(&l);
    total += l.median_ms;
  }
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->median_ms > b->median_ms; });
  std::printf("=== Per-layer profile (median, slowest first; %zu layers, total %.4f ms) ===\n", layers.size(), total);
  std::printf("%10s %7s  %-40s %-16s %s\n", "ms", "share", "layer", "op", "tactic");
  for (const LayerProfile* l : order)
    std::printf("%10.4f %6.2f%%  %-40s %-16s %s\n", l->median_ms, 100.0 * l->share, l->name.c_str(), l->op.c_str(),
                l->tactic.c_str());
}

}  // namespace kiln::cli
