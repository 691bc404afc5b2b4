// kiln_llm_generate end to end in its own process (std::system): token ids and streamed text
// equal the in-process LlmCpuRunner's, --dump-logits equals its prompt logits, and bad usage or a
// bad checkpoint ends with a message and exit status 2 or 1 (scripts/llm_reference_hf.py relies
// on all of it).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "io/npy.h"
#include "llm/cpu_runner.h"
#include "llm/random_checkpoint.h"
#include "llm/tokenizer.h"

namespace kiln::llm {
namespace {

using nlohmann::json;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CliRun {
  int rc = -1;
  std::string out, err;
};

CliRun generate_cli(const std::string& args, const std::string& tmp) {
  const std::string cmd = std::string(KILN_BINARY_DIR) + "/kiln_llm_generate " + args + " >" + tmp + "/stdout 2>" + tmp + "/stderr";
  CliRun r;
  const int status = std::system(cmd.c_str());
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(tmp + "/stdout");
  r.err = slurp(tmp + "/stderr");
  return r;
}

// A byte-level tokenizer.json: ids 0..255 are the bytes (GPT-2's byte -> character table), no merges.
std::string byte_tokenizer_json() {
  json vocab = json::object();
  unsigned extra = 0;
  for (unsigned b = 0; b < 256; ++b) {
    const bool direct = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const char32_t cp = direct ? b : 256 + extra++;
    std::string s;
    if (cp < 0x80) s.push_back(static_cast<char>(cp));
    else s += {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    vocab[s] = b;
  }
  return json{{"version", "1.0"},
              {"added_tokens", json::array()},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
              {"post_processor", nullptr},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}, {"dropout", nullptr}, {"unk_token", nullptr}}}}
      .dump();
}

class LlmGenerateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("gencli");
    json c = json::parse(testing::tiny_gpt2_config());
    c["vocab_size"] = 260;  // the 256 byte tokens and a few more
    c["eos_token_id"] = 259;
    testing::write_checkpoint(dir_, c.dump(), testing::random_weights(c.dump(), 21));
    auto ck = Checkpoint::open(dir_);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    auto r = LlmCpuRunner::create(*ck);
    ASSERT_TRUE(r.ok());
    runner_ = std::move(*r);
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  std::vector<int32_t> reference(const std::vector<int32_t>& prompt, const GenerationOptions& o) {
    auto g = runner_->generate(prompt, o);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    if (!g.ok()) return {};
    return g->tokens;
  }
  std::string dir_;
  std::unique_ptr<LlmCpuRunner> runner_;
};

TEST_F(LlmGenerateCli, IdsJsonAndLogitsMatchTheRunner) {
  const std::string npy = dir_ + "/logits.npy";
  CliRun r = generate_cli(dir_ + " --prompt-ids 5,70,200 --max-new-tokens 7 --ignore-eos --json --dump-logits " + npy, dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  json j = json::parse(r.out);
  GenerationOptions o;
  o.max_new_tokens = 7;
  o.ignore_eos = true;
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), reference({5, 70, 200}, o));
  EXPECT_EQ(j["prompt_ids"].get<std::vector<int32_t>>(), (std::vector<int32_t>{5, 70, 200}));
  EXPECT_EQ(j["stop"], "max_new_tokens");
  auto logits = io::read_npy(npy);
  ASSERT_TRUE(logits.ok()) << logits.status().to_string();
  KvCache cache = runner_->empty_cache();
  auto want = runner_->forward({5, 70, 200}, &cache);
  ASSERT_TRUE(want.ok());
  EXPECT_TRUE(logits->bit_equal(want->reshaped({3, 260})));
  // Seeded sampling: the same tokens as in process.
  r = generate_cli(dir_ + " --prompt-ids 9 --max-new-tokens 12 --ignore-eos --json --temperature 1.3 --top-k 50 --top-p 0.9 --seed 77",
                   dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  o.max_new_tokens = 12;
  o.sampling = {1.3, 50, 0.9, 77};
  EXPECT_EQ(json::parse(r.out)["tokens"].get<std::vector<int32_t>>(), reference({9}, o));
}

TEST_F(LlmGenerateCli, StreamsTheDecodedText) {
  testing::write_file(dir_ + "/tokenizer.json", byte_tokenizer_json());
  auto tok = load_tokenizer(dir_);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  CliRun r = generate_cli(dir_ + " --prompt 'Hi!' --max-new-tokens 9", dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  GenerationOptions o;
  o.max_new_tokens = 9;
  const std::vector<int32_t> want = reference({'H', 'i', '!'}, o);
  auto text = (*tok)->decode(want);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(r.out, *text + "\n");
  EXPECT_NE(r.err.find("3 prompt tokens"), std::string::npos) << r.err;
}

TEST_F(LlmGenerateCli, UsageAndCheckpointErrors) {
  CliRun r = generate_cli(dir_, dir_);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--prompt"), std::string::npos) << r.err;
  r = generate_cli(dir_ + " --prompt-ids 1,x", dir_);
  EXPECT_EQ(r.rc, 2);
  r = generate_cli(dir_ + " --prompt hello", dir_);  // no tokenizer in the directory
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("tokenizer"), std::string::npos) << r.err;
  r = generate_cli(dir_ + " --prompt-ids 1,300", dir_);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("token id 300"), std::string::npos) << r.err;
  std::filesystem::remove(dir_ + "/model.safetensors");
  r = generate_cli(dir_ + " --prompt-ids 1", dir_);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("model.safetensors"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kiln::llm
