// build_llm_engine / write_llm_engine_dir (see llm_build.h).
#include "tools/kiln/llm_build.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "builder/build_from_graph.h"
#include "io/output_file.h"
#include "llm/decoder_layers.h"
#include "llm/fp8_calibration.h"
#include "llm/step_graph.h"
#include "runtime/gpu_engine.h"

namespace kiln::cli {

namespace fs = std::filesystem;

StatusOr<LlmBuildInputs> prepare_llm_build(const llm::Checkpoint& ck, const LlmBuildOptions& o) {
  const llm::ModelConfig& mc = ck.config();
  auto bad = [](const std::string& m) { return invalid_argument("build-llm: " + m); };
  if (o.dtype != "fp16" && o.dtype != "bf16" && o.dtype != "fp32")
    return bad("--dtype '" + o.dtype + "': expected fp16, bf16 or fp32");
  TargetDevice target;
  if (o.device == "gpu" || o.device == "cuda")
    target = TargetDevice::kCuda;
  else if (o.device == "cpu")
    target = TargetDevice::kCpu;
  else if (o.device == "auto")
    target = gpu::available() ? TargetDevice::kCuda : TargetDevice::kCpu;
  else
    return bad("--device '" + o.device + "': expected gpu, cpu or auto");
  if (o.max_batch < 1) return bad("--max-batch " + std::to_string(o.max_batch) + ": expected >= 1");
  if (o.block_size < 1) return bad("--block-size " + std::to_string(o.block_size) + ": expected >= 1");
  const int64_t L = o.max_seq_len > 0 ? o.max_seq_len : mc.max_position_embeddings;
  if (o.max_seq_len < 0) return bad("--max-seq-len " + std::to_string(o.max_seq_len) + ": expected >= 1");
  if (L > mc.max_position_embeddings)
    return bad("--max-seq-len " + std::to_string(L) + " is past the model's max_position_embeddings " +
               std::to_string(mc.max_position_embeddings));
  const int64_t N = o.max_num_tokens > 0 ? o.max_num_tokens : std::max(o.max_batch, std::min<int64_t>(L, 2048));
  if (o.max_num_tokens < 0 || N < o.max_batch)
    return bad("--max-num-tokens " + std::to_string(N) + " is below --max-batch " + std::to_string(o.max_batch) +
               ": a step must hold one decode token of every running sequence");
  if (o.max_gpu_mem_gib < 0 || !std::isfinite(o.max_gpu_mem_gib))
    return bad("--max-gpu-mem " + std::to_string(o.max_gpu_mem_gib) + ": expected GiB >= 0");
  std::string cache = o.cache_dtype;
  if (cache.empty()) cache = o.dtype == "fp16" ? "float16" : o.dtype == "bf16" ? "bfloat16" : "float32";
  // TensorRT-LLM's spellings too (--kv-cache fp8 | fp16 | bf16).
  if (cache == "fp8" || cache == "float8e4m3fn") cache = "fp8e4m3fn";
  else if (cache == "fp16") cache = "float16";
  else if (cache == "bf16") cache = "bfloat16";
  else if (cache == "fp32") cache = "float32";
  const DataType cache_dt = dtype_from_name(cache);
  if (cache_dt != DataType::kFloat32 && cache_dt != DataType::kFloat16 && cache_dt != DataType::kBFloat16 &&
      cache_dt != DataType::kFloat8E4M3FN)
    return bad("--kv-cache-dtype '" + cache + "': expected float32, float16, bfloat16 or fp8 (fp8e4m3fn)");
  const bool kv_fp8 = cache_dt == DataType::kFloat8E4M3FN;

  if (!o.quant.empty() && o.quant != "fp8") return bad("--quant '" + o.quant + "': expected fp8");
  // An FP8 checkpoint's projections are built from its own scales (decision 0086): calibration
  // flags are refused rather than silently ignored; --quant fp8 alone says what happens anyway.
  const std::optional<llm::Fp8CheckpointQuant>& ck_fp8 = ck.fp8_quantization();
  if (ck_fp8 && (!o.calib_text.empty() || !o.calib_ids.empty()))
    return bad("--calib-text / --calib-ids: checkpoint '" + ck.dir() + "' carries its FP8 scales (" + ck_fp8->describe() +
               "); its projections are built from them without calibration: drop the calibration flags");
  if (o.quant.empty() && !kv_fp8 && (!o.calib_text.empty() || !o.calib_ids.empty()))
    return bad("--calib-text / --calib-ids calibrate --quant fp8 or an fp8 --kv-cache-dtype; pass one of them too");
  if (kv_fp8 && !o.calib_text.empty() && !o.calib_ids.empty())
    return bad("--calib-text and --calib-ids: give one of them (the calibration data)");
  if (o.quant == "fp8" && !ck_fp8 && o.calib_text.empty() == o.calib_ids.empty())
    return bad("--quant fp8 needs exactly one of --calib-text FILE or --calib-ids IDS (the activation scales' data)");
  if (o.weight_scales != "per-tensor" && o.weight_scales != "per-channel")
    return bad("--weight-scales '" + o.weight_scales + "': expected per-tensor or per-channel");
  if ((o.quant == "fp8" || kv_fp8) && !ck_fp8 && o.calib_max_seq_len < 1)
    return bad("--calib-max-seq-len " + std::to_string(o.calib_max_seq_len) + ": expected >= 1");
  if (o.quant == "fp8") {
    // Refuse before calibrating: FP8 QuantLinear needs K and N multiples of 16 (decision 0055).
    for (const llm::Projection& p : llm::decoder_projections(mc))
      if (p.k % 16 != 0 || p.n % 16 != 0)
        return bad("--quant fp8: projection '" + p.name + "' of " + llm::architecture_name(mc.architecture) + " is [K " +
                   std::to_string(p.k) + ", N " + std::to_string(p.n) +
                   "]; FP8 linear layers need K and N multiples of 16");
  }

  LlmBuildInputs out;
  llm::LlmEngineInfo& info = out.info;
  info.device = target == TargetDevice::kCuda ? "cuda" : "cpu";
  info.dtype = o.dtype;
  info.architecture = llm::architecture_name(mc.architecture);
  info.num_layers = mc.num_layers;
  info.num_kv_heads = mc.num_kv_heads;
  info.head_dim = mc.head_dim;
  info.vocab_size = mc.vocab_size;
  info.block_size = o.block_size;
  info.max_rows = o.max_batch;
  info.max_blocks_per_seq = (L + o.block_size - 1) / o.block_size;
  info.max_seq_len = L;
  info.max_num_tokens = N;
  info.cache_dtype = cache_dt;
  info.max_memory_bytes = static_cast<uint64_t>(o.max_gpu_mem_gib * 1073741824.0);
  info.eos_token_ids = ck.eos_token_ids();
  info.bos_token_ids = ck.bos_token_ids();

  llm::StepGraphOptions so;
  so.max_rows = info.max_rows;
  so.max_blocks_per_seq = info.max_blocks_per_seq;
  so.block_size = info.block_size;
  so.cache_dtype = cache;
  if (ck_fp8) {
    // Per-tensor (the default): q/k/v and gate/up weights requantized to their group's largest
    // scale, one scalar scale per fused layer; per-channel: every weight as stored.
    so.fp8_per_tensor_weights = o.weight_scales == "per-tensor";
    info.quant = "fp8";
    info.quant_scales = "checkpoint: " + ck_fp8->describe() + "; weights " +
                        (ck_fp8->per_channel_weights ? std::string("per-channel, as stored")
                         : so.fp8_per_tensor_weights ? std::string("per-tensor, one scale per fused q/k/v and gate/up layer")
                                                     : std::string("as stored"));
  } else if (o.quant == "fp8" || (kv_fp8 && (!o.calib_text.empty() || !o.calib_ids.empty()))) {
    std::vector<int32_t> ids;
    std::string source;
    if (!o.calib_text.empty()) {
      KILN_ASSIGN_OR_RETURN(ids, llm::calibration_ids_from_text_file(ck, o.calib_text));
      source = "text '" + o.calib_text + "'";
    } else {
      StatusOr<std::vector<int32_t>> parsed = llm::parse_calibration_ids(o.calib_ids);
      if (!parsed.ok()) return bad("--calib-ids: " + parsed.status().message());
      ids = std::move(*parsed);
      source = "ids";
    }
    llm::Fp8CalibrationOptions co;
    co.max_seq_len = std::min(o.calib_max_seq_len, L);
    co.block_size = o.block_size;
    if (o.progress) o.progress(BuildProgress{"fp8 calibration", 0, 1, ""});
    KILN_ASSIGN_OR_RETURN(llm::Fp8Calibration cal, llm::calibrate_fp8(ck, ids, co));
    if (o.progress) o.progress(BuildProgress{"fp8 calibration", 1, 1, ""});
    const std::string how = "calibration: " + source + " (" + std::to_string(cal.tokens) + " tokens in " +
                            std::to_string(cal.sequences) + " prefill steps, min-max amax / 448)";
    if (o.quant == "fp8") {
      so.fp8_x_scales = std::move(cal.x_scales);
      so.fp8_per_tensor_weights = o.weight_scales == "per-tensor";
      info.quant = "fp8";
      info.quant_scales = how + "; weights " + o.weight_scales;
    }
    if (kv_fp8) {
      so.kv_scales = std::move(cal.kv_scales);
      info.kv_cache_scales = how + ", per layer for K and V";
    }
  }
  if (kv_fp8 && so.kv_scales.empty()) {
    // A checkpoint that carries FP8 KV-cache scales (ModelOpt / compressed-tensors exports): its own.
    using KvScales = std::vector<std::pair<float, float>>;
    KILN_ASSIGN_OR_RETURN(KvScales ck_kv, llm::read_kv_cache_scales(ck.tensors(), mc.num_layers));
    if (!ck_kv.empty()) {
      so.kv_scales = std::move(ck_kv);
      info.kv_cache_scales = "checkpoint: self_attn k / v scales, per layer for K and V";
    } else {
      info.kv_cache_scales = "1 for every layer (no calibration data: --calib-text or --calib-ids calibrates them)";
    }
  }
  if (o.progress) o.progress(BuildProgress{"step graph", 0, 1, ""});
  KILN_ASSIGN_OR_RETURN(out.graph, llm::build_step_graph(mc, ck, so));
  if (o.progress) o.progress(BuildProgress{"step graph", 1, 1, ""});

  BuilderConfig& bc = out.config;
  bc.target = target;
  bc.fp16 = o.dtype == "fp16";
  bc.bf16 = o.dtype == "bf16";
  bc.timing_cache_path = o.timing_cache;
  // No precision rule for RoPE: the Rope layers (ops.def, docs/decisions/0067) compute the angles
  // position * inv_freq and their cos / sin in float32 inside the kernel whatever the plan's
  // precision (in fp16 the product is off by ~0.5 rad near position 1000).
  bc.progress = o.progress;
  OptimizationProfile prof;
  const int64_t opt = std::min(o.max_batch, N);
  for (const char* name : {llm::kStepInputIdsName, llm::kStepPositionIdsName, llm::kStepTokenSeqName})
    KILN_RETURN_IF_ERROR(prof.set_dimensions(name, {1}, {opt}, {N}));
  bc.profiles.push_back(prof);
  // Every power-of-two bucket in [1, N] plus N itself: the shapes LlmRunner::bucket pads to.
  int buckets = 1;
  for (int64_t b = 1; b < N; b *= 2) ++buckets;
  bc.tuning_shapes = buckets;
  return out;
}

StatusOr<LlmEngineBuild> build_llm_engine(const llm::Checkpoint& ck, const LlmBuildOptions& o) {
  KILN_ASSIGN_OR_RETURN(LlmBuildInputs in, prepare_llm_build(ck, o));
  LlmEngineBuild out;
  out.info = std::move(in.info);
  KILN_ASSIGN_OR_RETURN(out.plan, build_from_graph(std::move(in.graph), in.config));
  return out;
}

Status write_llm_engine_dir(const llm::Checkpoint& ck, const LlmEngineBuild& build, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return invalid_argument("build-llm: cannot create '" + dir + "': " + ec.message());
  llm::LlmEngineInfo info = build.info;
  info.tokenizer_files.clear();
  auto copy = [&](const std::string& name, bool required) -> Status {
    const fs::path from = fs::path(ck.dir()) / name;
    if (!fs::exists(from)) {
      if (required) return not_found("build-llm: '" + from.string() + "' does not exist");
      return Status::Ok();
    }
    fs::copy_file(from, fs::path(dir) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return invalid_argument("build-llm: cannot copy '" + from.string() + "' to '" + dir + "': " + ec.message());
    return Status::Ok();
  };
  KILN_RETURN_IF_ERROR(copy("config.json", true));
  KILN_RETURN_IF_ERROR(copy("generation_config.json", false));
  for (const char* t : {"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"}) {
    KILN_RETURN_IF_ERROR(copy(t, false));
    if (fs::exists(fs::path(ck.dir()) / t) && (std::string(t) == "tokenizer.json" || std::string(t) == "tokenizer.model"))
      info.tokenizer_files.push_back(t);
  }
  // Each file whole or not at all (a temporary file renamed into place).
  auto write = [&](const std::string& name, const char* data, size_t n) -> Status {
    const std::string path = (fs::path(dir) / name).string();
    return io::write_file_atomically(path, data, n, name).with_context("build-llm");
  };
  KILN_RETURN_IF_ERROR(write(info.plan_file, reinterpret_cast<const char*>(build.plan.data()), build.plan.size()));
  const std::string j = llm::engine_info_json(info);
  return write(llm::kEngineInfoFile, j.data(), j.size());
}

}  // namespace kiln::cli
