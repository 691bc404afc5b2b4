// `kiln build-llm`'s work as a library call (tests use it too): a Hugging Face checkpoint ->
// the step graph (src/llm/step_graph.h) -> a plan built by the ordinary builder, plus the
// kiln_llm.json that tells the runner how to drive it, written as an engine directory
// (src/llm/engine_info.h). docs/decisions/0060-llm-runner.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/builder.h"
#include "kiln/status.h"
#include "llm/checkpoint.h"
#include "llm/engine_info.h"
#include "tools/kiln/llm_build_options.h"

namespace kiln::cli {

struct LlmEngineBuild {
  std::vector<uint8_t> plan;
  llm::LlmEngineInfo info;
};

// What build_llm_engine hands the builder: the step graph, the BuilderConfig (target, precision,
// the T profile, tuning shapes) and the engine info. For tools and tests that lower the graph
// without building (cuda_layer_graph). Errors as build_llm_engine's, before the builder's.
struct LlmBuildInputs {
  ir::Graph graph;
  BuilderConfig config;
  llm::LlmEngineInfo info;
};
StatusOr<LlmBuildInputs> prepare_llm_build(const llm::Checkpoint& checkpoint, const LlmBuildOptions& options);

// The step-graph plan of `checkpoint` and its engine info. T (the packed token count) ranges
// over [1, N] with opt min(R, N) (a decode step of a full batch), and CUDA tactics are tuned at
// every power-of-two bucket of [1, N] (the shapes the runner pads steps to). InvalidArgument
// naming the option: a dtype, device or cache dtype not listed above, sizes < 1, max_seq_len past
// the model's max_position_embeddings, max_num_tokens < max_batch; a quant other than "" / fp8,
// fp8 without exactly one of calib_text / calib_ids, calibration errors (fp8_calibration.h), a
// projection whose K or N is not a multiple of 16 (naming it), calibration flags for an FP8
// checkpoint (built from its own scales: info.quant "fp8", quant_scales "checkpoint: ..."). Build
// errors as the builder's.
StatusOr<LlmEngineBuild> build_llm_engine(const llm::Checkpoint& checkpoint, const LlmBuildOptions& options);

// Writes `dir` (created if needed): the plan, kiln_llm.json, the checkpoint's config.json and
// generation_config.json, and its tokenizer files (tokenizer.json, tokenizer.model,
// tokenizer_config.json, special_tokens_map.json, those present). Errors name the file.
Status write_llm_engine_dir(const llm::Checkpoint& checkpoint, const LlmEngineBuild& build, const std::string& dir);

}  // namespace kiln::cli
