// Shared by the micro benchmarks in bench/micro/ (header-only; each is built on its own by nvcc or
// by CMake's kiln_bandwidth_bench): CK exits with the file, line and CUDA error of a failed call,
// and median_ms times a launch with CUDA events.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

namespace kiln::bench {

// Median over `reps` timed runs of milliseconds per launch: each run is `per_event` back-to-back
// launches between two CUDA events on stream s, after `warmup` untimed launches.
template <typename F>
float median_ms(cudaStream_t s, F&& launch, int reps = 50, int per_event = 1, int warmup = 5) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) launch();
  CK(cudaStreamSynchronize(s));
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a, s));
    for (int r = 0; r < per_event; ++r) launch();
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms / static_cast<float>(per_event));
  }
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

}  // namespace kiln::bench
