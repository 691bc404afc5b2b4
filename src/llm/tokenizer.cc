// Which tokenizer a checkpoint directory holds, and loading it by path.
#include "llm/tokenizer.h"

#include <sys/stat.h>

#include "llm/bpe_tokenizer.h"
#include "llm/model_config.h"

namespace kiln::llm {

StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer_json(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<BpeTokenizer> t, BpeTokenizer::from_json(text, "'" + path + "'"));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

namespace {
SentencePieceLoader g_sentencepiece_loader = nullptr;
}  // namespace

void set_sentencepiece_loader(SentencePieceLoader loader) { g_sentencepiece_loader = loader; }
bool have_sentencepiece() { return g_sentencepiece_loader != nullptr; }

StatusOr<std::unique_ptr<Tokenizer>> load_sentencepiece(const std::string& path) {
  if (!g_sentencepiece_loader)
    return unsupported("'" + path + "' is a SentencePiece model, and this program has no SentencePiece loader (it is in "
                       "kiln_llm_sentencepiece: build with Debian's libsentencepiece-dev, link that target and call "
                       "register_sentencepiece(); kiln_llm_tokenize does)");
  return g_sentencepiece_loader(path);
}

StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& dir) {
  struct stat st {};
  const std::string json_path = dir + "/tokenizer.json", model_path = dir + "/tokenizer.model";
  const bool has_model = ::stat(model_path.c_str(), &st) == 0;
  if (::stat(json_path.c_str(), &st) == 0) {
    auto t = load_tokenizer_json(json_path);
    // Llama 2 and Mistral ship both: their tokenizer.json (BPE with byte fallback, Metaspace) is
    // not one Kiln reads, their tokenizer.model is.
    if (t.ok() || t.status().code() != StatusCode::kUnsupported || !has_model) return t;
  }
  if (has_model) return load_sentencepiece(model_path);
  return not_found("'" + dir + "' has neither tokenizer.json nor tokenizer.model");
}

}  // namespace kiln::llm
