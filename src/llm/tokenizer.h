// Tokenizers of Hugging Face checkpoints (issue 13, item 2): text <-> token ids.
//   tokenizer.json with a byte-level BPE model (GPT-2, Llama 3, Qwen2): BpeTokenizer
//     (bpe_tokenizer.h), Kiln's own implementation of Hugging Face tokenizers' pipeline.
//   tokenizer.model (SentencePiece, Llama 2): through libsentencepiece (Debian
//     libsentencepiece-dev), in the separate target kiln_llm_sentencepiece
//     (sentencepiece_tokenizer.h says why).
// docs/decisions/0048-llm-checkpoints-and-tokenizers.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/status.h"

namespace kiln::llm {

struct EncodeOptions {
  // Add what the tokenizer's post-processor (tokenizer.json's TemplateProcessing "single"
  // template; SentencePiece's add_bos) puts around a sequence: Llama's BOS. GPT-2 adds nothing.
  bool add_special_tokens = true;
  // Match the added/special tokens' text ("<|eot_id|>") in the input as single tokens (Hugging
  // Face's default). false: special tokens' text is encoded as ordinary text (added tokens that
  // are not special still match).
  bool parse_special = true;
};

struct DecodeOptions {
  bool skip_special_tokens = false;  // drop special tokens' text (Hugging Face's option)
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids of `text` (UTF-8; malformed UTF-8 is InvalidArgument naming the byte offset).
  virtual StatusOr<std::vector<int32_t>> encode(std::string_view text, const EncodeOptions& options = {}) const = 0;
  // The bytes the ids stand for. Byte-level tokens may end inside a UTF-8 sequence, so a prefix
  // of a sequence's ids can decode to incomplete UTF-8 (a streaming caller holds back the tail);
  // the whole sequence of an encode() decodes to the text exactly. An id outside the vocabulary
  // is InvalidArgument naming it.
  virtual StatusOr<std::string> decode(const std::vector<int32_t>& ids, const DecodeOptions& options = {}) const = 0;
  // One more than the largest id (added tokens included).
  virtual int64_t vocab_size() const = 0;
  // The id of a token (in the vocabulary's own spelling: "Ġthe", "▁the", "<|eot_id|>").
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  // The token of an id ("" outside the vocabulary).
  virtual std::string id_to_token(int32_t id) const = 0;
  virtual const char* kind() const = 0;  // "bpe" or "sentencepiece"
};

// The tokenizer of a checkpoint directory: tokenizer.json when present and supported, else
// tokenizer.model (Llama 2 and Mistral ship a byte-fallback tokenizer.json beside it);
// NotFound when neither is there, Unsupported for a tokenizer.json model type or component Kiln
// does not implement (naming it) or a tokenizer.model in a build without SentencePiece.
StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& dir);

// tokenizer.json (BpeTokenizer::from_json) and tokenizer.model files by path. tokenizer.model
// needs a SentencePiece loader (sentencepiece_tokenizer.h's register_sentencepiece(), in programs
// that link kiln_llm_sentencepiece); without one it is Unsupported, saying so.
StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer_json(const std::string& path);
StatusOr<std::unique_ptr<Tokenizer>> load_sentencepiece(const std::string& path);

using SentencePieceLoader = StatusOr<std::unique_ptr<Tokenizer>> (*)(const std::string& path);
// Set once at start-up, before tokenizers load (not synchronized with loads in flight).
void set_sentencepiece_loader(SentencePieceLoader loader);
bool have_sentencepiece();  // a loader is set

}  // namespace kiln::llm
