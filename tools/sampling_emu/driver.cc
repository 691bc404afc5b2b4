// tools/sampling_emu/run.sh's driver: the current sampling kernels (launch_sample_rows) against a
// reference commit's (launch_sample_rows_old) under the host emulation of emu.h, bitwise, on 13
// rows of options x 3 steps. Arguments: V, variant (0 random logits, 1 on a 0.5 grid: ties and -0,
// 2 constant rows and NaN / inf), steps. Exit status 1 on any mismatch.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/kernels_sampling.h"

namespace kiln::cuda {
cudaError_t launch_sample_rows_old(const float*, const SamplingRow*, const int64_t*, const int32_t*, const int64_t*,
                                   uint32_t*, SamplingResult*, float*, const SamplingDesc&, cudaStream_t);
}
using namespace kiln::cuda;

static SamplingRow mk(double t, int k, double p, float pen, uint64_t seed, int active = 1) {
  SamplingRow r;
  r.temperature = t;
  r.top_k = k;
  r.top_p = p;
  r.repetition_penalty = pen;
  r.seed = seed;
  r.position = 7;
  r.active = active;
  return r;
}

int failures = 0;

void run_case(const char* name, int64_t V, int variant, int steps) {
  std::vector<SamplingRow> rows = {
      mk(0, 0, 1, 1.3f, 1),      mk(0.8, 0, 1, 1, 2),       mk(0.9, 50, 0.9, 1.1f, 3), mk(1, 0, 0.95, 1, 4),
      mk(1, 1024, 1, 1, 5),      mk(1, 1025, 0.9, 1, 6),    mk(1, 1, 1, 1, 7),         mk(1.3, 0, 0.5, 1.5f, 8),
      mk(1, 0, 1, 1, 9, 0),      mk(2, static_cast<int>(V - 1), 0.99, 1, 10), mk(1, 40, 0.8, 1, 11),
      mk(1, 0, 0.3, 1, 12),      mk(0.7, 3, 0.6, 1.2f, 13)};
  const int64_t R = static_cast<int64_t>(rows.size());
  std::mt19937 rng(static_cast<uint32_t>(V * 10 + variant));
  std::normal_distribution<float> g(0.f, 2.f);
  std::vector<float> logits(static_cast<size_t>(R * V));
  for (float& x : logits) {
    x = g(rng);
    if (variant == 1) x = std::round(x / 0.5f) * 0.5f;  // ties, and -0
  }
  if (variant == 2) {
    for (int64_t i = 0; i < V; ++i) logits[4 * V + i] = 0.25f;  // constant row, top_k 1024
    for (int64_t i = 0; i < V; ++i) logits[3 * V + i] = 0.25f;  // constant row, top-p
    logits[2 * V + V / 2] = std::nanf("");
    logits[11 * V + V - 1] = INFINITY;
  }
  std::vector<uint32_t> seen_old(static_cast<size_t>(R * sampling_seen_words(V)), 0), seen_new = seen_old;
  std::vector<char> scratch(sampling_scratch_bytes(R, V), static_cast<char>(0xab));
  for (int s = 0; s < steps; ++s) {
    std::vector<int64_t> ids, pos;
    std::vector<int32_t> seq;
    std::uniform_int_distribution<int64_t> uid(0, V - 1);
    for (int64_t r = 0; r < R; ++r) {
      const int n = s == 0 ? 6 : 1;
      for (int j = 0; j < n; ++j) {
        // ids at chunk edges and the row's largest logits, sometimes
        int64_t id = j % 3 == 0 ? std::min<int64_t>(V - 1, 4096 * (j + 1) - 1 + (r % 2)) : uid(rng);
        if (j == 1) {
          int64_t best = 0;
          for (int64_t i = 0; i < V; ++i)
            if (logits[r * V + i] > logits[r * V + best]) best = i;
          id = best;
        }
        ids.push_back(id);
        seq.push_back(static_cast<int32_t>(r));
        pos.push_back(s == 2 && r % 3 == 0 ? j : 10 * s + j);  // step 2: some rows start over
      }
    }
    ids.push_back(5);
    seq.push_back(-1);
    pos.push_back(0);
    for (int64_t r = 0; r < R; ++r) rows[r].position = 100 + s;
    SamplingDesc d;
    d.rows = R;
    d.vocab = V;
    d.tokens = static_cast<int64_t>(ids.size());
    std::vector<SamplingResult> res_old(R, {-7, -7}), res_new(R, {-9, -9});
    std::vector<float> dist_old(static_cast<size_t>(R * V), -1.f), dist_new(static_cast<size_t>(R * V), -2.f);
    launch_sample_rows_old(logits.data(), rows.data(), ids.data(), seq.data(), pos.data(), seen_old.data(), res_old.data(),
                           dist_old.data(), d, nullptr);
    launch_sample_rows(logits.data(), rows.data(), ids.data(), seq.data(), pos.data(), seen_new.data(), res_new.data(),
                       dist_new.data(), scratch.data(), d, nullptr);
    for (int64_t r = 0; r < R; ++r) {
      const bool same_res = res_old[r].token == res_new[r].token && res_old[r].nonfinite == res_new[r].nonfinite;
      bool same_dist = true;
      if (rows[r].active && res_old[r].nonfinite < 0)
        same_dist = std::memcmp(dist_old.data() + r * V, dist_new.data() + r * V, V * 4) == 0;
      int64_t kept = 0, kept_new = 0;
      double sum_new = 0;
      for (int64_t i = 0; i < V; ++i) { kept += dist_old[r * V + i] > 0; kept_new += dist_new[r * V + i] > 0; sum_new += dist_new[r * V + i]; }
      if (!same_res || !same_dist) {
        ++failures;
        int64_t first = -1;
        for (int64_t i = 0; i < V && first < 0; ++i)
          if (std::memcmp(&dist_old[r * V + i], &dist_new[r * V + i], 4)) first = i;
        std::printf("MISMATCH %s V=%lld variant %d step %d row %lld: old {%d,%d} new {%d,%d} dist %s (first diff %lld: %g vs %g) kept %lld new %lld sum %.6f\n",
                    name, (long long)V, variant, s, (long long)r, res_old[r].token, res_old[r].nonfinite, res_new[r].token,
                    res_new[r].nonfinite, same_dist ? "same" : "DIFFERENT", (long long)first,
                    first >= 0 ? dist_old[r * V + first] : 0.f, first >= 0 ? dist_new[r * V + first] : 0.f, (long long)kept, (long long)kept_new, sum_new);
      } else if (s == 0) {
        std::printf("ok %s V=%lld variant %d row %lld: token %d nonfinite %d kept %lld\n", name, (long long)V, variant,
                    (long long)r, res_new[r].token, res_new[r].nonfinite, (long long)kept);
      }
    }
    if (seen_old != seen_new) {
      ++failures;
      std::printf("MISMATCH %s step %d: seen bitmaps differ\n", name, s);
    }
    std::fflush(stdout);
  }
}

int main(int argc, char** argv) {
  const int64_t V = argc > 1 ? std::atoll(argv[1]) : 1000;
  const int variant = argc > 2 ? std::atoi(argv[2]) : 0;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 3;
  run_case("case", V, variant, steps);
  std::printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
  return failures != 0;
}
