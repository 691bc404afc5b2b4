// kiln_llm.json: what an LLM engine directory says beside its plan (written by `kiln build-llm`,
// read by LlmRunner::from_dir). The plan holds the step graph (src/llm/step_graph.h); this file
// holds what the runner needs to drive it — the paged-cache geometry the graph was built for, the
// token budget per step, the stop ids and the tokenizer files — so a plan is never run with a
// block table or pool it was not built for. docs/decisions/0060-llm-runner.md.
//
// Directory: model.plan, kiln_llm.json, config.json, generation_config.json (when the checkpoint
// had one) and the tokenizer files (tokenizer.json and/or tokenizer.model, tokenizer_config.json).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "kiln/types.h"

namespace kiln::llm {

inline constexpr int kEngineInfoVersion = 1;
inline constexpr const char* kEngineInfoFile = "kiln_llm.json";

struct LlmEngineInfo {
  int version = kEngineInfoVersion;
  std::string plan_file = "model.plan";  // relative to the directory
  std::string device = "cpu";            // "cpu" or "cuda": the plan's target
  std::string dtype = "fp32";            // "fp32", "fp16" or "bf16": the plan's weights and activations
  // The model, for checks against the plan's io shapes (the full config is config.json).
  std::string architecture;              // architecture_name(): "gpt2", "llama", ...
  int64_t num_layers = 0, num_kv_heads = 0, head_dim = 0, vocab_size = 0;
  // The paged cache and the step (StepGraphOptions and the runner's limits).
  int64_t block_size = 32;               // tokens per KV block
  int64_t max_rows = 0;                  // R: sequences run at once (block_table rows, logits rows)
  int64_t max_blocks_per_seq = 0;        // MB: block-table columns = ceil(max_seq_len / block_size)
  int64_t max_seq_len = 0;               // prompt + generated tokens of one sequence at most
  int64_t max_num_tokens = 0;            // N: tokens of one step at most (the T profile's max)
  DataType cache_dtype = DataType::kFloat32;  // pool elements: float32, float16, bfloat16 or fp8e4m3fn
  // Memory: the total device-memory budget (weights + activations + KV pool), bytes; 0 = the
  // runner's default (CPU plans: a pool for max_rows full-length sequences; CUDA plans: 90% of
  // the device's free memory after the engine is loaded).
  uint64_t max_memory_bytes = 0;
  std::vector<int64_t> eos_token_ids, bos_token_ids;  // generation_config.json's, else config.json's
  std::vector<std::string> tokenizer_files;           // copied beside the plan, by file name
  // Quantized linear layers (decision 0059, addendum "FP8 projections"); written only when set,
  // optional when read. quant: "" (float projections) or "fp8" (every projection a QuantLinear
  // of E4M3FN weights and activations). quant_scales: where the activation scales came from,
  // e.g. "calibration: text 'calib.txt' (1234 tokens, min-max)" or "calibration: ids (8 tokens,
  // min-max)". Informational: the plan holds the scales.
  std::string quant;
  std::string quant_scales;
  // fp8e4m3fn KV caches: where the per-layer K/V scales came from ("calibration: ..." or "1
  // (no calibration data)"); written only when set. Informational: the plan holds the scales.
  std::string kv_cache_scales;
};

// The file's JSON text (pretty-printed).
std::string engine_info_json(const LlmEngineInfo& info);
// Parses kiln_llm.json's text; `where` names the file in errors. InvalidArgument naming the field
// for a missing or ill-typed field, a version other than kEngineInfoVersion, a non-positive size,
// max_blocks_per_seq * block_size < max_seq_len, an unknown device, dtype or cache dtype.
StatusOr<LlmEngineInfo> parse_engine_info(const std::string& text, const std::string& where);
StatusOr<LlmEngineInfo> read_engine_info(const std::string& dir);

}  // namespace kiln::llm
