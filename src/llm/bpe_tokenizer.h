// Byte-level BPE from a Hugging Face tokenizer.json (the `tokenizers` library's format): the
// pipeline is added-token splitting -> normalizer (none or NFC) -> pre-tokenizer (ByteLevel with
// GPT-2's regex, or Split with Llama 3's / Qwen2's regex followed by ByteLevel without one; see
// pretokenizer.h) -> BPE on the bytes of each piece, mapped to printable characters as GPT-2's
// bytes_to_unicode does (Radford et al. 2019, encoder.py) -> post-processor (TemplateProcessing's
// "single" template: Llama 3's <|begin_of_text|>). Decoding is the ByteLevel decoder.
// BPE merges: the lowest-ranked adjacent pair first, all its occurrences left to right, until no
// ranked pair is left; with `ignore_merges` (Llama 3) a piece that is itself a vocabulary token
// is that token.
#pragma once

#include <array>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "llm/pretokenizer.h"
#include "llm/tokenizer.h"

namespace kiln::llm {

class BpeTokenizer final : public Tokenizer {
 public:
  // Parses tokenizer.json's text; `where` names the file in errors. Unsupported for a model type
  // other than BPE, a normalizer other than null/NFC, a pre-tokenizer or Split regex other than
  // those above, a decoder other than ByteLevel, BPE dropout, byte fallback or subword
  // prefixes/suffixes; InvalidModel for malformed vocab, merges (either "a b" strings or [a, b]
  // lists) naming tokens outside the vocabulary, or added tokens with bad ids.
  static StatusOr<std::unique_ptr<BpeTokenizer>> from_json(const std::string& json_text, const std::string& where);

  StatusOr<std::vector<int32_t>> encode(std::string_view text, const EncodeOptions& options = {}) const override;
  StatusOr<std::string> decode(const std::vector<int32_t>& ids, const DecodeOptions& options = {}) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_token_.size()); }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;
  const char* kind() const override { return "bpe"; }

  // The pre-tokenizer pieces of `text` (before byte mapping), for tests and debugging.
  StatusOr<std::vector<std::string>> pretokenize(std::string_view text) const;

 private:
  struct AddedToken {
    std::string content;
    std::u32string content32;  // content as code points
    int32_t id = 0;
    bool special = false;
    bool lstrip = false, rstrip = false;
  };
  struct Merge {
    int32_t rank;
    int32_t merged;
  };

  BpeTokenizer() = default;
  void encode_piece(const std::string& bytes, std::vector<int32_t>* out) const;
  void bpe(const std::string& bytes, std::vector<int32_t>* out) const;
  void encode_text(std::u32string_view text, std::vector<int32_t>* out) const;
  // Normalizer and pre-tokenizer: the pieces BPE runs on, in order.
  std::vector<std::u32string> pieces(std::u32string_view text) const;

  std::unordered_map<std::string, int32_t> vocab_;  // token (byte-mapped UTF-8) -> id
  std::vector<std::string> id_to_token_;            // "" for unused ids
  std::vector<std::string> decoded_;                // by id: the bytes the ByteLevel decoder gives
  std::vector<bool> is_special_;                    // by id
  std::unordered_map<uint64_t, Merge> merges_;      // (left id << 32 | right id) -> rank, result
  std::array<int32_t, 256> byte_id_{};              // id of each byte's single-character token, -1 if none
  std::array<std::string, 256> byte_char_;          // bytes_to_unicode, UTF-8
  std::unordered_map<char32_t, uint8_t> char_byte_; // its inverse
  std::vector<AddedToken> added_;                   // longest content first
  std::unordered_map<char32_t, std::vector<size_t>> added_by_first_;  // first code point -> indices into added_
  bool ignore_merges_ = false;
  bool nfc_ = false;
  std::optional<SplitPattern> split_;  // a Split pre-tokenizer before ByteLevel
  bool byte_level_regex_ = true;       // ByteLevel's own use_regex (GPT-2's pattern)
  bool add_prefix_space_ = false;
  std::vector<int32_t> prefix_ids_, suffix_ids_;  // post-processor's single template
  std::optional<int32_t> unk_id_;

  // Pieces seen before (bounded); encode() is const and may run on several threads.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace kiln::llm
