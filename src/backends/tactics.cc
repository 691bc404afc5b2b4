// Tactic ids, sources and the tuning budget (backends/kernel.h): names, parsing, printing.
#include <limits>
#include <sstream>

#include "backends/kernel.h"

namespace kiln {

const char* tactic_source_name(TacticSource s) {
  switch (s) {
    case TacticSource::kKiln: return "kiln";
    case TacticSource::kCudnn: return "cudnn";
    case TacticSource::kCudnnGraph: return "cudnn_graph";
    case TacticSource::kCublasLt: return "cublaslt";
  }
  return "unknown";
}

void TacticSources::set(TacticSource s, bool on) {
  const uint32_t bit = 1u << static_cast<unsigned>(s);
  mask_ = on ? (mask_ | bit) : (mask_ & ~bit);
}

std::string TacticSources::to_string() const {
  std::string r;
  for (int i = 0; i < kNumTacticSources; ++i) {
    const auto s = static_cast<TacticSource>(i);
    if (has(s)) r += (r.empty() ? "" : ",") + std::string(tactic_source_name(s));
  }
  return r;
}

StatusOr<TacticSources> TacticSources::parse(const std::string& spec) {
  auto known = [] {
    std::string k;
    for (int i = 0; i < kNumTacticSources; ++i)
      k += (i ? ", " : "") + std::string(tactic_source_name(static_cast<TacticSource>(i)));
    return k;
  };
  std::vector<std::string> items;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');) items.push_back(item);
  if (items.empty()) return invalid_argument("tactic sources: empty list (known: " + known() + ")");
  bool edits = false, names = false;
  TacticSources r = none();
  for (const std::string& raw : items) {
    std::string item = raw;
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (item.empty()) return invalid_argument("tactic sources '" + spec + "': empty item");
    const bool edit = item[0] == '+' || item[0] == '-';
    if (edit && !edits && names) return invalid_argument("tactic sources '" + spec + "': '" + item + "' mixes +/- edits with plain names");
    if (!edit && edits) return invalid_argument("tactic sources '" + spec + "': '" + item + "' mixes plain names with +/- edits");
    if (edit && !edits) r = all();
    edits = edits || edit;
    names = names || !edit;
    const std::string name = edit ? item.substr(1) : item;
    int found = -1;
    for (int i = 0; i < kNumTacticSources; ++i)
      if (name == tactic_source_name(static_cast<TacticSource>(i))) found = i;
    if (found < 0) return invalid_argument("tactic sources: unknown source '" + name + "' (known: " + known() + ")");
    r.set(static_cast<TacticSource>(found), !edit || item[0] == '+');
  }
  return r;
}

int TuningBudget::limit(TacticSource s) const {
  if (max_tactics > 0) return max_tactics;
  constexpr int kGraphDefault = 4;
  return s == TacticSource::kCudnnGraph ? kGraphDefault : std::numeric_limits<int>::max();
}

std::string TuningBudget::to_string() const {
  return "tactics<=" + (max_tactics > 0 ? std::to_string(max_tactics) : std::string("default")) +
         " iters=" + std::to_string(timing_iterations) + (cold_l2 ? " l2=cold" : " l2=warm");
}

}  // namespace kiln
