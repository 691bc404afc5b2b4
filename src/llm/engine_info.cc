// kiln_llm.json writer and reader (fields in engine_info.h).
#include "llm/engine_info.h"

#include <nlohmann/json.hpp>

#include "llm/model_config.h"

namespace kiln::llm {

using nlohmann::json;

std::string engine_info_json(const LlmEngineInfo& i) {
  json j = {{"version", i.version},
            {"plan", i.plan_file},
            {"device", i.device},
            {"dtype", i.dtype},
            {"model",
             {{"architecture", i.architecture},
              {"num_layers", i.num_layers},
              {"num_kv_heads", i.num_kv_heads},
              {"head_dim", i.head_dim},
              {"vocab_size", i.vocab_size}}},
            {"block_size", i.block_size},
            {"max_batch", i.max_rows},
            {"max_blocks_per_seq", i.max_blocks_per_seq},
            {"max_seq_len", i.max_seq_len},
            {"max_num_tokens", i.max_num_tokens},
            {"cache_dtype", dtype_name(i.cache_dtype)},
            {"max_memory_bytes", i.max_memory_bytes},
            {"eos_token_ids", i.eos_token_ids},
            {"bos_token_ids", i.bos_token_ids},
            {"tokenizer_files", i.tokenizer_files}};
  if (!i.quant.empty()) {
    j["quant"] = i.quant;
    j["quant_scales"] = i.quant_scales;
  }
  if (!i.kv_cache_scales.empty()) j["kv_cache_scales"] = i.kv_cache_scales;
  return j.dump(2) + "\n";
}

namespace {

struct Reader {
  const json& j;
  const std::string& where;
  Status err(const std::string& field, const std::string& what) const {
    return invalid_argument(where + ": field '" + field + "' " + what);
  }
  Status get_int(const json& obj, const std::string& field, int64_t* out, bool positive = true) const {
    if (!obj.contains(field)) return err(field, "is missing");
    const json& v = obj[field];
    if (!v.is_number_integer()) return err(field, "is not an integer");
    *out = v.get<int64_t>();
    if (positive && *out < 1) return err(field, "is " + std::to_string(*out) + ", expected >= 1");
    return Status::Ok();
  }
  Status get_string(const json& obj, const std::string& field, std::string* out) const {
    if (!obj.contains(field)) return err(field, "is missing");
    if (!obj[field].is_string()) return err(field, "is not a string");
    *out = obj[field].get<std::string>();
    return Status::Ok();
  }
  template <typename T>
  Status get_list(const std::string& field, std::vector<T>* out) const {
    if (!j.contains(field)) return Status::Ok();
    const json& v = j[field];
    if (!v.is_array()) return err(field, "is not a list");
    for (const json& e : v) {
      if constexpr (std::is_same_v<T, std::string>) {
        if (!e.is_string()) return err(field, "holds a non-string");
        out->push_back(e.get<std::string>());
      } else {
        if (!e.is_number_integer()) return err(field, "holds a non-integer");
        out->push_back(e.get<T>());
      }
    }
    return Status::Ok();
  }
};

}  // namespace

StatusOr<LlmEngineInfo> parse_engine_info(const std::string& text, const std::string& where) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument(where + ": not a JSON object");
  Reader r{j, where};
  LlmEngineInfo i;
  int64_t version = 0;
  KILN_RETURN_IF_ERROR(r.get_int(j, "version", &version));
  if (version != kEngineInfoVersion)
    return invalid_argument(where + ": version " + std::to_string(version) + ", this Kiln reads version " +
                            std::to_string(kEngineInfoVersion) + " (rebuild the engine with kiln build-llm)");
  KILN_RETURN_IF_ERROR(r.get_string(j, "plan", &i.plan_file));
  if (i.plan_file.empty() || i.plan_file.find('/') != std::string::npos)
    return r.err("plan", "must be a file name in the engine directory, not '" + i.plan_file + "'");
  KILN_RETURN_IF_ERROR(r.get_string(j, "device", &i.device));
  if (i.device != "cpu" && i.device != "cuda") return r.err("device", "is '" + i.device + "', expected cpu or cuda");
  KILN_RETURN_IF_ERROR(r.get_string(j, "dtype", &i.dtype));
  if (i.dtype != "fp32" && i.dtype != "fp16" && i.dtype != "bf16")
    return r.err("dtype", "is '" + i.dtype + "', expected fp32, fp16 or bf16");
  if (!j.contains("model") || !j["model"].is_object()) return r.err("model", "is missing or not an object");
  const json& m = j["model"];
  KILN_RETURN_IF_ERROR(r.get_string(m, "architecture", &i.architecture));
  KILN_RETURN_IF_ERROR(r.get_int(m, "num_layers", &i.num_layers));
  KILN_RETURN_IF_ERROR(r.get_int(m, "num_kv_heads", &i.num_kv_heads));
  KILN_RETURN_IF_ERROR(r.get_int(m, "head_dim", &i.head_dim));
  KILN_RETURN_IF_ERROR(r.get_int(m, "vocab_size", &i.vocab_size));
  KILN_RETURN_IF_ERROR(r.get_int(j, "block_size", &i.block_size));
  KILN_RETURN_IF_ERROR(r.get_int(j, "max_batch", &i.max_rows));
  KILN_RETURN_IF_ERROR(r.get_int(j, "max_blocks_per_seq", &i.max_blocks_per_seq));
  KILN_RETURN_IF_ERROR(r.get_int(j, "max_seq_len", &i.max_seq_len));
  KILN_RETURN_IF_ERROR(r.get_int(j, "max_num_tokens", &i.max_num_tokens));
  if (i.max_blocks_per_seq > (int64_t{1} << 31) / i.block_size || i.max_blocks_per_seq * i.block_size < i.max_seq_len)
    return r.err("max_blocks_per_seq", std::to_string(i.max_blocks_per_seq) + " blocks of " + std::to_string(i.block_size) +
                                           " tokens do not hold max_seq_len " + std::to_string(i.max_seq_len));
  std::string cache;
  KILN_RETURN_IF_ERROR(r.get_string(j, "cache_dtype", &cache));
  i.cache_dtype = dtype_from_name(cache);
  if (i.cache_dtype != DataType::kFloat32 && i.cache_dtype != DataType::kFloat16 && i.cache_dtype != DataType::kBFloat16 &&
      i.cache_dtype != DataType::kFloat8E4M3FN)
    return r.err("cache_dtype", "is '" + cache + "', expected float32, float16, bfloat16 or fp8e4m3fn");
  int64_t mem = 0;
  KILN_RETURN_IF_ERROR(r.get_int(j, "max_memory_bytes", &mem, /*positive=*/false));
  if (mem < 0) return r.err("max_memory_bytes", "is negative");
  i.max_memory_bytes = static_cast<uint64_t>(mem);
  KILN_RETURN_IF_ERROR(r.get_list("eos_token_ids", &i.eos_token_ids));
  KILN_RETURN_IF_ERROR(r.get_list("bos_token_ids", &i.bos_token_ids));
  KILN_RETURN_IF_ERROR(r.get_list("tokenizer_files", &i.tokenizer_files));
  for (const std::string& f : i.tokenizer_files)
    if (f.empty() || f.find('/') != std::string::npos) return r.err("tokenizer_files", "names '" + f + "', not a file name");
  if (j.contains("quant")) {
    KILN_RETURN_IF_ERROR(r.get_string(j, "quant", &i.quant));
    if (i.quant != "fp8") return r.err("quant", "is '" + i.quant + "', expected fp8 (or no field)");
    if (j.contains("quant_scales")) KILN_RETURN_IF_ERROR(r.get_string(j, "quant_scales", &i.quant_scales));
  }
  if (j.contains("kv_cache_scales")) KILN_RETURN_IF_ERROR(r.get_string(j, "kv_cache_scales", &i.kv_cache_scales));
  return i;
}

StatusOr<LlmEngineInfo> read_engine_info(const std::string& dir) {
  const std::string path = dir + "/" + kEngineInfoFile;
  KILN_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_engine_info(text, "'" + path + "'");
}

}  // namespace kiln::llm
