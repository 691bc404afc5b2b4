// `kiln build-llm CKPT_DIR -o ENGINE_DIR --dtype fp16|bf16|fp32 [--device gpu|cpu] --max-batch B
// --max-seq-len L [--max-num-tokens N] [--block-size 32] [--max-gpu-mem GiB]
// [--quant fp8 --calib-text FILE | --calib-ids 1,2,3]`: builds the LLM step
// graph of a Hugging Face checkpoint into ENGINE_DIR/model.plan with kiln_llm.json beside it
// (llm_build.h). An FP8 checkpoint (ModelOpt / compressed-tensors / AutoFP8 scales) builds FP8
// projections from its own scales with no --quant or calibration flag (decision 0086). `kiln generate` and `kiln bench-llm` hand over to kiln_llm_generate (below).
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "llm/checkpoint.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/llm_build.h"

namespace kiln::cli {

void BuildLlmOptions::add_to(CLI::App* app) {
  app->add_option("checkpoint", checkpoint, "Hugging Face model directory (config.json, *.safetensors, tokenizer)")->required();
  app->add_option("-o,--output", output, "Engine directory to write (model.plan, kiln_llm.json, config and tokenizer files)")
      ->required();
  app->add_option("--dtype", build.dtype, "fp16, bf16 or fp32: the plan's weights and activations")->capture_default_str();
  app->add_option("--device", build.device, "gpu, cpu or auto")->capture_default_str();
  app->add_option("--max-batch", build.max_batch, "Sequences run at once (more requests queue)")->capture_default_str();
  app->add_option("--max-seq-len", build.max_seq_len, "Tokens per sequence, prompt + generated (default: max_position_embeddings)");
  app->add_option("--max-num-tokens", build.max_num_tokens, "Tokens per step (default: max(max-batch, min(max-seq-len, 2048)))");
  app->add_option("--block-size", build.block_size, "Tokens per KV-cache block")->capture_default_str();
  app->add_option("--kv-cache-dtype,--kv-cache", build.cache_dtype,
                  "float32, float16, bfloat16 or fp8 (E4M3, per-layer K/V scales from --calib-text / --calib-ids, "
                  "else 1); default: the --dtype's");
  app->add_option("--max-gpu-mem", build.max_gpu_mem_gib, "GiB for weights + activations + KV cache (default: 90% of free memory)");
  app->add_option("--timing-cache", build.timing_cache, "CUDA tactic timing cache file (read, then rewritten)");
  app->add_option("--quant", build.quant, "fp8: E4M3 weights (see --weight-scales) and activations (per tensor) in every "
                  "attention / MLP projection (not the embedding or lm_head); FP8 checkpoints need no flag: their own scales are used");
  app->add_option("--weight-scales", build.weight_scales,
                  "--quant fp8: per-tensor (default; shared by q/k/v and gate/up, cuBLASLt's fused FP8 GEMM) or "
                  "per-channel weight scales; FP8 checkpoints: per-tensor requantizes q/k/v and gate/up to one scale per group, "
                  "per-channel keeps every weight as stored");
  app->add_option("--calib-text", build.calib_text, "--quant fp8: UTF-8 text whose tokens (the checkpoint's tokenizer) calibrate "
                  "the activation scales");
  app->add_option("--calib-ids", build.calib_ids, "--quant fp8: calibration token ids, e.g. 1,2,3 (checkpoints without a tokenizer)");
  app->add_option("--calib-max-seq-len", build.calib_max_seq_len, "--quant fp8: calibration tokens per prefill step")
      ->capture_default_str();
  app->add_flag("-v,--verbose", verbose, "Print each build step");
}

int cmd_build_llm(const BuildLlmOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  auto ck = llm::Checkpoint::open(o.checkpoint);
  if (!ck.ok()) return report_error("build-llm", ck.status());
  LlmBuildOptions b = o.build;
  const bool verbose = o.verbose;
  // -v: every step with the seconds since the start and the process's peak host memory (where
  // a build of a large checkpoint spends its time and memory).
  auto stamp = [t0]() {
    struct rusage u {};
    ::getrusage(RUSAGE_SELF, &u);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    char buf[64];
    std::snprintf(buf, sizeof buf, "[%7.1f s %6.1f GiB] ", s, static_cast<double>(u.ru_maxrss) / 1048576.0);
    return std::string(buf);
  };
  b.progress = [verbose, stamp](const BuildProgress& p) {
    if (p.step == "tuning") {
      if (p.total > 0 && p.done >= p.total)
        std::fprintf(stderr, "%stuning done: %d layers\n", verbose ? stamp().c_str() : "", p.total);
      return;
    }
    if (!verbose) return;
    if (!p.detail.empty())
      std::fprintf(stderr, "%s%s: %s\n", stamp().c_str(), p.step.c_str(), p.detail.c_str());
    else if (p.done == 0 || (p.total > 0 && p.done >= p.total))
      std::fprintf(stderr, "%s%s %s\n", stamp().c_str(), p.step.c_str(), p.done == 0 ? "..." : "done");
  };
  auto built = build_llm_engine(*ck, b);
  if (!built.ok()) return report_error("build-llm", built.status());
  b.progress(BuildProgress{"write", 0, 1, ""});
  if (Status s = write_llm_engine_dir(*ck, *built, o.output); !s.ok()) return report_error("build-llm", s);
  b.progress(BuildProgress{"write", 1, 1, ""});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const llm::LlmEngineInfo& i = built->info;
  if (!i.quant.empty()) std::printf("%s projections, scales from %s\n", i.quant.c_str(), i.quant_scales.c_str());
  if (!i.kv_cache_scales.empty()) std::printf("fp8 KV cache, scales: %s\n", i.kv_cache_scales.c_str());
  std::printf("engine %s: %s %s, %s plan %.1f MiB; max batch %lld, max seq len %lld, %lld tokens per step, "
              "KV blocks of %lld tokens (%s); %.1f s\n",
              o.output.c_str(), i.architecture.c_str(), i.dtype.c_str(), i.device.c_str(), built->plan.size() / 1048576.0,
              static_cast<long long>(i.max_rows), static_cast<long long>(i.max_seq_len),
              static_cast<long long>(i.max_num_tokens), static_cast<long long>(i.block_size), dtype_name(i.cache_dtype), s);
  return kExitOk;
}

int exec_llm_tool(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) self = fs::path(argv[0]);
  const fs::path tool = self.parent_path() / "kiln_llm_generate";
  if (!fs::exists(tool)) {
    std::fprintf(stderr, "kiln %s: kiln_llm_generate is not next to kiln (%s); build the kiln_llm_generate target\n", argv[1],
                 tool.string().c_str());
    return kExitError;
  }
  // kiln_llm_generate takes `bench-llm` as its first argument; `generate` is its default mode.
  std::vector<std::string> args = {tool.string()};
  if (std::string(argv[1]) == "bench-llm") args.push_back("bench-llm");
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  ::execv(tool.c_str(), cargs.data());
  std::perror(("kiln " + std::string(argv[1]) + ": exec " + tool.string()).c_str());
  return kExitError;
}

}  // namespace kiln::cli
