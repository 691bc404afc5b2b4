// TfIdfVectorizer (kernels_tfidf.h): one thread per row walks the row's n-grams and looks each up
// in the flattened pool (a linear scan: pools of the conformance graphs and small text models hold
// a few dozen grams). Counts are small integers, exact in float32.
#include "backends/cuda/kernels_tfidf.h"
#include "backends/cuda/launch_config.cuh"

namespace kiln::cuda {
namespace {

__global__ void tfidf_kernel(const void* x, const int64_t* tokens, const int64_t* meta, const float* weights, float* y,
                             TfIdfDesc d) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < d.rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    auto tok = [&](int64_t c) {
      return d.x64 ? static_cast<const int64_t*>(x)[r * d.cols + c] : int64_t{static_cast<const int32_t*>(x)[r * d.cols + c]};
    };
    float* out = y + r * d.bins;
    for (int64_t b = 0; b < d.bins; ++b) out[b] = 0.f;
    for (int64_t skip = 0; skip <= d.max_skip; ++skip) {
      const int64_t step = skip + 1;
      for (int64_t i = 0; i < d.cols; ++i) {
        for (int64_t n = d.min_n > (skip > 0 ? 2 : 1) ? d.min_n : (skip > 0 ? 2 : 1); n <= d.max_n; ++n) {
          if (i + (n - 1) * step >= d.cols) break;
          for (int64_t g = 0; g < d.grams; ++g) {
            if (meta[3 * g] != n) continue;
            const int64_t* p = tokens + meta[3 * g + 1];
            bool eq = true;
            for (int64_t j = 0; j < n && eq; ++j) eq = tok(i + j * step) == p[j];
            if (eq) {
              out[meta[3 * g + 2]] += 1.f;
              break;
            }
          }
        }
      }
    }
    for (int64_t b = 0; b < d.bins; ++b) {
      const double w = weights ? static_cast<double>(weights[b]) : 1.0;
      double v = out[b];
      if (d.mode == 1) v = v > 0 ? w : 0;
      else if (d.mode == 2) v *= w;
      out[b] = static_cast<float>(v);
    }
  }
}

}  // namespace

cudaError_t launch_tfidf(const void* x, const int64_t* tokens, const int64_t* meta, const float* weights, float* y,
                         const TfIdfDesc& d, cudaStream_t stream) {
  if (d.rows == 0 || d.bins == 0) return cudaSuccess;
  tfidf_kernel<<<blocks_for(d.rows), kThreads, 0, stream>>>(x, tokens, meta, weights, y, d);
  return cudaGetLastError();
}

}  // namespace kiln::cuda
