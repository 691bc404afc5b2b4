// Text generation on the CPU reference backend (issue 13 item 6): the decoder step graph
// (decoder_graph.h) run by Kiln's reference interpreter, a KV cache held as tensors between
// steps, and sampling.h's next-token choice. One sequence at a time (batch 1); slow and exact —
// the reference the GPU runner will be checked against. docs/decisions/0053-llm-decoder-graph.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/status.h"
#include "kiln/tensor.h"
#include "llm/checkpoint.h"
#include "llm/sampling.h"

namespace kiln::llm {

// The keys and values of every token run so far, per layer: keys[L] and values[L] float32
// [1, num_kv_heads, length, head_dim] (keys after RoPE), as the graph's present_* outputs.
struct KvCache {
  std::vector<Tensor> keys, values;
  int64_t length = 0;  // tokens cached
};

struct GenerationOptions {
  int64_t max_new_tokens = 32;   // generated tokens at most (the prompt not counted)
  SamplingOptions sampling;      // greedy by default
  // Generation stops after emitting one of these (it is included in the result). Empty: the
  // checkpoint's eos ids (generation_config.json, else config.json), unless ignore_eos.
  std::vector<int64_t> eos_token_ids;
  bool ignore_eos = false;
  // Generation stops once the decoded text of the new tokens contains one of these (the token
  // that completed it is the last of the result; transformers' StopStringCriteria). Needs a
  // tokenizer: LlmRunner has one, LlmCpuRunner refuses non-empty stop strings.
  std::vector<std::string> stop_strings;
};

enum class StopReason : uint8_t { kEos, kMaxNewTokens, kMaxLength, kStopString };
// "eos", "max_new_tokens", "max_length", "stop_string"
const char* stop_reason_name(StopReason r);

struct GenerationResult {
  std::vector<int32_t> tokens;   // the new tokens, in order (an eos that stopped it last)
  StopReason stop = StopReason::kMaxNewTokens;
  double prefill_ms = 0;         // wall time of the prompt's forward step
  double decode_ms = 0;          // wall time of all later steps together
};

class LlmCpuRunner {
 public:
  // Builds the decoder step graph from the checkpoint (weights converted to float32 once; the
  // runner keeps what it needs, the Checkpoint may go). Errors: build_decoder_graph's.
  static StatusOr<std::unique_ptr<LlmCpuRunner>> create(const Checkpoint& checkpoint);

  const ModelConfig& config() const { return config_; }
  // An empty cache of the model's layer count and shapes.
  KvCache empty_cache() const;
  // Longest sequence (prompt + generated) a request may reach: max_position_embeddings, and the
  // sliding window when the config has one (attention beyond it is not implemented).
  int64_t max_length() const;

  // One forward step of `tokens` (batch 1) after the cached ones: positions cache->length, ...;
  // returns logits float32 [1, tokens.size(), vocab] for every new position (all_logits) or
  // [1, 1, vocab] for the last one, and appends the new keys and values to *cache.
  // InvalidArgument for no tokens, an id outside the vocabulary or a length past max_length(),
  // naming it; interpreter errors name the node.
  StatusOr<Tensor> forward(const std::vector<int32_t>& tokens, KvCache* cache, bool all_logits = true) const;

  // Prefills `prompt` (non-empty), then decodes one token per step with the cache until an eos
  // id, max_new_tokens or max_length(). `on_token` (may be empty) is called with each new token as
  // soon as it is chosen. The result depends only on the prompt, the options and the weights.
  StatusOr<GenerationResult> generate(const std::vector<int32_t>& prompt, const GenerationOptions& options,
                                      const std::function<void(int32_t)>& on_token = {}) const;

 private:
  LlmCpuRunner() = default;
  ModelConfig config_;
  std::vector<int64_t> default_eos_;
  ir::Graph last_graph_;  // logits of the last new position (what generation reads)
  ir::Graph all_graph_;   // logits of every new position; shares last_graph_'s weights
};

}  // namespace kiln::llm
