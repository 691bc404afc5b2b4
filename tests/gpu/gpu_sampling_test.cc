// The GPU sampler (src/llm/device_sampler.h, backends/cuda/kernels_sampling.cu; decision 0077)
// against the host Sampler, its reference (skipped without a GPU): for the same logits the kept
// tokens and their renormalized probabilities equal Sampler::distribution (random logits, and
// logits on a coarse grid full of ties at the top-k / top-p boundaries); greedy and top_k = 1 are
// the argmax; every token is sample_index(distribution, device_uniform(seed, position)); the same
// seed and position give the same token run to run and in any row among any companions; draw
// frequencies pass a chi-square test against the distribution; the seen-id bitmap follows the
// step's tokens (reset at position 0); a non-finite logit is reported by id; at a 128k vocabulary
// (32 chunks of the kernels' row split) every path — top-k candidates, their overflow, top-p radix
// levels, chunk-sum draws, the full-row fallback, greedy across chunks — equals the host's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "gpu/gpu_test_util.h"
#include "llm/device_sampler.h"
#include "llm/kv_pool_device.h"
#include "llm/sampling.h"

namespace kiln::llm {
namespace {

// The step's token columns, as the runner's staging holds them.
struct StepTokens {
  std::vector<int64_t> ids, pos;
  std::vector<int32_t> seq;
  void add(int32_t row, int64_t id, int64_t position) {
    ids.push_back(id);
    seq.push_back(row);
    pos.push_back(position);
  }
};

// A DeviceSampler with device logits / distributions of R x V and a stream.
class GpuSampling {
 public:
  GpuSampling(int64_t rows, int64_t vocab, int64_t max_tokens = 64) : R(rows), V(vocab) {
    auto s = DeviceSampler::create(rows, max_tokens, vocab);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (s.ok()) sampler = std::move(*s);
    auto st = llm_stream_create();
    EXPECT_TRUE(st.ok());
    if (st.ok()) stream = *st;
    auto l = kv_device_alloc_zeroed(static_cast<size_t>(R * V) * 4, "test logits");
    auto d = kv_device_alloc_zeroed(static_cast<size_t>(R * V) * 4, "test distributions");
    EXPECT_TRUE(l.ok() && d.ok());
    if (l.ok()) logits = *l;
    if (d.ok()) dist = *d;
  }
  ~GpuSampling() {
    if (stream) (void)llm_stream_sync(stream, "test teardown");
    sampler.reset();
    kv_device_free(logits);
    kv_device_free(dist);
    llm_stream_destroy(stream);
  }
  bool ok() const { return sampler && stream && logits && dist; }

  // One step: uploads `host_logits` [R * V], sets the choosing rows (`options[r]` with
  // `positions[r]`; rows without options choose nothing), runs the sampler over `step`, waits and
  // returns each row's token; the distributions land in host_dist [R * V].
  std::vector<int32_t> run(const std::vector<float>& host_logits, const std::vector<const SamplingOptions*>& options,
                           const std::vector<int64_t>& positions, const StepTokens& step = {}) {
    EXPECT_TRUE(llm_copy_async(logits, host_logits.data(), host_logits.size() * 4, stream, "logits").ok());
    sampler->clear_rows();
    for (int64_t r = 0; r < R; ++r)
      if (options[r]) sampler->set_row(r, *options[r], positions[r]);
    Status e = sampler->enqueue(logits, step.ids.data(), step.seq.data(), step.pos.data(),
                                static_cast<int64_t>(step.ids.size()), stream, static_cast<float*>(dist));
    EXPECT_TRUE(e.ok()) << e.to_string();
    host_dist.assign(static_cast<size_t>(R * V), 0.f);
    EXPECT_TRUE(llm_copy_async(host_dist.data(), dist, host_dist.size() * 4, stream, "distributions").ok());
    Status s = llm_stream_sync(stream, "sampling");
    EXPECT_TRUE(s.ok()) << s.to_string();
    std::vector<int32_t> tokens(static_cast<size_t>(R));
    for (int64_t r = 0; r < R; ++r) tokens[r] = sampler->token(r);
    return tokens;
  }

  const int64_t R, V;
  std::unique_ptr<DeviceSampler> sampler;
  CudaStream stream = nullptr;
  void* logits = nullptr;
  void* dist = nullptr;
  std::vector<float> host_dist;
};

std::vector<float> random_logits(size_t n, float scale, uint32_t seed, float grid = 0) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = grid > 0 ? std::round(g(rng) / grid) * grid : g(rng);
  return x;
}

SamplingOptions opts(double t, int64_t k, double p, double penalty = 1.0, uint64_t seed = 1) {
  SamplingOptions o;
  o.temperature = t;
  o.top_k = k;
  o.top_p = p;
  o.repetition_penalty = penalty;
  o.seed = seed;
  return o;
}

// The host reference of row `r`: penalty over `seen`, then Sampler::distribution.
std::vector<double> host_distribution(const std::vector<float>& logits, int64_t r, int64_t V, const SamplingOptions& o,
                                      const std::vector<int32_t>& seen) {
  std::vector<float> row(logits.begin() + r * V, logits.begin() + (r + 1) * V);
  apply_repetition_penalty(row.data(), V, seen, o.repetition_penalty);
  return Sampler(o).distribution(row.data(), V);
}

// Same kept set, probabilities within float tolerance.
void expect_same_distribution(const std::vector<double>& want, const float* got, int64_t V, const std::string& what) {
  int64_t kept = 0, set_diffs = 0, far = 0;
  for (int64_t i = 0; i < V; ++i) {
    kept += want[i] > 0;
    if ((want[i] > 0) != (got[i] > 0)) {
      if (++set_diffs <= 3) ADD_FAILURE() << what << ": token " << i << " kept on the " << (want[i] > 0 ? "host" : "GPU") << " only";
      continue;
    }
    if (std::abs(got[i] - want[i]) > 1e-6 + 1e-4 * want[i]) {
      if (++far <= 3) ADD_FAILURE() << what << ": token " << i << " p " << got[i] << " on the GPU, " << want[i] << " on the host";
    }
  }
  EXPECT_EQ(set_diffs, 0) << what << " (" << kept << " kept on the host)";
  EXPECT_EQ(far, 0) << what;
}

// Per-row options of the comparison tests; rows 4 and 6 have a repetition penalty.
std::vector<SamplingOptions> option_table(int64_t V) {
  return {opts(1.0, 0, 1.0),       opts(0.7, 50, 1.0),       opts(1.3, 0, 0.9),         opts(1.0, 40, 0.8),
          opts(0.8, 0, 0.5, 1.3),  opts(1.0, 1, 1.0),        opts(0.0, 0, 1.0, 1.5),    opts(2.0, V - 1, 0.99)};
}

TEST(GpuSampling, FilteredDistributionEqualsTheHostSampler) {
  REQUIRE_GPU();
  for (int64_t V : {1000, 50257}) {
    for (float grid : {0.f, 0.5f}) {  // 0.5: logits on a grid, so top-k / top-p boundaries fall on ties
      SCOPED_TRACE("vocab " + std::to_string(V) + (grid > 0 ? ", tied logits" : ""));
      const std::vector<SamplingOptions> table = option_table(V);
      const int64_t R = static_cast<int64_t>(table.size());
      GpuSampling g(R, V);
      ASSERT_TRUE(g.ok());
      const std::vector<float> logits = random_logits(static_cast<size_t>(R * V), 2.f, 11 + static_cast<uint32_t>(V), grid);
      // Rows 4 and 6 have seen a few ids (the prompt passing through this step).
      StepTokens step;
      std::vector<std::vector<int32_t>> seen(static_cast<size_t>(R));
      for (int32_t r : {4, 6}) {
        // the row's largest logits, so the penalty changes what is kept
        std::vector<int32_t> order(static_cast<size_t>(V));
        for (int32_t i = 0; i < V; ++i) order[i] = i;
        std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                          [&](int32_t a, int32_t b) { return logits[r * V + a] > logits[r * V + b]; });
        for (int j = 0; j < 5; ++j) {
          step.add(r, order[j], j);
          seen[r].push_back(order[j]);
        }
      }
      step.add(-1, 3, 0);  // a padding token sets nothing
      std::vector<const SamplingOptions*> o;
      std::vector<int64_t> pos;
      for (int64_t r = 0; r < R; ++r) {
        o.push_back(&table[r]);
        pos.push_back(5);
      }
      const std::vector<int32_t> tokens = g.run(logits, o, pos, step);
      for (int64_t r = 0; r < R; ++r) {
        const std::vector<double> want = host_distribution(logits, r, V, table[r], seen[r]);
        expect_same_distribution(want, g.host_dist.data() + r * V, V, "row " + std::to_string(r));
        EXPECT_GT(want[tokens[r]], 0) << "row " << r << " drew a token outside the kept set";
      }
      // Greedy (row 6, penalized) is the argmax, the lowest id among equal maxima; top_k = 1 (row 5)
      // the argmax too, or with tied maxima one of them (top-k keeps every logit equal to the k-th).
      for (int64_t r : {5, 6}) {
        std::vector<float> row(logits.begin() + r * V, logits.begin() + (r + 1) * V);
        apply_repetition_penalty(row.data(), V, seen[r], table[r].repetition_penalty);
        const int64_t argmax = std::max_element(row.begin(), row.end()) - row.begin();
        if (r == 6 || grid == 0)
          EXPECT_EQ(tokens[r], argmax) << "row " << r;
        else
          EXPECT_EQ(row[tokens[r]], row[argmax]) << "row " << r;
      }
    }
  }
}

// Every token is the host's inverse-CDF draw with the Philox uniform of (seed, position), so the
// host can predict (and the runner tests teacher-force) the GPU's choices.
TEST(GpuSampling, TokensAreTheHostDrawWithThePhiloxUniform) {
  REQUIRE_GPU();
  const int64_t V = 4096;
  const std::vector<SamplingOptions> table = option_table(V);
  const int64_t R = static_cast<int64_t>(table.size());
  GpuSampling g(R, V);
  ASSERT_TRUE(g.ok());
  int draws = 0, mismatches = 0;
  for (float grid : {0.f, 0.5f}) {
    const std::vector<float> logits = random_logits(static_cast<size_t>(R * V), 2.5f, 99, grid);
    std::vector<std::vector<double>> want;
    for (int64_t r = 0; r < R; ++r) want.push_back(host_distribution(logits, r, V, table[r], {}));
    std::vector<const SamplingOptions*> o;
    for (const SamplingOptions& x : table) o.push_back(&x);
    for (int64_t step = 0; step < 40; ++step) {
      std::vector<int64_t> pos(static_cast<size_t>(R), 100 + step);
      const std::vector<int32_t> tokens = g.run(logits, o, pos);
      for (int64_t r = 0; r < R; ++r) {
        const int32_t host = sample_index(want[r], device_uniform(table[r].seed, pos[r]));
        ++draws;
        if (tokens[r] != host && ++mismatches <= 3)
          ADD_FAILURE() << "row " << r << " position " << pos[r] << ": GPU " << tokens[r] << ", host " << host;
      }
    }
  }
  // The GPU's masses are float exponentials summed in fixed point, the host's doubles: a draw may
  // differ only where u falls within ~1e-6 of a CDF boundary.
  std::printf("%d of %d GPU draws differ from the host's draw with the same uniform\n", mismatches, draws);
  EXPECT_LE(mismatches, 1);
}

// The same request (options, seed, position, logits) gets the same token on every run, in any
// row, alone or among other rows sampling other logits.
TEST(GpuSampling, SameSeedSameTokenRunToRunAndWhateverTheBatch) {
  REQUIRE_GPU();
  const int64_t V = 32000, R = 8;
  GpuSampling g(R, V);
  ASSERT_TRUE(g.ok());
  const SamplingOptions mine = opts(0.9, 40, 0.95, 1.0, 1234);
  const SamplingOptions other = opts(1.2, 0, 0.9, 1.0, 77);
  const std::vector<float> row = random_logits(static_cast<size_t>(V), 2.f, 5);
  std::vector<int32_t> alone, crowd, again;
  for (int64_t p = 0; p < 30; ++p) {
    // alone in row 0
    std::vector<float> l(static_cast<size_t>(R * V), 0.f);
    std::copy(row.begin(), row.end(), l.begin());
    std::vector<const SamplingOptions*> o(static_cast<size_t>(R), nullptr);
    o[0] = &mine;
    alone.push_back(g.run(l, o, std::vector<int64_t>(R, 40 + p))[0]);
    // in row 5 among seven others with their own logits and seeds
    l = random_logits(static_cast<size_t>(R * V), 2.f, 500 + static_cast<uint32_t>(p));
    std::copy(row.begin(), row.end(), l.begin() + 5 * V);
    std::fill(o.begin(), o.end(), &other);
    o[5] = &mine;
    crowd.push_back(g.run(l, o, std::vector<int64_t>(R, 40 + p))[5]);
    again.push_back(g.run(l, o, std::vector<int64_t>(R, 40 + p))[5]);
  }
  EXPECT_EQ(alone, crowd);
  EXPECT_EQ(crowd, again);
  EXPECT_GT(std::set<int32_t>(alone.begin(), alone.end()).size(), 3u) << "30 positions drew too few distinct tokens";
}

// A chi-square-style frequency test: 6,400 draws (64 rows x 100 steps, each its own position)
// against Sampler::distribution; bins with an expected count below 5 merged. Philox makes the
// outcome fixed, so this either always passes or always fails.
TEST(GpuSampling, DrawFrequenciesFollowTheDistribution) {
  REQUIRE_GPU();
  const int64_t V = 1000, R = 64, kSteps = 100;
  GpuSampling g(R, V);
  ASSERT_TRUE(g.ok());
  const std::vector<float> row = random_logits(static_cast<size_t>(V), 1.5f, 8);
  std::vector<float> logits;
  for (int64_t r = 0; r < R; ++r) logits.insert(logits.end(), row.begin(), row.end());
  for (const SamplingOptions& o : {opts(1.0, 20, 1.0, 1.0, 3), opts(0.7, 0, 0.8, 1.0, 4), opts(1.0, 0, 1.0, 1.0, 5)}) {
    SCOPED_TRACE("top_k " + std::to_string(o.top_k) + " top_p " + std::to_string(o.top_p));
    const std::vector<double> p = Sampler(o).distribution(row.data(), V);
    std::vector<int64_t> count(static_cast<size_t>(V), 0);
    const std::vector<const SamplingOptions*> rows(static_cast<size_t>(R), &o);
    for (int64_t s = 0; s < kSteps; ++s) {
      std::vector<int64_t> pos(static_cast<size_t>(R));
      for (int64_t r = 0; r < R; ++r) pos[r] = s * R + r;
      for (int32_t t : g.run(logits, rows, pos)) {
        ASSERT_GE(t, 0);
        ASSERT_GT(p[t], 0) << "drew token " << t << ", outside the kept set";
        ++count[t];
      }
    }
    const double n = static_cast<double>(R * kSteps);
    double chi2 = 0, rest_e = 0, rest_o = 0;
    int bins = 0;
    for (int64_t i = 0; i < V; ++i) {
      if (p[i] == 0) continue;
      const double e = n * p[i];
      if (e < 5) {
        rest_e += e;
        rest_o += static_cast<double>(count[i]);
        continue;
      }
      chi2 += (count[i] - e) * (count[i] - e) / e;
      ++bins;
    }
    if (rest_e > 0) {
      chi2 += (rest_o - rest_e) * (rest_o - rest_e) / rest_e;
      ++bins;
    }
    // The chi-square quantile at p = 0.001 (Wilson-Hilferty, z = 3.09) for bins - 1 degrees of freedom.
    const double df = bins - 1, q = df * std::pow(1 - 2 / (9 * df) + 3.09 * std::sqrt(2 / (9 * df)), 3);
    std::printf("chi-square %.1f over %d bins (critical %.1f)\n", chi2, bins, q);
    EXPECT_GT(bins, 10);
    EXPECT_LT(chi2, q);
  }
}

// The seen-id bitmap: the step's tokens of a row set their ids, a token at position 0 starts the
// row over, padding and other rows' tokens touch nothing.
TEST(GpuSampling, RepetitionPenaltyFollowsTheStepsTokens) {
  REQUIRE_GPU();
  const int64_t V = 300, R = 3;
  GpuSampling g(R, V);
  ASSERT_TRUE(g.ok());
  std::vector<float> logits = random_logits(static_cast<size_t>(R * V), 1.f, 21);
  for (int id : {5, 9, 11, 7, 40}) logits[2 * V + id] = id % 2 ? 4.f : -3.f;  // large, and a negative one
  const SamplingOptions pen = opts(1.0, 0, 1.0, 2.0);
  const std::vector<const SamplingOptions*> none(R, nullptr);
  const std::vector<const SamplingOptions*> row2 = {nullptr, nullptr, &pen};
  auto check = [&](const std::vector<int32_t>& seen, const std::string& what) {
    expect_same_distribution(host_distribution(logits, 2, V, pen, seen), g.host_dist.data() + 2 * V, V, what);
    // and the penalty did something: the unpenalized distribution is not it
    const std::vector<double> plain = host_distribution(logits, 2, V, pen, {});
    EXPECT_GT(std::abs(plain[5] - g.host_dist[2 * V + 5]) + std::abs(plain[9] - g.host_dist[2 * V + 9]), 1e-3) << what;
  };
  // Step 1: row 2's prompt 5, 9, 5 (positions 0-2), row 0's prompt 40, a padding token 11.
  StepTokens a;
  a.add(2, 5, 0);
  a.add(2, 9, 1);
  a.add(0, 40, 0);
  a.add(2, 5, 2);
  a.add(-1, 11, 0);
  g.run(logits, row2, {0, 0, 3}, a);
  check({5, 9}, "after the prompt");
  // Step 2: row 2 decodes 11 at position 3 (its bitmap kept from step 1).
  StepTokens b;
  b.add(2, 11, 3);
  g.run(logits, row2, {0, 0, 4}, b);
  check({5, 9, 11}, "after a decode token");
  // Step 3: nothing of row 2 (it does not choose): its bitmap stays.
  StepTokens c;
  c.add(1, 9, 0);
  g.run(logits, none, {0, 0, 0}, c);
  StepTokens d;
  d.add(2, 40, 4);
  g.run(logits, row2, {0, 0, 5}, d);
  check({5, 9, 11, 40}, "two steps later");
  // Step 4: a new sequence in row 2 (position 0): only its own ids.
  StepTokens e;
  e.add(2, 7, 0);
  e.add(2, 9, 1);
  g.run(logits, row2, {0, 0, 2}, e);
  check({7, 9}, "a new sequence in the row");
}

// A 128,256-entry vocabulary spans 32 chunks of 4,096 ids (the last one 1,280): rows with top_k
// <= 1024 filter and draw over the chunks' candidates, top-p rows without top-k find their threshold
// by chunk-parallel radix levels, temperature-only rows draw from chunk sums, the others go over the
// whole row. Every path against the host Sampler: top-k 50 with a penalty on ids at chunk edges,
// top_k 1024 (the largest candidate row) and 1025 (the full pass), logits on a grid so the top-k
// boundary is a tie spread over many chunks, ties past a chunk's 1,024 candidate slots (top_k 1024
// on the grid; a constant row, where every id ties), a row whose top-k all lie in one chunk, greedy
// with the maximum tied across two chunks, top-p alone (random logits; and on the grid, so the top-p
// boundary cuts a tie spread over many chunks), temperature alone. Then the seen bitmap starts over
// at position 0 in every chunk.
TEST(GpuSampling, ChunkedRowsAndTopKCandidatesEqualTheHostSampler) {
  REQUIRE_GPU();
  const int64_t V = 128256, R = 11;
  GpuSampling g(R, V);
  ASSERT_TRUE(g.ok());
  const std::vector<SamplingOptions> table = {
      opts(0.8, 50, 0.9, 1.3, 11), opts(1.0, 1024, 0.95, 1.0, 12), opts(1.0, 1025, 0.95, 1.0, 13),
      opts(1.0, 40, 0.8, 1.0, 14), opts(1.0, 1024, 0.9, 1.0, 15),  opts(1.0, 1000, 1.0, 1.0, 16),
      opts(0.7, 30, 1.0, 1.0, 17), opts(0.0, 0, 1.0, 1.5, 18),  opts(1.0, 0, 0.95, 1.2, 19),
      opts(0.9, 0, 0.6, 1.0, 20),  opts(0.8, 0, 1.0, 1.0, 21)};
  std::vector<float> logits = random_logits(static_cast<size_t>(R * V), 2.f, 31);
  const std::vector<float> tied = random_logits(static_cast<size_t>(V), 2.f, 32, 0.5f);
  std::copy(tied.begin(), tied.end(), logits.begin() + 3 * V);  // row 3: top-k boundary on a tie
  std::copy(tied.begin(), tied.end(), logits.begin() + 4 * V);  // row 4: ties past the slots
  std::copy(tied.begin(), tied.end(), logits.begin() + 9 * V);  // row 9: the top-p boundary on a tie
  std::fill(logits.begin() + 5 * V, logits.begin() + 6 * V, 0.25f);  // row 5: every id tied
  for (int64_t i = 0; i < 100; ++i) logits[6 * V + 9 * 4096 + 7 * i] += 12.f;  // row 6: top-k in chunk 9
  logits[7 * V + 90000] = 30.f;  // row 7: the maximum tied in chunks 21 and 1; the lower id wins
  logits[7 * V + 5000] = 30.f;
  logits[7 * V + 4096] = 40.f;  // penalized below the others (40 / 1.5 < 30)
  // Row 0 (and row 7) have seen ids at chunk edges, made the row's largest logits.
  StepTokens step;
  std::vector<std::vector<int32_t>> seen(static_cast<size_t>(R));
  const std::vector<int32_t> edge_ids = {4095, 4096, 8191, 128255, 70000};
  for (size_t j = 0; j < edge_ids.size(); ++j) {
    logits[0 * V + edge_ids[j]] = 9.f + static_cast<float>(j);
    step.add(0, edge_ids[j], static_cast<int64_t>(j));
    seen[0].push_back(edge_ids[j]);
  }
  step.add(7, 4096, 0);
  seen[7].push_back(4096);
  for (int32_t id : {0, 4097, 128000}) {  // row 8: a penalty in three chunks
    step.add(8, id, static_cast<int64_t>(seen[8].size()));
    seen[8].push_back(id);
  }
  step.add(-1, 5000, 0);  // padding: sets nothing
  std::vector<const SamplingOptions*> o;
  for (const SamplingOptions& x : table) o.push_back(&x);
  std::vector<std::vector<double>> want;
  for (int64_t r = 0; r < R; ++r) want.push_back(host_distribution(logits, r, V, table[r], seen[r]));
  int draws = 0, mismatches = 0;
  for (int64_t s = 0; s < 6; ++s) {
    const std::vector<int64_t> pos(static_cast<size_t>(R), 10 + s);
    // The step's tokens pass once (positions 0.. start the sequences); later steps add none.
    const std::vector<int32_t> tokens = g.run(logits, o, pos, s == 0 ? step : StepTokens{});
    for (int64_t r = 0; r < R; ++r) {
      SCOPED_TRACE("row " + std::to_string(r) + " step " + std::to_string(s));
      if (s == 0) expect_same_distribution(want[r], g.host_dist.data() + r * V, V, "row " + std::to_string(r));
      ASSERT_GE(tokens[r], 0);
      EXPECT_GT(want[r][tokens[r]], 0) << "a token outside the kept set";
      if (r == 7) {
        EXPECT_EQ(tokens[r], 5000) << "greedy: the lowest id among the tied maxima";
        continue;
      }
      ++draws;
      const int32_t host = sample_index(want[r], device_uniform(table[r].seed, pos[r]));
      if (tokens[r] != host && ++mismatches <= 3) ADD_FAILURE() << "GPU " << tokens[r] << ", host " << host;
    }
  }
  std::printf("%d of %d GPU draws differ from the host's draw with the same uniform\n", mismatches, draws);
  EXPECT_LE(mismatches, 1);
  // The kept sets are what the rows claim to exercise.
  auto kept = [&](int64_t r) { return std::count_if(want[r].begin(), want[r].end(), [](double x) { return x > 0; }); };
  EXPECT_EQ(kept(5), V) << "a constant row keeps every id (ties with the k-th)";
  const std::vector<double> top40 = Sampler(opts(1.0, 40, 1.0)).distribution(tied.data(), V);
  EXPECT_GT(std::count_if(top40.begin(), top40.end(), [](double x) { return x > 0; }), 40)
      << "the grid row's 40th logit should be a tie";
  // Row 9's top-p boundary cuts a tie: the kept ids of the boundary value are not all of them.
  {
    std::vector<float> r9(tied);
    double boundary = 1e30;
    for (int64_t i = 0; i < V; ++i)
      if (want[9][i] > 0) boundary = std::min<double>(boundary, r9[i]);
    int64_t at_boundary = 0, kept_at_boundary = 0;
    for (int64_t i = 0; i < V; ++i)
      if (r9[i] == boundary) {
        ++at_boundary;
        kept_at_boundary += want[9][i] > 0;
      }
    EXPECT_LT(kept_at_boundary, at_boundary) << "row 9's top-p 0.6 should keep part of a tie";
  }
  // Row 0 starts a new sequence in this step: ids 5 and 70000 only, whatever chunk cleared its words.
  StepTokens fresh;
  fresh.add(0, 70000, 0);
  fresh.add(0, 5, 1);
  g.run(logits, o, std::vector<int64_t>(static_cast<size_t>(R), 20), fresh);
  expect_same_distribution(host_distribution(logits, 0, V, table[0], {70000, 5}), g.host_dist.data(), V,
                           "row 0 after a new sequence");
}

TEST(GpuSampling, NonFiniteLogitsAreReportedById) {
  REQUIRE_GPU();
  const int64_t V = 2000, R = 2;
  GpuSampling g(R, V);
  ASSERT_TRUE(g.ok());
  std::vector<float> logits = random_logits(static_cast<size_t>(R * V), 1.f, 4);
  logits[V + 1500] = std::numeric_limits<float>::infinity();
  logits[V + 17] = std::nanf("");
  const SamplingOptions o = opts(0.8, 10, 0.9);
  const std::vector<int32_t> t = g.run(logits, {&o, &o}, {3, 3});
  EXPECT_GE(t[0], 0);
  EXPECT_EQ(g.sampler->nonfinite(0), -1);
  EXPECT_EQ(t[1], -1);
  EXPECT_EQ(g.sampler->nonfinite(1), 17);
}

TEST(GpuSampling, CreateRefusesBadSizes) {
  REQUIRE_CUDA_BUILD();
  auto big = DeviceSampler::create(4, 16, (int64_t{1} << 23) + 1);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big.status().message().find("vocabulary"), std::string::npos) << big.status().message();
}

}  // namespace
}  // namespace kiln::llm
