// Tactic selection (tactic_selector.h): cache first, then timing within the budget.
#include "builder/tactic_selector.h"

#include <algorithm>
#include <limits>
#include <map>

namespace kiln {

std::string tactic_cache_key(TacticId id) { return std::to_string(id); }

std::string TacticSelector::cache_signature(const TunableLayer& layer) const {
  return layer.signature() + " src=" + config_.sources.to_string() + " " + config_.budget.to_string();
}

namespace {

std::string describe(TacticId id) {
  return std::string(tactic_source_name(tactic_id_source(id))) + "#" + std::to_string(tactic_id_variant(id));
}

Status none_ran(const TunableLayer& layer, const std::vector<std::string>& reasons, size_t candidates) {
  std::string msg = "layer '" + layer.name() + "': none of its " + std::to_string(candidates) + " candidate tactics runs";
  constexpr size_t kShown = 4;
  for (size_t i = 0; i < reasons.size() && i < kShown; ++i) msg += "\n    " + reasons[i];
  if (reasons.size() > kShown) msg += "\n    ... " + std::to_string(reasons.size() - kShown) + " more";
  return unsupported(msg);
}

}  // namespace

StatusOr<TacticChoice> TacticSelector::choose(TunableLayer& layer) {
  KILN_ASSIGN_OR_RETURN(std::vector<TacticId> all, layer.candidates());
  std::vector<TacticId> cands;
  std::vector<std::string> disabled;
  for (TacticId id : all) {
    if (config_.sources.has(tactic_id_source(id))) cands.push_back(id);
    else disabled.push_back(tactic_source_name(tactic_id_source(id)));
  }
  if (cands.empty()) {
    std::string msg = "layer '" + layer.name() + "': no tactic from the enabled sources (" +
                      (config_.sources.to_string().empty() ? "none" : config_.sources.to_string()) + ")";
    if (!disabled.empty()) {
      std::sort(disabled.begin(), disabled.end());
      disabled.erase(std::unique(disabled.begin(), disabled.end()), disabled.end());
      msg += "; it has tactics from";
      for (const auto& d : disabled) msg += " " + d;
    }
    return unsupported(msg);
  }
  std::vector<std::string> reasons;
  if (!config_.tune) {
    for (TacticId id : cands) {
      Status st = layer.select(id);
      if (st.ok()) return TacticChoice{id, 0, false};
      reasons.push_back(describe(id) + ": " + st.message());
    }
    return none_ran(layer, reasons, cands.size());
  }

  const std::string sig = cache_signature(layer);
  if (cache_) {
    const std::map<std::string, double> cached = cache_->lookup(sig);
    std::vector<std::pair<double, TacticId>> order;
    for (TacticId id : cands) {
      auto it = cached.find(tactic_cache_key(id));
      if (it != cached.end()) order.emplace_back(it->second, id);
    }
    std::sort(order.begin(), order.end());
    for (const auto& [ms, id] : order)
      if (layer.select(id).ok()) return TacticChoice{id, ms, true};
  }

  ++timed_layers_;
  std::map<TacticSource, int> timed_per_source;
  double best_ms = std::numeric_limits<double>::infinity();
  TacticId best = kNoTactic;
  for (TacticId id : cands) {
    int& n = timed_per_source[tactic_id_source(id)];
    if (n >= config_.budget.limit(tactic_id_source(id))) continue;
    Status st = layer.select(id);
    if (!st.ok()) {
      reasons.push_back(describe(id) + ": " + st.message());
      continue;
    }
    StatusOr<double> ms = layer.time_ms(config_.budget.timing_iterations);
    if (!ms.ok()) {
      reasons.push_back(describe(id) + ": " + ms.status().message());
      continue;
    }
    ++n;
    ++timed_candidates_;
    if (cache_) cache_->record(sig, tactic_cache_key(id), *ms);
    if (*ms < best_ms) {
      best_ms = *ms;
      best = id;
    }
  }
  if (best == kNoTactic) return none_ran(layer, reasons, cands.size());
  Status st = layer.select(best);
  if (!st.ok()) return internal_error("layer '" + layer.name() + "': tactic " + describe(best) + " stopped selecting: " + st.message());
  return TacticChoice{best, best_ms, false};
}

}  // namespace kiln
