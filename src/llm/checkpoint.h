// A Hugging Face model directory opened for reading (issue 13, item 1): config.json,
// generation_config.json (optional), and the weights — model.safetensors, or the shards
// model-0000N-of-0000M.safetensors named by model.safetensors.index.json ({"metadata": ...,
// "weight_map": {tensor: shard file}}) — memory-mapped and checked against the architecture's
// weight spec (weight_spec.h). docs/decisions/0048-llm-checkpoints-and-tokenizers.md.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "llm/fp8_checkpoint.h"
#include "llm/model_config.h"
#include "llm/safetensors.h"

namespace kiln::llm {

class Checkpoint {
 public:
  // Reads and validates `dir`. Errors name the file and tensor: a missing config.json, shard or
  // weight file is NotFound; a malformed file (safetensors.h's checks), an index entry pointing
  // at a shard that lacks the tensor, a tensor in a shard the index does not list there, a tensor
  // name present in two shards, a missing, unexpected or wrongly shaped weight is InvalidModel;
  // an unknown architecture or a weight dtype other than F32/F16/BF16 is Unsupported. An FP8
  // checkpoint (config.json quantization_config / hf_quant_config.json, fp8_checkpoint.h) may
  // store its linear layers' weights in F8_E4M3 with their scales (checked here too, each error
  // naming the tensor and file); other quantizations are Unsupported naming the file.
  static StatusOr<Checkpoint> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  // The FP8 quantization the checkpoint declares (fp8_checkpoint.h; docs/decisions/0086), nullopt
  // for a float checkpoint.
  const std::optional<Fp8CheckpointQuant>& fp8_quantization() const { return fp8_; }
  // generation_config.json when present.
  const std::optional<GenerationConfig>& generation_config() const { return generation_; }
  // The token ids that end generation: generation_config.json's when present, else config.json's.
  std::vector<int64_t> eos_token_ids() const;
  std::vector<int64_t> bos_token_ids() const;

  // Every tensor of every shard (the spec's weights plus tolerated buffers), by name.
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  // The safetensors files read, in the order opened.
  const std::vector<std::string>& files() const { return files_; }
  // nullptr if absent. Weight names are the checkpoint's own (GPT-2's with or without the
  // "transformer." prefix: see weight_prefix()).
  const SafetensorsTensor* find(const std::string& name) const;
  // "transformer." when the GPT-2 weights carry it, "" otherwise.
  const std::string& weight_prefix() const { return prefix_; }

 private:
  std::string dir_;
  ModelConfig config_;
  std::optional<GenerationConfig> generation_;
  std::optional<Fp8CheckpointQuant> fp8_;
  std::map<std::string, SafetensorsTensor> tensors_;
  std::vector<std::string> files_;
  std::string prefix_;
};

}  // namespace kiln::llm
