// The tactic contract's device-free parts (backends/kernel.h, builder/tactic_selector.h): tactic
// ids and sources, and the selector's decisions against a fake layer with scripted times.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "backends/kernel.h"
#include "builder/tactic_selector.h"
#include "builder/timing_cache.h"

namespace kiln {
namespace {

// A layer whose candidates have fixed times; ids in `broken` fail to select.
class FakeLayer : public TunableLayer {
 public:
  FakeLayer(std::map<TacticId, double> times, std::set<TacticId> broken = {}) : times_(std::move(times)), broken_(std::move(broken)) {}
  const std::string& name() const override { return name_; }
  std::string signature() const override { return "fake m=4"; }
  StatusOr<std::vector<TacticId>> candidates() override {
    std::vector<TacticId> ids;
    for (const auto& [id, ms] : times_) ids.push_back(id);
    return ids;
  }
  Status select(TacticId id) override {
    ++selects;
    if (broken_.count(id)) return unsupported("no kernel");
    if (!times_.count(id)) return invalid_plan("unknown id");
    selected = id;
    return Status::Ok();
  }
  StatusOr<double> time_ms(int iterations) override {
    timed.push_back(selected);
    last_iterations = iterations;
    return times_.at(selected);
  }
  TacticId selected = kNoTactic;
  std::vector<TacticId> timed;
  int selects = 0, last_iterations = 0;

 private:
  std::string name_ = "layer7";
  std::map<TacticId, double> times_;
  std::set<TacticId> broken_;
};

constexpr TacticId kCudnn3 = make_tactic_id(TacticSource::kCudnn, 3);
constexpr TacticId kCudnn5 = make_tactic_id(TacticSource::kCudnn, 5);
constexpr TacticId kLt0 = make_tactic_id(TacticSource::kCublasLt, 0);
constexpr TacticId kLt1 = make_tactic_id(TacticSource::kCublasLt, 1);
constexpr TacticId kGraph0 = make_tactic_id(TacticSource::kCudnnGraph, 0);

TEST(TacticId, PacksSourceAndVariant) {
  EXPECT_EQ(kCudnn3, 0x01000003u);
  EXPECT_EQ(tactic_id_source(kLt1), TacticSource::kCublasLt);
  EXPECT_EQ(tactic_id_variant(make_tactic_id(TacticSource::kCudnnGraph, 0x123456)), 0x123456u);
  EXPECT_NE(tactic_id_source(kNoTactic), TacticSource::kKiln);
}

TEST(TacticSources, ParsesEditsAndNames) {
  auto all_but_graph = TacticSources::parse("-cudnn_graph");
  ASSERT_TRUE(all_but_graph.ok()) << all_but_graph.status().to_string();
  EXPECT_EQ(all_but_graph->to_string(), "kiln,cudnn,cublaslt");
  auto only = TacticSources::parse("kiln, cublaslt");
  ASSERT_TRUE(only.ok());
  EXPECT_TRUE(only->has(TacticSource::kCublasLt));
  EXPECT_FALSE(only->has(TacticSource::kCudnn));
  EXPECT_EQ(TacticSources::all().to_string(), "kiln,cudnn,cudnn_graph,cublaslt");
  auto unknown = TacticSources::parse("-cublas");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown source 'cublas'"), std::string::npos);
  EXPECT_FALSE(TacticSources::parse("kiln,-cudnn").ok());
  EXPECT_FALSE(TacticSources::parse("-cudnn,kiln").ok());
  EXPECT_FALSE(TacticSources::parse("kiln,,cudnn").ok());
  EXPECT_FALSE(TacticSources::parse("").ok());
}

TEST(TacticSelector, TimesEveryCandidateAndKeepsTheFastest) {
  TimingCache cache;
  TacticSelector sel(&cache, TacticSelectorConfig{});
  FakeLayer l({{kCudnn3, 0.5}, {kCudnn5, 0.25}, {kLt0, 0.375}});
  auto c = sel.choose(l);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->id, kCudnn5);
  EXPECT_DOUBLE_EQ(c->ms, 0.25);
  EXPECT_FALSE(c->cached);
  EXPECT_EQ(l.selected, kCudnn5);  // the winner is selected last
  EXPECT_EQ(l.timed.size(), 3u);
  EXPECT_EQ(l.last_iterations, 10);
  EXPECT_EQ(cache.size(), 3u);
}

TEST(TacticSelector, CacheHitSelectsWithoutTiming) {
  TimingCache cache;
  TacticSelector sel(&cache, TacticSelectorConfig{});
  FakeLayer first({{kCudnn3, 0.5}, {kLt0, 0.125}});
  ASSERT_TRUE(sel.choose(first).ok());
  FakeLayer second({{kCudnn3, 9.0}, {kLt0, 9.0}});  // same signature: its times are never measured
  auto c = sel.choose(second);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->id, kLt0);
  EXPECT_TRUE(c->cached);
  EXPECT_DOUBLE_EQ(c->ms, 0.125);
  EXPECT_TRUE(second.timed.empty());
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(sel.layers_timed(), 1);
}

TEST(TacticSelector, CachedWinnerThatNoLongerSelectsFallsBackToTheNext) {
  TimingCache cache;
  TacticSelector sel(&cache, TacticSelectorConfig{});
  FakeLayer first({{kCudnn3, 0.5}, {kLt0, 0.125}});
  ASSERT_TRUE(sel.choose(first).ok());
  FakeLayer second({{kCudnn3, 0.5}, {kLt0, 0.125}}, {kLt0});
  auto c = sel.choose(second);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->id, kCudnn3);
  EXPECT_TRUE(c->cached);
}

TEST(TacticSelector, SkipsCandidatesThatDoNotRunAndNamesThemWhenNoneDoes) {
  TimingCache cache;
  TacticSelector sel(&cache, TacticSelectorConfig{});
  FakeLayer some({{kCudnn3, 0.5}, {kLt0, 0.125}}, {kLt0});
  auto c = sel.choose(some);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->id, kCudnn3);
  FakeLayer none({{kCudnn3, 0.5}, {kLt0, 0.125}}, {kCudnn3, kLt0});
  TimingCache other;
  TacticSelector sel2(&other, TacticSelectorConfig{});
  auto e = sel2.choose(none);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("layer 'layer7'"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("cudnn#3: no kernel"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("cublaslt#0: no kernel"), std::string::npos) << e.status().message();
}

TEST(TacticSelector, DisabledSourcesAreNeverSelected) {
  TimingCache cache;
  TacticSelectorConfig cfg;
  cfg.sources.set(TacticSource::kCublasLt, false);
  TacticSelector sel(&cache, cfg);
  FakeLayer l({{kCudnn3, 0.5}, {kLt0, 0.125}});
  auto c = sel.choose(l);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->id, kCudnn3);
  for (TacticId id : l.timed) EXPECT_NE(tactic_id_source(id), TacticSource::kCublasLt);
  FakeLayer only_lt({{kLt0, 0.125}});
  auto e = sel.choose(only_lt);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no tactic from the enabled sources (kiln,cudnn,cudnn_graph)"), std::string::npos)
      << e.status().message();
  EXPECT_NE(e.status().message().find("cublaslt"), std::string::npos);
}

TEST(TacticSelector, BudgetLimitsTimedCandidatesPerSource) {
  TimingCache cache;
  TacticSelectorConfig cfg;
  cfg.budget.max_tactics = 1;
  cfg.budget.timing_iterations = 3;
  TacticSelector sel(&cache, cfg);
  FakeLayer l({{kCudnn3, 0.5}, {kCudnn5, 0.25}, {kLt0, 0.375}, {kLt1, 0.0625}});
  auto c = sel.choose(l);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(l.timed.size(), 2u);  // one per source: the first that runs
  EXPECT_EQ(c->id, kLt0);
  EXPECT_EQ(l.last_iterations, 3);
  // The default budget times 4 cuDNN graph configurations and every other candidate.
  TuningBudget defaults;
  EXPECT_EQ(defaults.limit(TacticSource::kCudnnGraph), 4);
  EXPECT_GT(defaults.limit(TacticSource::kCudnn), 1000);
}

TEST(TacticSelector, CacheKeyNamesSourcesAndBudget) {
  TimingCache cache;
  TacticSelectorConfig small;
  small.budget.max_tactics = 2;
  TacticSelector a(&cache, TacticSelectorConfig{}), b(&cache, small);
  FakeLayer l({{kGraph0, 1.0}});
  EXPECT_NE(a.cache_signature(l), b.cache_signature(l));
  EXPECT_NE(a.cache_signature(l).find("src=kiln,cudnn,cudnn_graph,cublaslt"), std::string::npos);
  ASSERT_TRUE(a.choose(l).ok());
  FakeLayer again({{kGraph0, 1.0}});
  ASSERT_TRUE(b.choose(again).ok());
  EXPECT_EQ(again.timed.size(), 1u) << "another budget must not reuse the first budget's measurements";
}

TEST(TacticSelector, WithoutTuningTakesTheFirstThatRuns) {
  TimingCache cache;
  TacticSelectorConfig cfg;
  cfg.tune = false;
  TacticSelector sel(&cache, cfg);
  FakeLayer l({{kCudnn3, 0.5}, {kCudnn5, 0.25}}, {kCudnn3});
  auto c = sel.choose(l);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->id, kCudnn5);
  EXPECT_TRUE(l.timed.empty());
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace kiln
