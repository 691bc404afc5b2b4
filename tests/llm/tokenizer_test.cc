// Byte-level BPE on a tiny hand-made vocabulary with known merges, the pre-tokenizer splits
// worked out by hand from their regexes, special tokens, decode and the refusals (SentencePiece:
// tests/llm_sentencepiece/, its own binary). (The real vocabularies are checked against npm's reference tokenizers
// by scripts/check_tokenizers.sh, ctest llm.tokenizers_vs_npm.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "llm/bpe_tokenizer.h"
#include "llm/llm_test_util.h"
#include "llm/pretokenizer.h"
#include "llm/tokenizer.h"
#include "llm/unicode.h"

namespace kiln::llm {
namespace {

using nlohmann::json;

// GPT-2's byte -> character table, written out independently: printable bytes stand for
// themselves, the rest take U+0100.. in byte order (so ' ' is U+0120 'Ġ', '\n' is U+010A 'Ċ').
std::string byte_char(unsigned b) {
  const bool direct = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
  unsigned cp = b;
  if (!direct) {
    unsigned n = 0;
    for (unsigned k = 0; k < b; ++k)
      if (!((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || (k >= 0xAE))) ++n;
    cp = 256 + n;
  }
  std::string s;
  utf8_append(static_cast<char32_t>(cp), &s);
  return s;
}

// Byte tokens are ids 0..255 (by byte); merged tokens follow in `merges` order.
json tiny_tokenizer(const std::vector<std::pair<std::string, std::string>>& merges, bool list_form) {
  json vocab = json::object();
  for (unsigned b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  json m = json::array();
  int next = 256;
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
    if (list_form) m.push_back({a, b});
    else m.push_back(a + " " + b);
  }
  return json{{"version", "1.0"},
              {"added_tokens", json::array({{{"id", 1000}, {"content", "<|endoftext|>"}, {"special", true}},
                                            {{"id", 1001}, {"content", "<|end|>"}, {"special", true}},
                                            {{"id", 1002}, {"content", "[sep]"}, {"special", false}, {"lstrip", true}}})},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
              {"post_processor", {{"type", "ByteLevel"}}},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}, {"dropout", nullptr}, {"unk_token", nullptr}}}};
}

std::unique_ptr<BpeTokenizer> load(const json& j) {
  auto t = BpeTokenizer::from_json(j.dump(), "tokenizer.json");
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::move(*t) : nullptr;
}

std::vector<int32_t> enc(const Tokenizer& t, const std::string& s, EncodeOptions o = {}) {
  auto r = t.encode(s, o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : std::vector<int32_t>{};
}

int32_t id(const Tokenizer& t, const std::string& tok) {
  auto i = t.token_to_id(tok);
  EXPECT_TRUE(i.has_value()) << tok;
  return i.value_or(-1);
}

const std::string G = byte_char(' ');  // "Ġ"

TEST(BpeTokenizer, MergesInRankOrder) {
  // "abc": with (b,c) ranked first the result is a|bc; with (a,b) first it is ab|c.
  auto bc_first = load(tiny_tokenizer({{"b", "c"}, {"a", "b"}}, /*list_form=*/false));
  auto ab_first = load(tiny_tokenizer({{"a", "b"}, {"b", "c"}}, /*list_form=*/true));
  ASSERT_TRUE(bc_first && ab_first);
  EXPECT_EQ(enc(*bc_first, "abc"), (std::vector<int32_t>{'a', id(*bc_first, "bc")}));
  EXPECT_EQ(enc(*ab_first, "abc"), (std::vector<int32_t>{id(*ab_first, "ab"), 'c'}));
  // All occurrences of the best pair merge, left to right: "aaa" with (a,a) -> aa|a.
  auto aa = load(tiny_tokenizer({{"a", "a"}}, false));
  EXPECT_EQ(enc(*aa, "aaaa a"), (std::vector<int32_t>{id(*aa, "aa"), id(*aa, "aa"), ' ', 'a'}));
  EXPECT_EQ(enc(*aa, "aaa"), (std::vector<int32_t>{id(*aa, "aa"), 'a'}));
}

TEST(BpeTokenizer, WordsSpacesAndUnicode) {
  auto t = load(tiny_tokenizer({{"h", "e"}, {"l", "l"}, {"ll", "o"}, {"he", "llo"}, {G, "w"}, {"o", "r"}, {G + "w", "or"},
                                {"l", "d"}, {G + "wor", "ld"}},
                               false));
  ASSERT_TRUE(t);
  const int32_t hello = id(*t, "hello"), world = id(*t, G + "world");
  EXPECT_EQ(enc(*t, "hello world"), (std::vector<int32_t>{hello, world}));
  // Two spaces: the first stands alone (\s+(?!\S)), the second joins the word.
  EXPECT_EQ(enc(*t, "hello  world"), (std::vector<int32_t>{hello, ' ', world}));
  EXPECT_EQ(enc(*t, "hell"), (std::vector<int32_t>{id(*t, "he"), id(*t, "ll")}));
  // Unmerged non-ASCII text is its UTF-8 bytes: é = C3 A9.
  EXPECT_EQ(enc(*t, "é"), (std::vector<int32_t>{0xC3, 0xA9}));
  EXPECT_TRUE(enc(*t, "").empty());
  EXPECT_EQ(t->pretokenize("hello  world").value(), (std::vector<std::string>{"hello", " ", " world"}));
  // add_prefix_space: a space goes before text that does not start with one.
  json j = tiny_tokenizer({{G, "w"}}, false);
  j["pre_tokenizer"]["add_prefix_space"] = true;
  auto prefixed = load(j);
  EXPECT_EQ(enc(*prefixed, "w"), (std::vector<int32_t>{id(*prefixed, G + "w")}));
  EXPECT_EQ(enc(*prefixed, " w"), (std::vector<int32_t>{id(*prefixed, G + "w")}));
  for (const std::string s : {"hello  world\n\n\t x", "日本語 😀👍🏽 ¿qué?", "  ", "a'b 's 123  \r\n"}) {
    auto ids = enc(*t, s);
    auto back = t->decode(ids);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, s);
  }
  auto bad = t->encode(std::string("ab\xC3", 3));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("UTF-8"), std::string::npos);
}

TEST(BpeTokenizer, SpecialAndAddedTokens) {
  auto t = load(tiny_tokenizer({{"h", "i"}}, false));
  ASSERT_TRUE(t);
  const int32_t hi = id(*t, "hi");
  EXPECT_EQ(enc(*t, "hi<|endoftext|>hi"), (std::vector<int32_t>{hi, 1000, hi}));
  EXPECT_EQ(enc(*t, "<|end|><|endoftext|>"), (std::vector<int32_t>{1001, 1000}));  // longest match first
  // Not parsed: the special text is ordinary bytes ('<' '|' ...); the non-special added token
  // still matches, and its lstrip eats the spaces before it.
  EXPECT_EQ(enc(*t, "<|end|>", {.add_special_tokens = true, .parse_special = false}).size(), 7u);
  EXPECT_EQ(enc(*t, "hi  [sep]hi", {.add_special_tokens = true, .parse_special = false}), (std::vector<int32_t>{hi, 1002, hi}));
  auto d = t->decode({hi, 1000, hi});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, "hi<|endoftext|>hi");
  auto skipped = t->decode({hi, 1000, hi}, {.skip_special_tokens = true});
  EXPECT_EQ(*skipped, "hihi");
  EXPECT_EQ(t->vocab_size(), 1003);
  for (int32_t bad : {-1, 999, 1003}) {
    auto r = t->decode({bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("token id " + std::to_string(bad)), std::string::npos);
  }
}

TEST(BpeTokenizer, TemplateBosIgnoreMergesAndNfc) {
  json j = tiny_tokenizer({{"a", "b"}, {"c", "d"}, {"ab", "cd"}}, true);
  j["model"]["vocab"]["abc"] = 600;  // a vocabulary token no merge sequence produces
  j["model"]["ignore_merges"] = true;
  j["normalizer"] = {{"type", "NFC"}};
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "<|end|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                         {"special_tokens", {{"<|end|>", {{"id", "<|end|>"}, {"ids", {1001}}, {"tokens", {"<|end|>"}}}}}}};
  if (!have_nfc()) {
    auto refused = BpeTokenizer::from_json(j.dump(), "tokenizer.json");
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("NFC normalizer needs ICU"), std::string::npos);
    j["normalizer"] = nullptr;
  }
  auto t = load(j);
  ASSERT_TRUE(t);
  EXPECT_EQ(enc(*t, "abc"), (std::vector<int32_t>{1001, 600}));  // ignore_merges: the piece is a token
  EXPECT_EQ(enc(*t, "abcd", {.add_special_tokens = false}), (std::vector<int32_t>{id(*t, "abcd")}));
  // NFC: e + U+0301 becomes é (C3 A9) before the bytes are taken (or, built without ICU, the
  // NFC normalizer is refused by name).
  if (have_nfc()) {
    ASSERT_TRUE(t);
    EXPECT_EQ(enc(*t, "e\xCC\x81", {.add_special_tokens = false}), (std::vector<int32_t>{0xC3, 0xA9}));
  }
}

TEST(BpeTokenizer, Refusals) {
  auto expect = [](json j, StatusCode code, const std::string& fragment) {
    auto t = BpeTokenizer::from_json(j.dump(), "tok.json");
    ASSERT_FALSE(t.ok()) << fragment;
    EXPECT_EQ(t.status().code(), code) << t.status().to_string();
    EXPECT_NE(t.status().message().find(fragment), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find("tok.json"), std::string::npos);
  };
  const json base = tiny_tokenizer({{"a", "b"}}, false);
  json j = base;
  j["model"]["type"] = "WordPiece";
  expect(j, StatusCode::kUnsupported, "model type 'WordPiece'");
  j = base;
  j["model"]["type"] = "Unigram";
  expect(j, StatusCode::kUnsupported, "model type 'Unigram'");
  j = base;
  j["model"]["merges"].push_back("x yz");
  expect(j, StatusCode::kInvalidModel, "'yz', which is not in the vocabulary");
  j = base;
  j["model"]["merges"].push_back("a b c");
  expect(j, StatusCode::kInvalidModel, "not two tokens");
  j = base;
  j["model"]["vocab"].erase(byte_char(0x0A));
  expect(j, StatusCode::kUnsupported, "no token for byte 0x0A");
  j = base;
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "\\w+"}}}, {"behavior", "Isolated"}},
                                                                 {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  expect(j, StatusCode::kUnsupported, "regex '\\w+'");
  j = base;
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect(j, StatusCode::kUnsupported, "pre-tokenizer 'Whitespace'");
  j = base;
  j["normalizer"] = {{"type", "Lowercase"}};
  expect(j, StatusCode::kUnsupported, "normalizer 'Lowercase'");
  j = base;
  j["decoder"] = {{"type", "WordPiece"}};
  expect(j, StatusCode::kUnsupported, "decoder 'WordPiece'");
  j = base;
  j["model"]["byte_fallback"] = true;
  expect(j, StatusCode::kUnsupported, "byte_fallback");
  expect(json::array(), StatusCode::kInvalidModel, "not a JSON object");
  j = base;
  j["model"]["vocab"]["huge"] = 2000000000;  // would size the id table at 2e9 entries
  expect(j, StatusCode::kInvalidModel, "'huge' has id 2000000000");
}

std::vector<std::string> split(SplitPattern p, const std::string& s) {
  std::vector<std::string> out;
  const std::u32string u = utf8_decode(s).value();
  for (const auto& [b, e] : split_pretokens(p, u)) out.push_back(utf8_encode(u.substr(b, e - b)));
  return out;
}
using V = std::vector<std::string>;

TEST(Pretokenizer, Gpt2Regex) {
  EXPECT_EQ(split(SplitPattern::kGpt2, "Hello world's 123abc!!  x  "), (V{"Hello", " world", "'s", " 123", "abc", "!!", " ", " x", "  "}));
  EXPECT_EQ(split(SplitPattern::kGpt2, "I'M don't"), (V{"I", "'", "M", " don", "'t"}));  // case-sensitive contractions
  EXPECT_EQ(split(SplitPattern::kGpt2, "a\n\n b\t"), (V{"a", "\n\n", " b", "\t"}));
  EXPECT_EQ(split(SplitPattern::kGpt2, "x   !?"), (V{"x", "  ", " !?"}));
  EXPECT_EQ(split(SplitPattern::kGpt2, "日本語 ½² ٣"), (V{"日本語", " ½²", " ٣"}));  // No/Nd are \p{N}
  EXPECT_EQ(split(SplitPattern::kGpt2, "e\xCC\x81t\xC2\xA0" "a"), (V{"e", "\xCC\x81", "t", "\xC2\xA0", "a"}));  // Mn is neither L nor N; NBSP is \s
}

TEST(Pretokenizer, Llama3Regex) {
  EXPECT_EQ(split(SplitPattern::kLlama3, "I'M don'T 1234567 x"), (V{"I", "'M", " don", "'T", " ", "123", "456", "7", " x"}));
  EXPECT_EQ(split(SplitPattern::kLlama3, "hi!!\r\n\nthere  \n  x"), (V{"hi", "!!\r\n\n", "there", "  \n", " ", " x"}));
  EXPECT_EQ(split(SplitPattern::kLlama3, "(a) \tb"), (V{"(a", ")", " ", "\tb"}));  // [^\r\n\p{L}\p{N}]? takes one char
  EXPECT_EQ(split(SplitPattern::kLlama3, "it'\xC5\xBF" "a"), (V{"it", "'\xC5\xBF", "a"}));  // (?i) folds ſ to s: a contraction
  EXPECT_EQ(split(SplitPattern::kQwen2, "x 2024"), (V{"x", " ", "2", "0", "2", "4"}));
  EXPECT_EQ(split_pattern_from_regex(split_pattern_regex(SplitPattern::kLlama3)), SplitPattern::kLlama3);
  EXPECT_FALSE(split_pattern_from_regex("\\s+").has_value());
}

TEST(Unicode, ClassesAndUtf8) {
  EXPECT_TRUE(is_letter(U'é') && is_letter(U'日') && is_letter(U'ß') && !is_letter(U'1') && !is_letter(0x301));
  EXPECT_TRUE(is_number(U'٣') && is_number(U'½') && is_number(U'Ⅻ') && !is_number(U'a'));
  EXPECT_TRUE(is_whitespace(0x85) && is_whitespace(0x3000) && is_whitespace(0xA0) && !is_whitespace(0xFEFF) && !is_whitespace(0x200B));
  EXPECT_FALSE(utf8_decode("\xC0\x80").ok());          // overlong
  EXPECT_FALSE(utf8_decode("\xED\xA0\x80").ok());      // surrogate
  EXPECT_FALSE(utf8_decode("\xF4\x90\x80\x80").ok());  // past U+10FFFF
  EXPECT_EQ(utf8_encode(utf8_decode("a€😀").value()), "a€😀");
  if (have_nfc()) {
    EXPECT_EQ(nfc(U"e\u0301"), U"é");
  }
}

TEST(SentencePiece, WithoutALoaderSaysWhereItIs) {
  // kiln_tests links libprotobuf, so it never registers SentencePiece (tests/llm_sentencepiece/
  // has its own binary); the refusal must say what to do.
  ASSERT_FALSE(have_sentencepiece());
  const std::string dir = testing::make_temp_dir("spm");
  testing::write_file(dir + "/tokenizer.model", "any");
  auto t = load_tokenizer(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(t.status().message().find("register_sentencepiece"), std::string::npos) << t.status().message();
  std::filesystem::remove_all(dir);
}

TEST(LoadTokenizer, PicksFileOrSaysWhatIsMissing) {
  const std::string dir = testing::make_temp_dir("tok");
  auto none = load_tokenizer(dir);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("neither tokenizer.json nor tokenizer.model"), std::string::npos);
  testing::write_file(dir + "/tokenizer.json", tiny_tokenizer({{"a", "b"}}, false).dump());
  auto t = load_tokenizer(dir);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_STREQ((*t)->kind(), "bpe");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::llm
