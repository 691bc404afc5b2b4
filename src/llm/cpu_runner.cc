// The CPU generation loop: prefill, then one decode step per token with the KV cache.
#include "llm/cpu_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "backends/cpu/interpreter.h"
#include "llm/decoder_graph.h"

namespace kiln::llm {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kEos: return "eos";
    case StopReason::kMaxNewTokens: return "max_new_tokens";
    case StopReason::kMaxLength: return "max_length";
    case StopReason::kStopString: return "stop_string";
  }
  return "?";
}

StatusOr<std::unique_ptr<LlmCpuRunner>> LlmCpuRunner::create(const Checkpoint& checkpoint) {
  std::unique_ptr<LlmCpuRunner> r(new LlmCpuRunner());
  r->config_ = checkpoint.config();
  r->default_eos_ = checkpoint.eos_token_ids();
  DecoderGraphOptions last;
  last.all_logits = false;
  KILN_ASSIGN_OR_RETURN(r->last_graph_, build_decoder_graph(r->config_, checkpoint, last));
  KILN_ASSIGN_OR_RETURN(r->all_graph_, with_all_logits(r->last_graph_));
  return r;
}

KvCache LlmCpuRunner::empty_cache() const {
  KvCache c;
  const Shape s = {1, config_.num_kv_heads, 0, config_.head_dim};
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    c.keys.emplace_back(DataType::kFloat32, s);
    c.values.emplace_back(DataType::kFloat32, s);
  }
  return c;
}

int64_t LlmCpuRunner::max_length() const {
  int64_t n = config_.max_position_embeddings;
  if (config_.sliding_window) n = std::min(n, *config_.sliding_window);
  return n;
}

StatusOr<Tensor> LlmCpuRunner::forward(const std::vector<int32_t>& tokens, KvCache* cache, bool all_logits) const {
  const int64_t S = static_cast<int64_t>(tokens.size());
  if (S == 0) return invalid_argument("forward: no tokens");
  if (cache->keys.size() != static_cast<size_t>(config_.num_layers) || cache->values.size() != cache->keys.size())
    return invalid_argument("forward: the KV cache has " + std::to_string(cache->keys.size()) + " layers, the model " +
                            std::to_string(config_.num_layers));
  if (cache->length + S > max_length())
    return invalid_argument("forward: " + std::to_string(cache->length) + " cached + " + std::to_string(S) +
                            " new tokens pass the model's limit of " + std::to_string(max_length()) +
                            (config_.sliding_window && *config_.sliding_window < config_.max_position_embeddings
                                 ? " (the sliding window; attention beyond it is not implemented)"
                                 : " (max_position_embeddings)"));
  Tensor ids(DataType::kInt64, {1, S}), pos(DataType::kInt64, {1, S});
  for (int64_t i = 0; i < S; ++i) {
    if (tokens[i] < 0 || tokens[i] >= config_.vocab_size)
      return invalid_argument("forward: token id " + std::to_string(tokens[i]) + " at " + std::to_string(i) +
                              " is outside the vocabulary [0, " + std::to_string(config_.vocab_size) + ")");
    ids.data<int64_t>()[i] = tokens[i];
    pos.data<int64_t>()[i] = cache->length + i;
  }
  std::vector<Tensor> in = {ids, pos};
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    in.push_back(cache->keys[l]);
    in.push_back(cache->values[l]);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> out, interpret(all_logits ? all_graph_ : last_graph_, in));
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    cache->keys[l] = std::move(out[1 + 2 * l]);
    cache->values[l] = std::move(out[2 + 2 * l]);
  }
  cache->length += S;
  return std::move(out[0]);
}

StatusOr<GenerationResult> LlmCpuRunner::generate(const std::vector<int32_t>& prompt, const GenerationOptions& options,
                                                  const std::function<void(int32_t)>& on_token) const {
  if (prompt.empty()) return invalid_argument("generate: the prompt has no tokens");
  if (options.max_new_tokens < 0)
    return invalid_argument("generate: max_new_tokens is " + std::to_string(options.max_new_tokens) + ", expected >= 0");
  if (static_cast<int64_t>(prompt.size()) > max_length())
    return invalid_argument("generate: the prompt has " + std::to_string(prompt.size()) + " tokens, past the model's limit of " +
                            std::to_string(max_length()));
  KILN_RETURN_IF_ERROR(validate_sampling(options.sampling));
  if (!options.stop_strings.empty())
    return invalid_argument("generate: stop strings need a tokenizer; LlmCpuRunner works on token ids (LlmRunner has them)");
  const std::vector<int64_t>& eos = options.eos_token_ids.empty() ? default_eos_ : options.eos_token_ids;
  Sampler sampler(options.sampling);
  GenerationResult result;
  if (options.max_new_tokens == 0) return result;
  KvCache cache = empty_cache();
  const int64_t V = config_.vocab_size;
  std::vector<int32_t> step = prompt;
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    KILN_ASSIGN_OR_RETURN(Tensor logits, forward(step, &cache, /*all_logits=*/false));
    (result.tokens.empty() ? result.prefill_ms : result.decode_ms) += ms_since(t0);
    float* last = logits.data<float>() + (logits.dim(1) - 1) * V;
    for (int64_t i = 0; i < V; ++i)
      if (!std::isfinite(last[i]))
        return internal_error("generate: the logits at position " + std::to_string(cache.length - 1) + " hold a non-finite value (id " +
                              std::to_string(i) + ")");
    if (options.sampling.repetition_penalty != 1.0) {
      std::vector<int32_t> seen = prompt;
      seen.insert(seen.end(), result.tokens.begin(), result.tokens.end());
      apply_repetition_penalty(last, V, seen, options.sampling.repetition_penalty);
    }
    const int32_t tok = sampler.next(last, V);
    result.tokens.push_back(tok);
    if (on_token) on_token(tok);
    if (!options.ignore_eos && std::find(eos.begin(), eos.end(), tok) != eos.end()) {
      result.stop = StopReason::kEos;
      break;
    }
    if (static_cast<int64_t>(result.tokens.size()) >= options.max_new_tokens) {
      result.stop = StopReason::kMaxNewTokens;
      break;
    }
    if (cache.length + 1 > max_length()) {
      result.stop = StopReason::kMaxLength;
      break;
    }
    step = {tok};
    t0 = std::chrono::steady_clock::now();
  }
  return result;
}

}  // namespace kiln::llm
