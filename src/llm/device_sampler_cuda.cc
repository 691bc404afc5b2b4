// device_sampler.h on the CUDA backend: buffers from cudaMalloc / cudaMallocHost, the kernel of
// backends/cuda/kernels_sampling.h between an H2D copy of the staging and a D2H copy of the results.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels_sampling.h"
#include "llm/device_sampler.h"

namespace kiln::llm {

struct DeviceSampler::Buffers {
  cuda::SamplingRow* rows_host = nullptr;  // pinned [R]
  cuda::SamplingRow* rows_dev = nullptr;   // [R]
  int64_t* ids = nullptr;                  // [N]
  int32_t* seq = nullptr;                  // [N]
  int64_t* pos = nullptr;                  // [N]
  uint32_t* seen = nullptr;                // [R, ceil(V / 32)]
  cuda::SamplingResult* results_dev = nullptr;   // [R]
  cuda::SamplingResult* results_host = nullptr;  // pinned [R]
  unsigned char* scratch = nullptr;        // cuda::sampling_scratch_bytes(R, V)
  ~Buffers() {
    for (void* p : {static_cast<void*>(rows_dev), static_cast<void*>(ids), static_cast<void*>(seq),
                    static_cast<void*>(pos), static_cast<void*>(seen), static_cast<void*>(results_dev),
                    static_cast<void*>(scratch)})
      if (p) cudaFree(p);
    for (void* p : {static_cast<void*>(rows_host), static_cast<void*>(results_host)})
      if (p) cudaFreeHost(p);
  }
};

namespace {

template <class T>
Status device_buffer(T** p, size_t count, const char* what) {
  void* v = nullptr;
  if (cudaError_t e = cudaMalloc(&v, count * sizeof(T)); e != cudaSuccess) {
    cudaGetLastError();
    return Status(StatusCode::kOutOfMemory, std::string("GPU sampling: cudaMalloc of ") + std::to_string(count * sizeof(T)) +
                                                " bytes for " + what + ": " + cudaGetErrorString(e));
  }
  *p = static_cast<T*>(v);
  KILN_CUDA_CHECK(cudaMemset(v, 0, count * sizeof(T)));
  return Status::Ok();
}

template <class T>
Status pinned_buffer(T** p, size_t count, const char* what) {
  void* v = nullptr;
  if (cudaError_t e = cudaMallocHost(&v, count * sizeof(T)); e != cudaSuccess) {
    cudaGetLastError();
    return Status(StatusCode::kOutOfMemory, std::string("GPU sampling: cudaMallocHost of ") +
                                                std::to_string(count * sizeof(T)) + " bytes for " + what + ": " +
                                                cudaGetErrorString(e));
  }
  std::memset(v, 0, count * sizeof(T));
  *p = static_cast<T*>(v);
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<DeviceSampler>> DeviceSampler::create(int64_t rows, int64_t max_tokens, int64_t vocab) {
  if (rows < 1 || max_tokens < 1 || vocab < 1 || vocab > (int64_t{1} << 23))
    return invalid_argument("GPU sampling: " + std::to_string(rows) + " rows, " + std::to_string(max_tokens) +
                            " tokens, vocabulary " + std::to_string(vocab) +
                            ": expected >= 1 row and token and a vocabulary in [1, 2^23]");
  std::unique_ptr<DeviceSampler> s(new DeviceSampler());
  s->rows_ = rows;
  s->max_tokens_ = max_tokens;
  s->vocab_ = vocab;
  s->b_ = std::make_unique<Buffers>();
  Buffers& b = *s->b_;
  const size_t R = static_cast<size_t>(rows), N = static_cast<size_t>(max_tokens);
  KILN_RETURN_IF_ERROR(pinned_buffer(&b.rows_host, R, "the rows' sampling options"));
  KILN_RETURN_IF_ERROR(device_buffer(&b.rows_dev, R, "the rows' sampling options"));
  KILN_RETURN_IF_ERROR(device_buffer(&b.ids, N, "the step's ids"));
  KILN_RETURN_IF_ERROR(device_buffer(&b.seq, N, "the step's token_seq"));
  KILN_RETURN_IF_ERROR(device_buffer(&b.pos, N, "the step's positions"));
  KILN_RETURN_IF_ERROR(device_buffer(&b.seen, R * static_cast<size_t>(cuda::sampling_seen_words(vocab)),
                                     "the seen-id bitmaps"));
  KILN_RETURN_IF_ERROR(device_buffer(&b.results_dev, R, "the sampled ids"));
  KILN_RETURN_IF_ERROR(pinned_buffer(&b.results_host, R, "the sampled ids"));
  KILN_RETURN_IF_ERROR(device_buffer(&b.scratch, cuda::sampling_scratch_bytes(rows, vocab),
                                     "the sampling kernels' scratch (per-chunk candidates, top-p histograms)"));
  for (size_t r = 0; r < R; ++r) b.results_host[r] = {-1, -1};
  return s;
}

DeviceSampler::~DeviceSampler() = default;

void DeviceSampler::set_row(int64_t row, const SamplingOptions& o, int64_t position) {
  cuda::SamplingRow& r = b_->rows_host[row];
  r.temperature = o.temperature > 0 ? o.temperature : 0.0;
  r.top_p = o.top_p;
  r.repetition_penalty = static_cast<float>(o.repetition_penalty);
  r.top_k = static_cast<int32_t>(std::min<int64_t>(o.top_k, INT32_MAX));
  r.seed = o.seed;
  r.position = position;
  r.active = 1;
}

void DeviceSampler::clear_rows() {
  for (int64_t r = 0; r < rows_; ++r) b_->rows_host[r].active = 0;
}

Status DeviceSampler::enqueue(const void* logits, const void* ids, const void* token_seq, const void* positions,
                              int64_t tokens, CudaStream stream, float* distributions) {
  if (tokens < 0 || tokens > max_tokens_)
    return invalid_argument("GPU sampling: a step of " + std::to_string(tokens) + " tokens, the buffers hold " +
                            std::to_string(max_tokens_));
  Buffers& b = *b_;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const size_t T = static_cast<size_t>(tokens), R = static_cast<size_t>(rows_);
  KILN_CUDA_CHECK(cudaMemcpyAsync(b.rows_dev, b.rows_host, R * sizeof(cuda::SamplingRow), cudaMemcpyHostToDevice, s));
  if (T > 0) {
    KILN_CUDA_CHECK(cudaMemcpyAsync(b.ids, ids, T * 8, cudaMemcpyDefault, s));
    KILN_CUDA_CHECK(cudaMemcpyAsync(b.seq, token_seq, T * 4, cudaMemcpyDefault, s));
    KILN_CUDA_CHECK(cudaMemcpyAsync(b.pos, positions, T * 8, cudaMemcpyDefault, s));
  }
  cuda::SamplingDesc d;
  d.rows = rows_;
  d.vocab = vocab_;
  d.tokens = tokens;
  KILN_CUDA_CHECK(cuda::launch_sample_rows(static_cast<const float*>(logits), b.rows_dev, b.ids, b.seq, b.pos, b.seen,
                                           b.results_dev, distributions, b.scratch, d, s));
  KILN_CUDA_CHECK(cudaMemcpyAsync(b.results_host, b.results_dev, R * sizeof(cuda::SamplingResult), cudaMemcpyDeviceToHost, s));
  return Status::Ok();
}

int32_t DeviceSampler::token(int64_t row) const { return b_->results_host[row].token; }
int32_t DeviceSampler::nonfinite(int64_t row) const { return b_->results_host[row].nonfinite; }

}  // namespace kiln::llm
