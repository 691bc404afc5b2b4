// Microbenchmark: the LLM runner's GPU sampling kernel (src/backends/cuda/kernels_sampling.cu,
// docs/decisions/0077) over R rows of V random logits (N(0, 2), float32), per option mix, beside
// what host sampling paid for the same rows before it: the device-to-host copy of the R logits
// rows into pinned memory. CUDA events, median of 50 launches after 5 warm-ups; one JSON line per
// (V, R, mode).
//   nvcc -O2 -std=c++17 -arch=sm_90 -Isrc -Iinclude bench/micro/sampling.cu src/backends/cuda/kernels_sampling.cu \
//     -o /tmp/sampling_bench && /tmp/sampling_bench
// Modes: greedy_penalty (argmax after a 1.1 penalty), temperature (T 0.8, no filter), top_k50_top_p09
// (T 0.8, top-k 50, top-p 0.9, penalty 1.1), top_p095 (T 1, top-p 0.95: the whole vocabulary in play),
// top_k1024_top_p09 (T 1, top-k 1024 — the largest that takes the candidate path —, top-p 0.9).
// kernel_us covers both launches (chunks, then rows) with the scratch allocated once beforehand.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/kernels_sampling.h"
#include "micro_timing.cuh"

using kiln::bench::median_ms;


using kiln::cuda::SamplingRow;


int main() {
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  for (int64_t V : {50257, 128256}) {
    for (int64_t R : {1, 8, 64}) {
      std::vector<float> logits(static_cast<size_t>(R * V));
      std::mt19937 rng(1);
      std::normal_distribution<float> g(0.f, 2.f);
      for (float& x : logits) x = g(rng);
      // A 128-token step per row (its prompt), so the penalty has ids to apply to.
      const int64_t T = 128;
      std::vector<int64_t> ids(static_cast<size_t>(T)), pos(static_cast<size_t>(T));
      std::vector<int32_t> seq(static_cast<size_t>(T));
      for (int64_t t = 0; t < T; ++t) {
        ids[t] = (t * 7919) % V;
        seq[t] = static_cast<int32_t>(t % R);
        pos[t] = t / R + 1;  // not 0: the bitmaps are not reset every launch
      }
      float *dl = nullptr, *host = nullptr;
      int64_t *di = nullptr, *dp = nullptr;
      int32_t* ds = nullptr;
      uint32_t* seen = nullptr;
      SamplingRow* dr = nullptr;
      kiln::cuda::SamplingResult* res = nullptr;
      void* scratch = nullptr;
      CK(cudaMalloc(&scratch, kiln::cuda::sampling_scratch_bytes(R, V)));
      CK(cudaMalloc(&dl, logits.size() * 4));
      CK(cudaMallocHost(&host, logits.size() * 4));
      CK(cudaMalloc(&di, T * 8));
      CK(cudaMalloc(&dp, T * 8));
      CK(cudaMalloc(&ds, T * 4));
      CK(cudaMalloc(&seen, R * kiln::cuda::sampling_seen_words(V) * 4));
      CK(cudaMemset(seen, 0, R * kiln::cuda::sampling_seen_words(V) * 4));
      CK(cudaMalloc(&dr, R * sizeof(SamplingRow)));
      CK(cudaMalloc(&res, R * sizeof(kiln::cuda::SamplingResult)));
      CK(cudaMemcpy(dl, logits.data(), logits.size() * 4, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(di, ids.data(), T * 8, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dp, pos.data(), T * 8, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(ds, seq.data(), T * 4, cudaMemcpyHostToDevice));
      const float copy_ms = median_ms(s, [&] { CK(cudaMemcpyAsync(host, dl, logits.size() * 4, cudaMemcpyDeviceToHost, s)); });
      struct Mode {
        const char* name;
        double t, p;
        float penalty;
        int32_t k;
      };
      for (const Mode& m : {Mode{"greedy_penalty", 0, 1, 1.1f, 0}, Mode{"temperature", 0.8, 1, 1, 0},
                            Mode{"top_k50_top_p09", 0.8, 0.9, 1.1f, 50}, Mode{"top_p095", 1, 0.95, 1, 0},
                            Mode{"top_k1024_top_p09", 1, 0.9, 1, 1024}}) {
        std::vector<SamplingRow> rows(static_cast<size_t>(R));
        for (int64_t r = 0; r < R; ++r) {
          rows[r].temperature = m.t;
          rows[r].top_p = m.p;
          rows[r].repetition_penalty = m.penalty;
          rows[r].top_k = m.k;
          rows[r].seed = static_cast<uint64_t>(r);
          rows[r].position = 200;
          rows[r].active = 1;
        }
        CK(cudaMemcpy(dr, rows.data(), R * sizeof(SamplingRow), cudaMemcpyHostToDevice));
        kiln::cuda::SamplingDesc d;
        d.rows = R;
        d.vocab = V;
        d.tokens = T;
        const float ms = median_ms(s, [&] { CK(kiln::cuda::launch_sample_rows(dl, dr, di, ds, dp, seen, res, nullptr, scratch, d, s)); });
        std::printf("{\"vocab\": %lld, \"rows\": %lld, \"mode\": \"%s\", \"kernel_us\": %.1f, \"logits_d2h_us\": %.1f}\n",
                    static_cast<long long>(V), static_cast<long long>(R), m.name, ms * 1000, copy_ms * 1000);
      }
      for (void* p : {static_cast<void*>(dl), static_cast<void*>(di), static_cast<void*>(dp), static_cast<void*>(ds),
                      static_cast<void*>(seen), static_cast<void*>(dr), static_cast<void*>(res), scratch})
        CK(cudaFree(p));
      CK(cudaFreeHost(host));
    }
  }
  return 0;
}
