// Tactic selection: the one place in Kiln that times tactics and the one user of the timing
// cache (docs/decisions/0014-tactic-contract.md). For each layer the backend hands over (a
// TunableLayer), the selector drops candidates from disabled sources, takes the fastest
// cached candidate that still selects, or else selects and times up to the budget's number
// of candidates per source, records every measured time in the cache and keeps the fastest.
// No device code here: the layer's time_ms() measures; the selector decides.
#pragma once

#include <string>
#include <vector>

#include "backends/kernel.h"
#include "builder/timing_cache.h"

namespace kiln {

struct TacticSelectorConfig {
  TacticSources sources = TacticSources::all();
  TuningBudget budget;
  bool tune = true;  // false: the first candidate that selects, nothing timed or cached
};

class TacticSelector {
 public:
  // `cache` (not owned, outlives the selector) is the build's timing cache: file-backed when
  // the user named one, else in memory, so equal layers of one build are timed once.
  TacticSelector(TimingCache* cache, TacticSelectorConfig config) : cache_(cache), config_(std::move(config)) {}

  // Chooses and selects `layer`'s tactic. Errors name the layer: no candidate from the enabled
  // sources, or none that runs (with each candidate's reason, the first few).
  StatusOr<TacticChoice> choose(TunableLayer& layer);

  // The timing-cache signature of a layer under this configuration: the layer's own
  // signature plus the enabled sources and the budget (a smaller budget may find another winner).
  std::string cache_signature(const TunableLayer& layer) const;

  // The function form the backends take (GpuBuildOptions::select_tactic).
  TacticSelectFn as_function() {
    return [this](TunableLayer& l) { return choose(l); };
  }

  int layers_timed() const { return timed_layers_; }
  int candidates_timed() const { return timed_candidates_; }

 private:
  TimingCache* cache_;
  TacticSelectorConfig config_;
  int timed_layers_ = 0, timed_candidates_ = 0;
};

// The timing-cache tactic key of an id: its decimal value ("33554433").
std::string tactic_cache_key(TacticId id);

}  // namespace kiln
