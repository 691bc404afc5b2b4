// SentencePiece (tokenizer.model) through libsentencepiece, on a ModelProto the test encodes by
// hand. Its own binary, kiln_llm_sentencepiece_tests: libsentencepiece cannot share a process with
// libprotobuf, which kiln_tests links (src/llm/sentencepiece_tokenizer.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "llm/llm_test_util.h"
#include "llm/sentencepiece_tokenizer.h"
#include "llm/tokenizer.h"

namespace kiln::llm {
namespace {

using nlohmann::json;

std::vector<int32_t> enc(const Tokenizer& t, const std::string& s, EncodeOptions o = {}) {
  auto r = t.encode(s, o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : std::vector<int32_t>{};
}

// A SentencePiece BPE ModelProto (sentencepiece_model.proto) encoded by hand.
std::string pb_varint(uint64_t v) {
  std::string s;
  do {
    uint8_t b = v & 0x7F;
    v >>= 7;
    if (v) b |= 0x80;
    s.push_back(static_cast<char>(b));
  } while (v);
  return s;
}
std::string pb_len(int field, const std::string& b) { return pb_varint((field << 3) | 2) + pb_varint(b.size()) + b; }
std::string pb_int(int field, int64_t v) { return pb_varint(field << 3) + pb_varint(static_cast<uint64_t>(v)); }
std::string pb_float(int field, float f) {
  std::string s = pb_varint((field << 3) | 5);
  s.append(reinterpret_cast<const char*>(&f), 4);
  return s;
}

TEST(SentencePiece, LoadsEncodesDecodes) {
  register_sentencepiece();
  ASSERT_TRUE(have_sentencepiece());
  const std::string dir = testing::make_temp_dir("spm");
  std::string model;
  struct P {
    std::string piece;
    float score;
    int type;
  };
  std::vector<P> pieces = {{"<unk>", 0, 2}, {"<s>", 0, 3}, {"</s>", 0, 3}};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    pieces.push_back({hex, 0, 6});
  }
  for (const P& p : std::vector<P>{{"\xE2\x96\x81", -1, 1}, {"a", -2, 1}, {"b", -3, 1}, {"\xE2\x96\x81" "a", -4, 1},
                                   {"ab", -5, 1}, {"\xE2\x96\x81" "ab", -6, 1}})
    pieces.push_back(p);
  for (const P& p : pieces) model += pb_len(1, pb_len(1, p.piece) + pb_float(2, p.score) + pb_int(3, p.type));
  model += pb_len(2, pb_int(3, 2) + pb_int(4, pieces.size()) + pb_int(35, 1) + pb_int(40, 0) + pb_int(41, 1) + pb_int(42, 2) + pb_int(43, -1));
  model += pb_len(3, pb_len(1, "identity") + pb_int(3, 1) + pb_int(4, 0) + pb_int(5, 1));
  testing::write_file(dir + "/tokenizer.model", model);
  auto t = load_tokenizer(dir);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_STREQ((*t)->kind(), "sentencepiece");
  const int32_t uab = 259 + 5, ua = 259 + 3, b = 259 + 2;
  // "ab ab": dummy prefix, spaces as ▁: ▁ab ▁ab (highest-scored merges first: ▁a, then ▁ab).
  EXPECT_EQ(enc(**t, "ab ab"), (std::vector<int32_t>{1, uab, uab}));
  EXPECT_EQ(enc(**t, "a b", {.add_special_tokens = false}), (std::vector<int32_t>{ua, 259, b}));
  // A character outside the pieces falls back to its UTF-8 bytes: é = <0xC3> <0xA9>.
  EXPECT_EQ(enc(**t, "é", {.add_special_tokens = false}), (std::vector<int32_t>{259, 3 + 0xC3, 3 + 0xA9}));
  auto d = (*t)->decode(enc(**t, "ab é ba"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, "ab é ba");
  EXPECT_FALSE((*t)->decode({5000}).ok());
  testing::write_file(dir + "/tokenizer.model", "garbage");
  auto bad = load_tokenizer(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidModel);
  // Beside a tokenizer.json Kiln does not read (byte fallback, as Llama 2's), the model is used.
  testing::write_file(dir + "/tokenizer.model", model);
  json fallback = json{{"model", {{"type", "BPE"}, {"vocab", json::object()}, {"merges", json::array()}, {"byte_fallback", true}}}};
  testing::write_file(dir + "/tokenizer.json", fallback.dump());
  auto both = load_tokenizer(dir);
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  EXPECT_STREQ((*both)->kind(), "sentencepiece");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln::llm
