// The LLM runner's sampling on the GPU (issue 13 item 4, docs/decisions/0077): per row of the
// step's logits its own repetition penalty (over a device bitmap of the ids already in its
// sequence, kept up to date from the step's own tokens), temperature, top-k, top-p and a
// counter-based draw (Philox4x32-10 keyed by the request's seed, counter = the token's position),
// with the host Sampler's rules (sampling.h) — only the chosen ids come back. device_sampler_cuda.cc
// implements it on the CUDA backend's kernel (backends/cuda/kernels_sampling.h);
// device_sampler_none.cc (builds without CUDA) reports that no GPU is there.
#pragma once

#include <cstdint>
#include <memory>

#include "kiln/runtime.h"
#include "kiln/status.h"
#include "llm/sampling.h"

namespace kiln::llm {

class DeviceSampler {
 public:
  // Device buffers for `rows` rows (R) of a `vocab`-entry vocabulary and steps of up to
  // `max_tokens` tokens: per-row options (pinned staging + device), the step's ids / token_seq /
  // positions, the seen bitmap [R, ceil(V / 32)] uint32 (zeroed), the results (device + pinned),
  // the kernels' scratch (cuda::sampling_scratch_bytes: ~8 KB per row and 4,096 ids).
  // InvalidArgument for a vocabulary past 2^23 or no rows; OutOfMemory naming the buffer;
  // Unsupported without the CUDA backend.
  static StatusOr<std::unique_ptr<DeviceSampler>> create(int64_t rows, int64_t max_tokens, int64_t vocab);
  ~DeviceSampler();

  // Row `row` chooses a token in the next enqueue with `options` (greedy when temperature <= 0:
  // the argmax after the repetition penalty), drawing with philox_uniform(options.seed, position);
  // `position` is the index the new token takes in its sequence (sampling.h's device_uniform).
  // Host staging only.
  void set_row(int64_t row, const SamplingOptions& options, int64_t position);
  // Every row chooses nothing in the next enqueue (their bitmaps are still updated).
  void clear_rows();

  // Enqueues on `stream`: copies the row options and the step's first `tokens` ids (int64),
  // token_seq (int32, -1 = padding) and positions (int64) from the host buffers given (the
  // runner's pinned staging) to the device, runs the kernel over `logits` (device float32 [R, V])
  // and copies the results to pinned memory. No allocation, no synchronization: capturable in a
  // CUDA graph (then the host buffers' addresses are part of the graph). `distributions` (device
  // float32 [R, V], may be null; tests) receives each choosing row's filtered distribution.
  Status enqueue(const void* logits, const void* ids, const void* token_seq, const void* positions, int64_t tokens,
                 CudaStream stream, float* distributions = nullptr);

  // After the stream synchronized: the id chosen for `row` (-1: none or a non-finite logit), and
  // the lowest id whose penalized logit is NaN or infinite (-1: none).
  int32_t token(int64_t row) const;
  int32_t nonfinite(int64_t row) const;

  int64_t rows() const { return rows_; }
  int64_t vocab() const { return vocab_; }

 private:
  DeviceSampler() = default;
  struct Buffers;
  std::unique_ptr<Buffers> b_;
  int64_t rows_ = 0, max_tokens_ = 0, vocab_ = 0;
};

}  // namespace kiln::llm
