// The Tokenizer over libsentencepiece (target kiln_llm_sentencepiece; see the header for why it is
// a target of its own).
#include "llm/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include "llm/model_config.h"

namespace kiln::llm {

namespace {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp) : sp_(std::move(sp)) {}

  StatusOr<std::vector<int32_t>> encode(std::string_view text, const EncodeOptions& options) const override {
    std::vector<int> ids;
    const auto st = sp_->Encode(text, &ids);
    if (!st.ok()) return invalid_argument("SentencePiece encode: " + st.ToString());
    std::vector<int32_t> out;
    const int bos = sp_->bos_id();
    if (options.add_special_tokens && bos >= 0) out.push_back(bos);  // Llama 2: add_bos_token
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
  }

  StatusOr<std::string> decode(const std::vector<int32_t>& ids, const DecodeOptions& options) const override {
    std::vector<int> keep;
    for (int32_t id : ids) {
      if (id < 0 || id >= sp_->GetPieceSize())
        return invalid_argument("token id " + std::to_string(id) + " is not in the vocabulary (" + std::to_string(sp_->GetPieceSize()) + " ids)");
      // SentencePiece decodes control tokens (<s>, </s>) to nothing; skip_special_tokens changes nothing.
      keep.push_back(id);
    }
    std::string out;
    const auto st = sp_->Decode(keep, &out);
    if (!st.ok()) return invalid_argument("SentencePiece decode: " + st.ToString());
    return out;
  }

  int64_t vocab_size() const override { return sp_->GetPieceSize(); }
  std::optional<int32_t> token_to_id(std::string_view token) const override {
    const int id = sp_->PieceToId(token);
    if (id == sp_->unk_id() && token != sp_->IdToPiece(id)) return std::nullopt;
    return id;
  }
  std::string id_to_token(int32_t id) const override {
    return id >= 0 && id < sp_->GetPieceSize() ? sp_->IdToPiece(id) : std::string();
  }
  const char* kind() const override { return "sentencepiece"; }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> load_sentencepiece_model(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_text_file(path));
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto st = sp->LoadFromSerializedProto(bytes);
  if (!st.ok()) return invalid_model("'" + path + "': not a SentencePiece model: " + st.ToString());
  return std::unique_ptr<Tokenizer>(new SentencePieceTokenizer(std::move(sp)));
}

void register_sentencepiece() { set_sentencepiece_loader(&load_sentencepiece_model); }

}  // namespace kiln::llm
