// The settings of `kiln build-llm` (llm_build.h's build_llm_engine), in a header of their own so the
// CLI's option parsing (options.h) binds its flags to them directly, without the IR and LLM headers
// llm_build.h needs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kiln/builder.h"

namespace kiln::cli {

struct LlmBuildOptions {
  std::string dtype = "fp16";   // fp16 | bf16 | fp32: the plan's weights and activations
  std::string device = "auto";  // gpu (= cuda) | cpu | auto
  int64_t max_batch = 8;        // R: sequences run at once
  int64_t max_seq_len = 0;      // tokens per sequence (prompt + generated); 0 = max_position_embeddings
  int64_t max_num_tokens = 0;   // N: tokens per step; 0 = max(max_batch, min(max_seq_len, 2048))
  int64_t block_size = 32;      // tokens per KV block
  std::string cache_dtype;      // float32 | float16 | bfloat16 | fp8 (fp8e4m3fn); "" = the plan's dtype (fp32 -> float32)
  double max_gpu_mem_gib = 0;   // GiB bounding weights + activations + KV pool; 0 = the runner's default
  std::string timing_cache;     // CUDA: timing cache file ("" = none)
  // "" (float projections) or "fp8": every projection a QuantLinear of E4M3FN weights and
  // activations (per tensor, scales calibrated by llm::calibrate_fp8 on the float step graph;
  // decision 0059, addendum). fp8 needs exactly one of calib_text (a UTF-8 text file, tokenized
  // with the checkpoint's tokenizer) or calib_ids ("1,2,3": token ids). An FP8 checkpoint
  // (llm::Checkpoint::fp8_quantization(), decision 0086) is built with its own scales whatever
  // quant says ("" or "fp8"); calibration flags are then an error, and weight_scales says whether
  // per-tensor q/k/v and gate/up weights are requantized to one scale per group ("per-tensor") or
  // kept as stored ("per-channel": the fused layer's scales then vary by member).
  std::string quant;
  // fp8 weight scales: "per-tensor" (the default: one scale per weight, shared by q/k/v and by
  // gate/up — ModelOpt's FP8 recipe, run by cuBLASLt's fused FP8 GEMM; decision 0085) or
  // "per-channel" (one per output channel).
  std::string weight_scales = "per-tensor";
  std::string calib_text;
  std::string calib_ids;
  int64_t calib_max_seq_len = 512;  // calibration tokens per prefill step
  std::function<void(const BuildProgress&)> progress;
};

}  // namespace kiln::cli
