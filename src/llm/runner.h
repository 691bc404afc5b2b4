// LlmRunner: generation with in-flight batching over an engine of the LLM step graph (issue 13
// items 4-5; TensorRT-LLM's ModelRunner). One Engine — a CPU or CUDA plan of
// build_step_graph (src/llm/step_graph.h) — runs every step; the runner owns the paged KV cache
// (kv_cache.h) and, between steps, the scheduling: up to max_rows sequences run at once, later
// requests wait in FIFO order and join as soon as a row and their worst-case blocks are free;
// each step packs one decode token of every running sequence plus prefill chunks of newly
// admitted ones, up to max_num_tokens tokens (chunked prefill), pads the token count T up to a
// power-of-two bucket (padding tokens have token_seq = -1) and chooses each sequence's next
// token: on CPU plans on the host (sampling.h); on CUDA plans the step runs through enqueue from
// pinned staging buffers, greedy rows take the device's argmax (next_tokens) and the others are
// sampled on the GPU (device_sampler.h), so only token ids come back.
// docs/decisions/0060-llm-runner.md (and its addendum), 0077-gpu-sampling.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "kiln/status.h"
#include "llm/cpu_runner.h"
#include "llm/engine_info.h"
#include "llm/kv_cache.h"
#include "llm/model_config.h"
#include "llm/tokenizer.h"

namespace kiln::llm {

// One generation request: token ids of the prompt (non-empty) and its options (max_new_tokens,
// sampling with its own seed, eos ids, stop strings; cpu_runner.h's GenerationOptions).
struct LlmRequest {
  std::vector<int32_t> prompt;
  GenerationOptions options;
};

struct LlmResult {
  std::vector<int32_t> tokens;  // new tokens in order; a stop token or the token completing a stop string last
  StopReason stop = StopReason::kMaxNewTokens;
  // Milliseconds since generate() was called: when the request was admitted (got its row and
  // blocks) and when each of its tokens was sampled (token_ms[0] is the time to first token).
  double admitted_ms = 0;
  std::vector<double> token_ms;
};

// Called for each token as soon as it is sampled: the request's index in generate()'s list, the
// token, and whether it is the request's last.
using TokenCallback = std::function<void(size_t request, int32_t token, bool last)>;

struct LlmRunnerOptions {
  // KV pool blocks (each layer); 0 = from the memory budget (LlmEngineInfo::max_memory_bytes, or
  // this struct's override): CPU plans without a budget get max_rows * max_blocks_per_seq (every
  // row a full-length sequence).
  int64_t num_blocks = 0;
  uint64_t max_memory_bytes = 0;  // bytes; 0 = the engine info's
  // from_dir: load the directory's tokenizer (stop strings and text need it). A tokenizer.model
  // needs register_sentencepiece() in the program.
  bool load_tokenizer = true;
  // CUDA plans: each bucket's step is captured into a CUDA graph on first use and replayed
  // (device io: the runner captures ExecutionContext::enqueue on its stream, the copies from its
  // pinned staging buffers included; the execute path: ExecutionContext::set_cuda_graph); the
  // block table, positions and pool addresses are data in the graph's input buffers, so replays
  // see each step's values.
  bool cuda_graph = false;
  // CUDA plans with next_tokens (device io): rows that sample (temperature > 0 or a repetition
  // penalty) choose their token on the GPU after the step (device_sampler.h; in the CUDA graph
  // with cuda_graph), only the ids come back. false: their logits rows are copied to the host and
  // sampled by Sampler (std::mt19937_64 draws, so other tokens than the GPU's Philox draws; the
  // path before decision 0077, kept for comparisons: bench-llm --host-sampling).
  bool device_sampling = true;
};

// Counters of the last generate() (for tests and bench-llm).
struct LlmRunStats {
  int64_t steps = 0;             // engine executions
  int64_t tokens = 0;            // real tokens packed over all steps
  int64_t padded_tokens = 0;     // padding tokens added to reach the buckets
  int64_t max_running = 0;       // most sequences in one step
  int64_t max_step_tokens = 0;   // most real tokens in one step
  int64_t prefill_chunks = 0;    // steps in which a sequence ran part, not all, of its remaining prompt
  // Device io (CUDA plans with next_tokens): steps run through enqueue on the runner's stream,
  // and what came back to the host: steps that copied no logits row (every token the device's
  // argmax or the GPU sampler's), rows of [vocab] logits copied for host sampling, and tokens
  // the GPU sampler chose (device_sampling). The execute path (CPU plans, or CUDA plans without
  // next_tokens) counts every sampled row in logits_rows_read and copies all [R, vocab] logits
  // every step.
  bool device_io = false;
  bool device_sampling = false;
  int64_t argmax_only_steps = 0;
  int64_t logits_rows_read = 0;
  int64_t device_sampled_tokens = 0;
};

class LlmRunner {
 public:
  ~LlmRunner();
  // Loads ENGINE_DIR: kiln_llm.json (engine_info.h), its plan, config.json and (optionally) the
  // tokenizer; allocates the KV pool. Errors name the file; a plan whose io does not match
  // kiln_llm.json (block_table [max_batch, max_blocks_per_seq], kv_pools [num_layers, 2], logits
  // [max_batch, vocab]) is InvalidPlan naming the tensor.
  static StatusOr<std::unique_ptr<LlmRunner>> from_dir(const std::string& dir, const LlmRunnerOptions& options = {});
  // from_dir of the plan's directory (the issue's `from_plan`): InvalidArgument when kiln_llm.json
  // there names another plan file.
  static StatusOr<std::unique_ptr<LlmRunner>> from_plan(const std::string& plan_path, const LlmRunnerOptions& options = {});
  // From parts already in memory (tests): `engine` a plan of build_step_graph for `info`;
  // `tokenizer` may be null. Same checks as from_dir.
  static StatusOr<std::unique_ptr<LlmRunner>> create(std::shared_ptr<const Engine> engine, const LlmEngineInfo& info,
                                                     const ModelConfig& config, std::unique_ptr<Tokenizer> tokenizer,
                                                     const LlmRunnerOptions& options = {});

  // Generates for every request (in-flight batching; each request gets exactly the tokens it
  // would get alone, up to the floating-point order of batched GEMMs). Requests beyond
  // max_rows, or beyond what the KV pool holds at once, wait and join between steps. Streams
  // each token through `on_token` (may be empty) and returns the results in request order.
  // InvalidArgument naming the request (before any step): an empty prompt, an id outside the
  // vocabulary, a prompt longer than max_length(), bad sampling options, max_new_tokens <
  // 0, stop strings without a tokenizer, or a request whose worst case (prompt + max_new_tokens)
  // needs more blocks than the whole pool. Engine errors end the call.
  StatusOr<std::vector<LlmResult>> generate(const std::vector<LlmRequest>& requests, const TokenCallback& on_token = {});

  const LlmEngineInfo& info() const { return info_; }
  const ModelConfig& config() const { return config_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const Engine& engine() const { return *engine_; }
  const KvBlockManager& blocks() const { return blocks_; }
  const KvPool& pool() const { return *pool_; }
  const LlmRunStats& last_stats() const { return stats_; }
  // Longest sequence (prompt + generated) a request may reach: min(max_seq_len,
  // max_position_embeddings, the sliding window when the config has one).
  int64_t max_length() const;
  // The padded token count of a step with `tokens` real tokens: the next power of two, at most
  // max_num_tokens.
  int64_t bucket(int64_t tokens) const;
  // Per-layer device times of a step of `tokens` tokens (its bucket): the last step generate() ran
  // at that bucket runs once more over the inputs it had (ExecutionContext::profile_enqueued on
  // the runner's stream; its KV append writes the same slots again), one event pair per layer.
  // For bench-llm --profile-decode. Errors: CPU plans or plans without device io (Unsupported),
  // no step of that bucket run yet (InvalidArgument).
  StatusOr<std::vector<LayerTiming>> profile_step(int64_t tokens);

 private:
  LlmRunner();
  struct Sequence;
  struct DeviceIo;
  StatusOr<ExecutionContext*> context_for(int64_t bucket);
  // Device io: runs the step of bucket `tp` on the stream (the staging buffers filled) and the
  // GPU sampler after it (when there is one: the rows' options set), then copies the logits rows
  // of `sample_rows` (host sampling) to the host staging and waits for the stream.
  Status run_device_step(ExecutionContext* ctx, int64_t tp, const std::vector<int32_t>& sample_rows);

  std::shared_ptr<const Engine> engine_;
  LlmEngineInfo info_;
  ModelConfig config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  KvBlockManager blocks_;
  std::unique_ptr<KvPool> pool_;
  Tensor pool_pointers_;
  std::map<int64_t, std::unique_ptr<ExecutionContext>> contexts_;  // by bucket: each keeps its shapes' arena
  std::set<int64_t> stepped_;  // buckets a device step has run at (profile_step needs one)
  LlmRunStats stats_;
  bool cuda_graph_ = false;
  std::unique_ptr<DeviceIo> dio_;  // CUDA plans with next_tokens: pinned staging, stream, graphs
};

}  // namespace kiln::llm
