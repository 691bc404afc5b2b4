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
using testing::byte_tokenizer_json;
using testing::CliRun;
using testing::slurp;

CliRun generate_cli(const std::string& args, const std::string& tmp) { return testing::run_tool("kiln_llm_generate", args, tmp); }

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
