// `kiln build-llm`, `kiln generate` and `kiln bench-llm` end to end in their own processes
// (std::system), on the CPU: a tiny checkpoint built into an engine directory generates the
// tokens and text kiln_llm_generate's CPU reference generates from the checkpoint itself.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/runtime.h"
#include "llm/engine_info.h"
#include "llm/fp8_test_checkpoint.h"
#include "llm/random_checkpoint.h"
#include "llm/runner.h"
#include "runtime/engine_impl.h"

namespace kiln::llm {
namespace {

using nlohmann::json;
using testing::byte_tokenizer_json;
using testing::CliRun;
using testing::slurp;

CliRun run(const std::string& binary, const std::string& args, const std::string& tmp) {
  return testing::run_tool(binary, args, tmp);
}

// `kiln generate` of 8 greedy tokens after one prompt on engines `a` and `b`: how many leading
// tokens agree (printed under `what`); test failures when either run fails or stops short.
size_t greedy_agreement(const std::string& a, const std::string& b, const std::string& tmp, const std::string& what) {
  const std::string ids = " --prompt-ids 72,105,33,32 --max-new-tokens 8 --ignore-eos --json";
  CliRun ga = run("kiln", "generate " + a + ids, tmp);
  CliRun gb = run("kiln", "generate " + b + ids, tmp);
  EXPECT_EQ(ga.rc, 0) << ga.err;
  EXPECT_EQ(gb.rc, 0) << gb.err;
  if (ga.rc != 0 || gb.rc != 0) return 0;
  const json ta = json::parse(ga.out)["tokens"], tb = json::parse(gb.out)["tokens"];
  EXPECT_EQ(ta.size(), 8u);
  EXPECT_EQ(tb.size(), 8u);
  size_t agree = 0;
  while (agree < std::min(ta.size(), tb.size()) && ta[agree] == tb[agree]) ++agree;
  std::printf("%s: %zu of 8 greedy tokens agree\n", what.c_str(), agree);
  return agree;
}

class LlmCli : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = testing::make_temp_dir("llmcli");
    ckpt_ = tmp_ + "/ckpt";
    engine_ = tmp_ + "/engine";
    json c = json::parse(testing::tiny_llama_config(2));
    c["vocab_size"] = 260;  // the 256 byte tokens and a few more
    c["eos_token_id"] = 259;
    testing::write_checkpoint(ckpt_, c.dump(), testing::random_weights(c.dump(), 23), "F16",
                              json{{"eos_token_id", {258, 259}}}.dump());
    testing::write_file(ckpt_ + "/tokenizer.json", byte_tokenizer_json());
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(tmp_);
  }
  CliRun build(const std::string& extra = "") {
    return run("kiln", "build-llm " + ckpt_ + " -o " + engine_ +
                           " --device cpu --dtype fp32 --max-batch 4 --max-seq-len 48 --max-num-tokens 16 --block-size 8 " + extra,
               tmp_);
  }
  std::string tmp_, ckpt_, engine_;
};

TEST_F(LlmCli, BuildLlmWritesTheEngineDirectory) {
  CliRun b = build();
  ASSERT_EQ(b.rc, 0) << b.err << b.out;
  EXPECT_NE(b.out.find("max batch 4"), std::string::npos) << b.out;
  for (const char* f : {"model.plan", "kiln_llm.json", "config.json", "generation_config.json", "tokenizer.json"})
    EXPECT_TRUE(std::filesystem::exists(engine_ + "/" + f)) << f;
  auto info = read_engine_info(engine_);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->device, "cpu");
  EXPECT_EQ(info->max_rows, 4);
  EXPECT_EQ(info->max_seq_len, 48);
  EXPECT_EQ(info->max_blocks_per_seq, 6);
  EXPECT_EQ(info->max_num_tokens, 16);
  EXPECT_EQ(info->block_size, 8);
  EXPECT_EQ(info->cache_dtype, DataType::kFloat32);
  EXPECT_EQ(info->eos_token_ids, (std::vector<int64_t>{258, 259}));  // generation_config.json's
  EXPECT_EQ(info->tokenizer_files, (std::vector<std::string>{"tokenizer.json"}));
  EXPECT_EQ(info->num_layers, 2);
  EXPECT_EQ(info->vocab_size, 260);
  // The directory loads in process too, by directory or by plan path, with its tokenizer.
  auto r = LlmRunner::from_plan(engine_ + "/model.plan");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_NE((*r)->tokenizer(), nullptr);
  EXPECT_EQ((*r)->pool().num_blocks(), 4 * 6);  // CPU default: max batch full-length sequences
  LlmRequest q;
  q.prompt = {'H', 'i'};
  q.options.max_new_tokens = 4;
  q.options.ignore_eos = true;
  auto g = (*r)->generate({q});
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ((*g)[0].tokens.size(), 4u);
  auto wrong = LlmRunner::from_plan(engine_ + "/config.json");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("model.plan"), std::string::npos) << wrong.status().message();
  std::filesystem::remove(engine_ + "/model.plan");
  auto gone = LlmRunner::from_dir(engine_);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("model.plan"), std::string::npos) << gone.status().message();
}

TEST_F(LlmCli, GenerateMatchesTheCpuReference) {
  CliRun b = build();
  ASSERT_EQ(b.rc, 0) << b.err;
  // Ids, greedy.
  const std::string ids = " --prompt-ids 5,70,200,31 --max-new-tokens 9 --ignore-eos --json";
  CliRun e = run("kiln", "generate " + engine_ + ids, tmp_);
  CliRun ref = run("kiln_llm_generate", ckpt_ + ids, tmp_);
  ASSERT_EQ(e.rc, 0) << e.err;
  ASSERT_EQ(ref.rc, 0) << ref.err;
  const json je = json::parse(e.out), jr = json::parse(ref.out);
  EXPECT_EQ(je["tokens"], jr["tokens"]);
  EXPECT_EQ(je["tokens"].size(), 9u);
  EXPECT_EQ(je["engine"], "cpu");
  // Seeded sampling with a repetition penalty.
  const std::string sampled = " --prompt-ids 9 --max-new-tokens 12 --ignore-eos --json --temperature 1.3 --top-k 50 "
                              "--top-p 0.9 --seed 77 --repetition-penalty 1.3";
  e = run("kiln", "generate " + engine_ + sampled, tmp_);
  ref = run("kiln_llm_generate", ckpt_ + sampled, tmp_);
  ASSERT_EQ(e.rc, 0) << e.err;
  ASSERT_EQ(ref.rc, 0) << ref.err;
  EXPECT_EQ(json::parse(e.out)["tokens"], json::parse(ref.out)["tokens"]);
  // Streamed text.
  e = run("kiln", "generate " + engine_ + " --prompt 'Hi!' --max-new-tokens 9", tmp_);
  ref = run("kiln_llm_generate", ckpt_ + " --prompt 'Hi!' --max-new-tokens 9", tmp_);
  ASSERT_EQ(e.rc, 0) << e.err;
  ASSERT_EQ(ref.rc, 0) << ref.err;
  EXPECT_EQ(e.out, ref.out);
  EXPECT_NE(e.err.find("cpu engine"), std::string::npos) << e.err;
}

TEST_F(LlmCli, BenchLlmReportsEachBatch) {
  CliRun b = build();
  ASSERT_EQ(b.rc, 0) << b.err;
  const std::string j = tmp_ + "/bench.json";
  CliRun r = run("kiln", "bench-llm " + engine_ + " --batch 1,6 --input-len 5 --output-len 3 --warmup 0 --json " + j, tmp_);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("TTFT"), std::string::npos) << r.out;
  const json res = json::parse(slurp(j));
  ASSERT_EQ(res["results"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const json& x = res["results"][i];
    const int64_t batch = i == 0 ? 1 : 6;
    EXPECT_EQ(x["batch"], batch);
    EXPECT_EQ(x["output_tokens"], batch * 3);  // eos ignored: exactly output-len each
    EXPECT_GT(x["ttft_ms_p50"].get<double>(), 0);
    EXPECT_GE(x["ttft_ms_p99"].get<double>(), x["ttft_ms_p50"].get<double>());
    EXPECT_GT(x["tpot_ms_p50"].get<double>(), 0);
    EXPECT_GT(x["output_tokens_per_s"].get<double>(), 0);
    EXPECT_GT(x["peak_rss_bytes"].get<double>(), 0);
  }
  EXPECT_EQ(res["results"][1]["max_running"], 4);  // 6 requests, max batch 4: two queued
}

// bench-llm with sampling options: every request samples (on a CPU engine every sampled token is a
// logits row read on the host), the options are echoed in the JSON, bad ones refused.
TEST_F(LlmCli, BenchLlmSamplesWhenAsked) {
  CliRun b = build();
  ASSERT_EQ(b.rc, 0) << b.err;
  const std::string j = tmp_ + "/bench_sampled.json";
  CliRun r = run("kiln", "bench-llm " + engine_ +
                             " --batch 3 --input-len 5 --output-len 4 --warmup 0 --temperature 0.8 --top-k 5 --top-p 0.9"
                             " --repetition-penalty 1.1 --json " + j,
                 tmp_);
  ASSERT_EQ(r.rc, 0) << r.err;
  const json res = json::parse(slurp(j));
  EXPECT_EQ(res["sampling"]["temperature"], 0.8);
  EXPECT_EQ(res["sampling"]["top_k"], 5);
  EXPECT_EQ(res["sampling"]["top_p"], 0.9);
  EXPECT_EQ(res["sampling"]["repetition_penalty"], 1.1);
  EXPECT_EQ(res["sampling"]["host_sampling"], false);
  const json& x = res["results"][0];
  EXPECT_EQ(x["output_tokens"], 12);
  EXPECT_EQ(x["logits_rows_read"], 12) << "a CPU engine samples every token on the host";
  EXPECT_EQ(x["device_sampling"], false);
  EXPECT_EQ(x["device_sampled_tokens"], 0);
  r = run("kiln", "bench-llm " + engine_ + " --batch 1 --top-p 1.5", tmp_);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("top_p"), std::string::npos) << r.err;
}

TEST_F(LlmCli, UsageAndInputErrors) {
  CliRun r = run("kiln", "build-llm " + ckpt_ + " -o " + engine_ + " --device cpu --dtype fp8", tmp_);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--dtype 'fp8'"), std::string::npos) << r.err;
  r = run("kiln", "build-llm " + ckpt_ + " -o " + engine_ + " --device cpu --max-seq-len 4096", tmp_);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("max_position_embeddings"), std::string::npos) << r.err;
  r = run("kiln", "build-llm " + tmp_ + "/nothing -o " + engine_ + " --device cpu", tmp_);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("not found"), std::string::npos) << r.err;
  ASSERT_EQ(build().rc, 0);
  // A prompt past max-seq-len (48) is refused with the limit, not crashed on.
  std::string long_ids = "1";
  for (int i = 0; i < 50; ++i) long_ids += ",7";
  r = run("kiln", "generate " + engine_ + " --prompt-ids " + long_ids, tmp_);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("limit of 48"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  r = run("kiln", "bench-llm " + engine_ + " --batch 1,x", tmp_);
  EXPECT_EQ(r.rc, 2);
  // kiln_llm_generate links the runtime, not the builder: no protobuf, so SentencePiece may join it.
  const std::string needed = tmp_ + "/needed";
  ASSERT_EQ(std::system(("readelf -d " + std::string(KILN_BINARY_DIR) + "/kiln_llm_generate > " + needed).c_str()), 0);
  const std::string dyn = slurp(needed);
  EXPECT_NE(dyn.find("NEEDED"), std::string::npos);
  EXPECT_EQ(dyn.find("protobuf"), std::string::npos) << dyn;
}

// --quant fp8: refused for the fixture's model (k/v width 8) naming the layer; a model with dims
// that are multiples of 16, calibrated on a text file through its tokenizer, builds an engine
// whose kiln_llm.json says fp8 and where the scales came from, and generates; its first greedy
// tokens agree with the float engine's. Bad calibration inputs are errors naming them.
TEST_F(LlmCli, BuildLlmFp8) {
  CliRun r = build("--quant fp8 --calib-ids 1,2,3");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("projection 'layers.0.k_proj'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("multiples of 16"), std::string::npos) << r.err;
  const std::string ck16 = tmp_ + "/ck16";
  json c = json::parse(testing::tiny_llama_config(2));
  c["hidden_size"] = 64;
  c["intermediate_size"] = 128;
  c["num_key_value_heads"] = 2;  // head_dim 16: k/v 32 wide
  c["vocab_size"] = 260;
  testing::write_checkpoint(ck16, c.dump(), testing::random_weights(c.dump(), 31), "F16");
  testing::write_file(ck16 + "/tokenizer.json", byte_tokenizer_json());
  const std::string calib = tmp_ + "/calib.txt";
  testing::write_file(calib, "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs!\n");
  auto build16 = [&](const std::string& out, const std::string& extra) {
    return run("kiln", "build-llm " + ck16 + " -o " + out +
                           " --device cpu --dtype fp32 --max-batch 2 --max-seq-len 48 --max-num-tokens 16 --block-size 8 " + extra,
               tmp_);
  };
  r = build16(tmp_ + "/e8", "--quant fp8 --calib-text " + calib + " --calib-max-seq-len 32");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("fp8 projections"), std::string::npos) << r.out;
  auto info = read_engine_info(tmp_ + "/e8");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->quant, "fp8");
  EXPECT_NE(info->quant_scales.find("text '" + calib + "' (86 tokens in 3 prefill steps"), std::string::npos) << info->quant_scales;
  EXPECT_NE(info->quant_scales.find("weights per-tensor"), std::string::npos) << info->quant_scales;  // the default
  r = build16(tmp_ + "/e32", "");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto plain = read_engine_info(tmp_ + "/e32");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->quant, "");
  EXPECT_EQ(slurp(tmp_ + "/e32/kiln_llm.json").find("quant"), std::string::npos);
  // The fp8 plan stores 1 byte per projection weight: smaller than the float one.
  EXPECT_LT(std::filesystem::file_size(tmp_ + "/e8/model.plan"), std::filesystem::file_size(tmp_ + "/e32/model.plan"));
  EXPECT_GE(greedy_agreement(tmp_ + "/e8", tmp_ + "/e32", tmp_, "build-llm --quant fp8 vs the float engine"), 3u);
  // --calib-ids works too; errors name what is wrong.
  r = build16(tmp_ + "/e8b", "--quant fp8 --calib-ids 5,70,200,31,9");
  ASSERT_EQ(r.rc, 0) << r.err;
  r = build16(tmp_ + "/e8d", "--quant fp8 --calib-ids 5,70,200,31,9 --weight-scales per-channel");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto pc = read_engine_info(tmp_ + "/e8d");
  ASSERT_TRUE(pc.ok());
  EXPECT_NE(pc->quant_scales.find("weights per-channel"), std::string::npos) << pc->quant_scales;
  r = build16(tmp_ + "/e8c", "--quant fp8 --calib-ids 1 --weight-scales per-row");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--weight-scales 'per-row'"), std::string::npos) << r.err;
  r = build16(tmp_ + "/e8c", "--quant fp8");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--calib-text FILE or --calib-ids"), std::string::npos) << r.err;
  r = build16(tmp_ + "/e8c", "--quant fp8 --calib-ids 5,x");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--calib-ids: calibration ids: item 1 'x'"), std::string::npos) << r.err;
  r = build16(tmp_ + "/e8c", "--quant fp8 --calib-ids 5,260");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("id 260"), std::string::npos) << r.err;
  r = build16(tmp_ + "/e8c", "--quant fp8 --calib-text " + tmp_ + "/missing.txt");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("missing.txt"), std::string::npos) << r.err;
  r = build16(tmp_ + "/e8c", "--quant int4 --calib-ids 1");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--quant 'int4'"), std::string::npos) << r.err;
  r = build16(tmp_ + "/e8c", "--calib-ids 1");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("calibrate --quant fp8 or an fp8 --kv-cache-dtype"), std::string::npos) << r.err;

  // An FP8 KV cache (TensorRT-LLM's --kv_cache_dtype fp8): per-layer K/V scales calibrated on the
  // ids, float projections; or scale 1 for every layer without calibration data.
  r = build16(tmp_ + "/ekv", "--kv-cache fp8 --calib-ids 5,70,200,31,9,44,12,90,17,3");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("fp8 KV cache, scales: calibration: ids (10 tokens"), std::string::npos) << r.out;
  auto kv = read_engine_info(tmp_ + "/ekv");
  ASSERT_TRUE(kv.ok()) << kv.status().to_string();
  EXPECT_EQ(kv->cache_dtype, DataType::kFloat8E4M3FN);
  EXPECT_TRUE(kv->quant.empty()) << kv->quant;
  EXPECT_GE(greedy_agreement(tmp_ + "/ekv", tmp_ + "/e32", tmp_, "build-llm --kv-cache fp8 vs the float engine"), 3u);
  r = build16(tmp_ + "/ekv1", "--kv-cache-dtype float8e4m3fn");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto kv1 = read_engine_info(tmp_ + "/ekv1");
  ASSERT_TRUE(kv1.ok());
  EXPECT_NE(kv1->kv_cache_scales.find("1 for every layer"), std::string::npos) << kv1->kv_cache_scales;
  r = build16(tmp_ + "/ekv2", "--kv-cache fp4");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--kv-cache-dtype 'fp4'"), std::string::npos) << r.err;
  r = build16(tmp_ + "/ekv2", "--kv-cache fp8 --calib-ids 1,2 --calib-text " + calib);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("give one of them"), std::string::npos) << r.err;
}

// An FP8 checkpoint (ModelOpt's export, quantized in the test): build-llm without any quant or
// calibration flag builds FP8 projections from the checkpoint's scales — kiln_llm.json says fp8
// and "checkpoint: modelopt ..." — and generates; its greedy tokens start as the float original's.
// Calibration flags are refused naming the checkpoint; --quant fp8 alone is accepted.
TEST_F(LlmCli, BuildLlmFromAnFp8Checkpoint) {
  json c = json::parse(testing::tiny_llama16_config());
  c["vocab_size"] = 260;
  const std::string fdir = tmp_ + "/f32", qdir = tmp_ + "/fp8ck";
  const std::vector<testing::FloatWeight> weights = testing::random_weights(c.dump(), 31);
  testing::write_checkpoint(fdir, c.dump(), weights, "F16");
  auto float_ck = Checkpoint::open(fdir);
  ASSERT_TRUE(float_ck.ok()) << float_ck.status().to_string();
  testing::write_fp8_checkpoint(qdir, c.dump(), testing::fp8_tensors(weights, testing::fp8_input_scales(*float_ck), {}), {});
  for (const std::string& d : {fdir, qdir}) testing::write_file(d + "/tokenizer.json", byte_tokenizer_json());
  auto build = [&](const std::string& ck, const std::string& out, const std::string& extra) {
    return run("kiln", "build-llm " + ck + " -o " + out +
                           " --device cpu --dtype fp32 --max-batch 2 --max-seq-len 48 --max-num-tokens 16 --block-size 8 " + extra,
               tmp_);
  };
  CliRun r = build(qdir, tmp_ + "/e8", "");
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("fp8 projections, scales from checkpoint: modelopt, per-tensor"), std::string::npos) << r.out;
  auto info = read_engine_info(tmp_ + "/e8");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->quant, "fp8");
  EXPECT_NE(info->quant_scales.find("checkpoint: modelopt, per-tensor weight scales"), std::string::npos) << info->quant_scales;
  EXPECT_NE(info->quant_scales.find(qdir + "/config.json"), std::string::npos) << info->quant_scales;
  r = build(fdir, tmp_ + "/e32", "");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_GE(greedy_agreement(tmp_ + "/e8", tmp_ + "/e32", tmp_, "build-llm of an FP8 checkpoint vs the float original's engine"),
            3u);
  const std::string ids = " --prompt-ids 72,105,33,32 --max-new-tokens 8 --ignore-eos --json";
  // The checkpoint itself generates on the CPU reference (weights dequantized).
  CliRun ref = run("kiln_llm_generate", qdir + ids, tmp_);
  ASSERT_EQ(ref.rc, 0) << ref.err;
  EXPECT_EQ(json::parse(ref.out)["tokens"].size(), 8u);
  EXPECT_NE(info->quant_scales.find("one scale per fused q/k/v and gate/up layer"), std::string::npos) << info->quant_scales;
  r = build(qdir, tmp_ + "/e8b", "--quant fp8 --weight-scales per-channel");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto kept = read_engine_info(tmp_ + "/e8b");
  ASSERT_TRUE(kept.ok());
  EXPECT_NE(kept->quant_scales.find("weights as stored"), std::string::npos) << kept->quant_scales;
  r = build(qdir, tmp_ + "/e8c", "--quant fp8 --calib-ids 1,2,3");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("carries its FP8 scales"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(qdir), std::string::npos) << r.err;
  r = build(qdir, tmp_ + "/e8c", "--calib-ids 1,2,3");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("drop the calibration flags"), std::string::npos) << r.err;

  // --kv-cache fp8: the checkpoint's own KV-cache scales when it carries them (k 0.5, v 0.25 in
  // every layer's PagedAttention), else 1.
  testing::Fp8Export kvx;
  kvx.kv_scales = true;
  const std::string kvdir = tmp_ + "/fp8kv";
  testing::write_fp8_checkpoint(kvdir, c.dump(), testing::fp8_tensors(weights, testing::fp8_input_scales(*float_ck), kvx), kvx);
  testing::write_file(kvdir + "/tokenizer.json", byte_tokenizer_json());
  for (const auto& [dir, want] : {std::pair{kvdir, std::string("checkpoint: self_attn k / v scales")},
                                  std::pair{qdir, std::string("1 for every layer")}}) {
    r = build(dir, tmp_ + "/ekv", "--kv-cache fp8");
    ASSERT_EQ(r.rc, 0) << r.err << r.out;
    auto kv = read_engine_info(tmp_ + "/ekv");
    ASSERT_TRUE(kv.ok()) << kv.status().to_string();
    EXPECT_NE(kv->kv_cache_scales.find(want), std::string::npos) << kv->kv_cache_scales;
    auto engine = Runtime::load_engine(tmp_ + "/ekv/" + kv->plan_file);
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    int paged = 0;
    for (const ir::Node& n : engine_impl(**engine).graph.nodes) {
      if (n.op != ir::OpKind::kPagedAttention) continue;
      ++paged;
      EXPECT_EQ(n.attr_float("k_scale", 0), dir == kvdir ? 0.5f : 1.f) << n.name;
      EXPECT_EQ(n.attr_float("v_scale", 0), dir == kvdir ? 0.25f : 1.f) << n.name;
    }
    EXPECT_EQ(paged, c["num_hidden_layers"].get<int>());
    std::filesystem::remove_all(tmp_ + "/ekv");
  }
}

}  // namespace
}  // namespace kiln::llm
