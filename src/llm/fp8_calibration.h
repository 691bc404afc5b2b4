// Calibration of the FP8 step graph's activation scales (issue 13 item 3; decision 0059, addendum
// "FP8 projections"): the float step graph (step_graph.h) run on the CPU reference interpreter
// over calibration token ids as prefill steps, the input of every projection
// (decoder_projections(), decoder_layers.h) observed, and per projection the min-max amax (the
// largest finite |x|, src/quant/calibrator.h's minmax_amax) turned into the per-tensor scale
// x_scale = amax / 448 (E4M3FN's largest finite value; 1 for an all-zero input, as the ONNX
// calibrator does). The q/k/v (and gate/up) projections read one tensor and get one scale. The
// same run observes each layer's PagedAttention K and V inputs for the FP8 KV cache's scales.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "llm/checkpoint.h"

namespace kiln::llm {

struct Fp8CalibrationOptions {
  // The ids are cut into sequences of at most this many tokens (and the model's
  // max_position_embeddings), each run as one prefill step at positions 0.. from an empty cache.
  int64_t max_seq_len = 512;
  int64_t block_size = 32;  // the calibration graph's pool blocks (does not change the values)
};

struct Fp8Calibration {
  std::map<std::string, float> x_scales;  // projection name -> amax / 448 (StepGraphOptions::fp8_x_scales)
  std::map<std::string, double> amax;     // projection name -> the largest finite |x| of its input
  // Per decoder layer: the largest finite |x| of the keys (after RoPE) and values it appends to the
  // KV cache, and the FP8 pool scales amax / 448 (1 for an all-zero tensor; StepGraphOptions::kv_scales).
  std::vector<std::pair<double, double>> kv_amax;
  std::vector<std::pair<float, float>> kv_scales;
  int64_t tokens = 0;                     // calibration tokens run
  int64_t sequences = 0;                  // prefill steps run
};

// Calibrates every projection of `checkpoint` on `ids`. InvalidArgument for empty ids, an id
// outside [0, vocab_size) (naming its index), max_seq_len or block_size < 1, or a projection
// input with no finite value; errors of the float step graph's build or run as theirs.
StatusOr<Fp8Calibration> calibrate_fp8(const Checkpoint& checkpoint, const std::vector<int32_t>& ids,
                                       const Fp8CalibrationOptions& options = {});

// "1,2,3" (decimal ids, commas, spaces allowed around them) -> ids. InvalidArgument naming the
// item that is not a non-negative 32-bit integer, or for an empty list.
StatusOr<std::vector<int32_t>> parse_calibration_ids(const std::string& text);

// The token ids of the UTF-8 text file `path`, encoded with `checkpoint`'s tokenizer (special
// tokens added as the tokenizer's template says). NotFound naming the file when it does not
// exist, InvalidArgument when it is empty or encodes to no token, the tokenizer's errors (NotFound
// when the checkpoint has none: pass ids instead) prefixed with the file.
StatusOr<std::vector<int32_t>> calibration_ids_from_text_file(const Checkpoint& checkpoint, const std::string& path);

}  // namespace kiln::llm
