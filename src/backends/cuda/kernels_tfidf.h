// ONNX TfIdfVectorizer over integer tokens on the GPU (docs/decisions/0076): n-gram counts of
// each row of x against a pool of n-grams, weighted by the mode, written as the CPU reference
// (cpu/ops_sequence_tfidf.cc) computes them. Enqueues on `stream`, never allocates.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kiln::cuda {

// The pool, flattened on the host: gram g has length meta[3g], starts at tokens[meta[3g + 1]]
// and counts into output bin meta[3g + 2]; no two grams are equal (the CPU's map keeps the last).
struct TfIdfDesc {
  int64_t rows = 1, cols = 0, bins = 0, grams = 0;
  int64_t min_n = 1, max_n = 1, max_skip = 0;
  int mode = 0;        // 0 TF (counts), 1 IDF (weight where count > 0), 2 TFIDF (count * weight)
  bool x64 = true;     // x is int64 (else int32)
};
// x [rows, cols] tokens; y [rows, bins] float32; weights [bins] or null (1). For each row, start
// position i and skip s in [0, max_skip], the n-gram x[i], x[i + s + 1], ... (n in [min_n, max_n],
// n >= 2 when s > 0) that equals a pool gram adds 1 to its bin; then the mode's weighting, in
// double, rounded to float. One thread per row.
cudaError_t launch_tfidf(const void* x, const int64_t* tokens, const int64_t* meta, const float* weights, float* y,
                         const TfIdfDesc& d, cudaStream_t stream);

}  // namespace kiln::cuda
