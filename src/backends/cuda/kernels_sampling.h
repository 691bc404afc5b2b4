// Launcher of the LLM runner's GPU sampling (docs/decisions/0077 and its addendum): over the step's
// logits [R, vocab], the rows' seen-token bitmaps (repetition penalty) are kept up to date from the
// step's tokens and, for rows that choose a token this step, the repetition penalty, temperature,
// top-k and top-p are applied with exactly the rules of the host Sampler (src/llm/sampling.h) and
// the draw is made with Philox4x32-10 (core/philox.h). Six kernel launches: five of one block per
// (row, chunk of 4,096 ids), then one of one block per row (see kernels_sampling.cu). Enqueues on `stream`, never
// allocates, never synchronizes: capturable in a CUDA graph (the caller sizes `scratch` once).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace kiln::cuda {

// One row's request for this step (device memory, 48 bytes). active == 0: the row chooses no token
// (only its bitmap is updated). temperature <= 0: the argmax of the penalized logits (the lowest id
// among equal maxima); top_k, top_p and seed are then ignored.
struct SamplingRow {
  double temperature = 0;          // > 0: logits divided by it
  double top_p = 1;                // in (0, 1]; 1 = no top-p
  float repetition_penalty = 1;    // > 0; 1 = none
  int32_t top_k = 0;               // > 0 and < vocab: keep the top_k largest (ties with the k-th kept)
  uint64_t seed = 0;               // Philox key
  int64_t position = 0;            // Philox counter: the index the new token takes in its sequence
  int32_t active = 0;              // 1: choose a token for this row this step
  int32_t reserved = 0;
};

// What a row's block writes (device memory): the chosen id (-1 when none), and the lowest id whose
// penalized logit is NaN or infinite (-1 when all are finite; the token is then -1).
struct SamplingResult {
  int32_t token;
  int32_t nonfinite;
};

struct SamplingDesc {
  int64_t rows = 0;       // R
  int64_t vocab = 0;      // V
  int64_t tokens = 0;     // T of the step: entries of ids / token_seq / positions
};

// Bitmap words per row: ceil(vocab / 32) uint32.
inline int64_t sampling_seen_words(int64_t vocab) { return (vocab + 31) / 32; }

// Bytes of the device scratch launch_sample_rows needs for R rows of a V-entry vocabulary (0 for
// R or V < 1): per row and chunk of 4,096 ids, 1,024 candidate slots (uint32 key + int32 id), a
// uint64 mass sum and four int32 / float chunk results — 8,216 B per chunk —, and per row 41,016 B
// (top-p histograms and state): 19.4 MB at R = 64, V = 128,256 (32 chunks a row), 9.5 MB at R = 64,
// V = 50,257. Contents need no initialization (the kernels zero what they accumulate into).
size_t sampling_scratch_bytes(int64_t rows, int64_t vocab);

// For every row r:
//  1. seen [R, sampling_seen_words(V)] uint32, bit i of row r = id i is in r's sequence: cleared
//     when one of the step's tokens t has token_seq[t] == r and positions[t] == 0 (the sequence
//     starts in this step), then the bit of ids[t] set for every token t of row r (ids outside
//     [0, V) ignored). Every token of a sequence passes through a step before the token after it is
//     chosen, so at choosing time the bitmap holds prompt + generated ids.
//  2. if rows[r].active: logits row r (float32 [R, V] row-major) ->
//     penalized (x in the bitmap: x < 0 ? x * penalty : x / penalty, float), greedy argmax, or
//     w_i = exp((x_i - max) / temperature), top-k / top-p thresholds found by radix select over
//     the logits' order-preserving 32-bit keys with masses in 2^-40 fixed point (integer sums:
//     bitwise the same run to run whatever the thread order), then the token at u =
//     philox_uniform(seed, position) of the kept masses' inverse CDF in id order.
//  3. distributions (may be null; tests): float32 [R, V], row r of an active sampling row = the
//     kept tokens' w_i / sum of kept w (0 elsewhere); an active greedy row: 1 at the argmax.
// rows [R]; ids int64 [T], token_seq int32 [T] (-1 = padding), positions int64 [T]; results [R];
// scratch: device memory of sampling_scratch_bytes(R, V) bytes, used by this launch only (launches
// sharing one scratch must be ordered, e.g. on one stream).
// cudaErrorInvalidValue for a vocabulary past 2^23 (the fixed-point sums would overflow), R < 1 or
// no scratch.
cudaError_t launch_sample_rows(const float* logits, const SamplingRow* rows, const int64_t* ids,
                               const int32_t* token_seq, const int64_t* positions, uint32_t* seen,
                               SamplingResult* results, float* distributions, void* scratch,
                               const SamplingDesc& d, cudaStream_t stream);

}  // namespace kiln::cuda
