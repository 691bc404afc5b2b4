// Hugging Face model directory: config, generation config, single-file or sharded safetensors.
#include "llm/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "llm/weight_spec.h"

namespace kiln::llm {

using nlohmann::json;

namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Adds a shard's tensors, refusing a name another shard already holds.
Status add_tensors(const SafetensorsFile& f, std::map<std::string, SafetensorsTensor>* all) {
  for (const SafetensorsTensor& t : f.tensors()) {
    auto [it, fresh] = all->emplace(t.name, t);
    if (!fresh)
      return invalid_model("tensor '" + t.name + "' is in both '" + it->second.file->path() + "' and '" + f.path() + "'");
  }
  return Status::Ok();
}

// model.safetensors.index.json: every weight_map entry a plain file name in `dir` that exists and
// holds that tensor; every tensor of every shard listed, and listed under its own shard.
Status read_sharded(const std::string& dir, const std::string& index_path, std::map<std::string, SafetensorsTensor>* all,
                    std::vector<std::string>* files) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path));
  const std::string where = "'" + index_path + "'";
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_model(where + ": not a JSON object");
  if (!j.contains("weight_map") || !j["weight_map"].is_object())
    return invalid_model(where + ": no 'weight_map' object");
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  std::vector<std::string> shards;                // distinct, in first-mention order
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string()) return invalid_model(where + ": weight_map['" + it.key() + "'] is not a file name");
    const std::string file = it.value().get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
      return invalid_model(where + ": weight_map['" + it.key() + "'] = '" + file + "' is not a file name in the model directory");
    weight_map[it.key()] = file;
    if (std::find(shards.begin(), shards.end(), file) == shards.end()) shards.push_back(file);
  }
  if (shards.empty()) return invalid_model(where + ": weight_map is empty");
  for (const std::string& s : shards) {
    const std::string path = dir + "/" + s;
    if (!exists(path)) return not_found(where + " names shard '" + s + "', which is not in '" + dir + "'");
    KILN_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(path));
    for (const SafetensorsTensor& t : f.tensors()) {
      auto it = weight_map.find(t.name);
      if (it == weight_map.end())
        return invalid_model("tensor '" + t.name + "' in '" + path + "' is not listed in " + where);
      if (it->second != s)
        return invalid_model("tensor '" + t.name + "' is in '" + path + "' but " + where + " places it in '" + it->second + "'");
    }
    KILN_RETURN_IF_ERROR(add_tensors(f, all));
    files->push_back(path);
  }
  for (const auto& [name, file] : weight_map)
    if (!all->count(name))
      return invalid_model(where + " places tensor '" + name + "' in '" + file + "', which does not hold it");
  return Status::Ok();
}

}  // namespace

const SafetensorsTensor* Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<int64_t> Checkpoint::eos_token_ids() const {
  if (generation_ && !generation_->eos_token_ids.empty()) return generation_->eos_token_ids;
  return config_.eos_token_ids;
}

std::vector<int64_t> Checkpoint::bos_token_ids() const {
  if (generation_ && !generation_->bos_token_ids.empty()) return generation_->bos_token_ids;
  return config_.bos_token_ids;
}

StatusOr<Checkpoint> Checkpoint::open(const std::string& dir_in) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return not_found("checkpoint directory '" + dir + "' not found");
  if (!S_ISDIR(st.st_mode)) return invalid_argument("checkpoint '" + dir + "' is not a directory");
  Checkpoint c;
  c.dir_ = dir;
  const std::string config_path = dir + "/config.json";
  if (!exists(config_path)) return not_found("checkpoint '" + dir + "' has no config.json");
  KILN_ASSIGN_OR_RETURN(c.config_, read_model_config(config_path));
  KILN_ASSIGN_OR_RETURN(c.fp8_, read_fp8_quantization(dir));
  const std::string gen_path = dir + "/generation_config.json";
  if (exists(gen_path)) {
    KILN_ASSIGN_OR_RETURN(GenerationConfig g, read_generation_config(gen_path));
    c.generation_ = std::move(g);
  }

  const std::string index_path = dir + "/model.safetensors.index.json";
  const std::string single_path = dir + "/model.safetensors";
  if (exists(index_path)) {
    KILN_RETURN_IF_ERROR(read_sharded(dir, index_path, &c.tensors_, &c.files_));
  } else if (exists(single_path)) {
    KILN_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(single_path));
    KILN_RETURN_IF_ERROR(add_tensors(f, &c.tensors_));
    c.files_.push_back(single_path);
  } else {
    const bool torch = exists(dir + "/pytorch_model.bin") || exists(dir + "/pytorch_model.bin.index.json");
    return not_found("checkpoint '" + dir + "' has neither model.safetensors nor model.safetensors.index.json" +
                     (torch ? " (pytorch_model.bin is not read: save it with safe_serialization=True)" : ""));
  }
  if (c.config_.architecture == Architecture::kGpt2 && c.tensors_.count("transformer.wte.weight")) c.prefix_ = "transformer.";
  KILN_RETURN_IF_ERROR(check_weights(c.config_, c.prefix_, c.tensors_, "'" + dir + "'", c.fp8_ ? &*c.fp8_ : nullptr));
  return c;
}

}  // namespace kiln::llm
