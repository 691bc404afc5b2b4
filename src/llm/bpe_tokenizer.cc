// tokenizer.json parsing and the byte-level BPE pipeline (see bpe_tokenizer.h).
#include "llm/bpe_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "llm/unicode.h"

namespace kiln::llm {

using nlohmann::json;

namespace {

constexpr size_t kMaxCacheEntries = 1 << 16;
// Largest token id accepted (real vocabularies: <= 262,144); the id table is allocated up front.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

// GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order, so every byte is one visible character.
std::array<char32_t, 256> bytes_to_unicode() {
  std::array<char32_t, 256> m{};
  std::array<bool, 256> direct{};
  for (int b = '!'; b <= '~'; ++b) direct[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) m[b] = direct[b] ? static_cast<char32_t>(b) : next++;
  return m;
}

std::string type_of(const json& j) { return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : ""; }

bool flag(const json& j, const char* key, bool def) {
  return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : def;
}

}  // namespace

StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::from_json(const std::string& text, const std::string& where) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_model(where + ": not a JSON object");
  if (!j.contains("model") || !j["model"].is_object()) return invalid_model(where + ": no 'model' object");
  const json& m = j["model"];
  const std::string mtype = type_of(m).empty() && m.contains("merges") ? "BPE" : type_of(m);
  if (mtype != "BPE")
    return unsupported(where + ": model type '" + mtype + "' is not supported (byte-level BPE is; SentencePiece models load from tokenizer.model)");
  auto nonempty_string = [&](const char* k) { return m.contains(k) && m[k].is_string() && !m[k].get<std::string>().empty(); };
  if (m.contains("dropout") && m["dropout"].is_number() && m["dropout"].get<double>() > 0)
    return unsupported(where + ": BPE dropout is not supported");
  if (nonempty_string("continuing_subword_prefix") || nonempty_string("end_of_word_suffix"))
    return unsupported(where + ": BPE continuing_subword_prefix / end_of_word_suffix are not supported (byte-level BPE has none)");
  if (flag(m, "byte_fallback", false))
    return unsupported(where + ": BPE byte_fallback (SentencePiece-style BPE) is not supported; load the checkpoint's tokenizer.model");

  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());
  t->ignore_merges_ = flag(m, "ignore_merges", false);

  // Vocabulary.
  if (!m.contains("vocab") || !m["vocab"].is_object()) return invalid_model(where + ": model.vocab is not an object");
  int64_t max_id = -1;
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > kMaxTokenId)
      return invalid_model(where + ": vocab entry '" + it.key() + "' has id " + it.value().dump() + ", expected 0.." +
                           std::to_string(kMaxTokenId));
    const int32_t id = it.value().get<int32_t>();
    t->vocab_[it.key()] = id;
    max_id = std::max<int64_t>(max_id, id);
  }
  // Added tokens (ids may lie past the model's vocabulary: Llama 3's specials are 128000..).
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) return invalid_model(where + ": added_tokens is not a list");
    for (const json& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") || !a["content"].is_string())
        return invalid_model(where + ": an added token lacks an integer 'id' or a string 'content': " + a.dump());
      const int64_t id = a["id"].get<int64_t>();
      AddedToken at;
      at.content = a["content"].get<std::string>();
      auto u = utf8_decode(at.content);
      if (!u.ok()) return invalid_model(where + ": added token " + std::to_string(id) + ": " + u.status().message());
      at.content32 = std::move(*u);
      if (id < 0 || id > kMaxTokenId)
        return invalid_model(where + ": added token '" + at.content + "' has id " + std::to_string(id) + ", expected 0.." +
                             std::to_string(kMaxTokenId));
      if (at.content.empty()) return invalid_model(where + ": added token " + std::to_string(id) + " has empty content");
      if (flag(a, "single_word", false))
        return unsupported(where + ": added token '" + at.content + "' has single_word, which is not supported");
      at.id = static_cast<int32_t>(id);
      at.special = flag(a, "special", false);
      at.lstrip = flag(a, "lstrip", false);
      at.rstrip = flag(a, "rstrip", false);
      max_id = std::max<int64_t>(max_id, id);
      t->added_.push_back(std::move(at));
    }
  }
  t->id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  t->is_special_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [tok, id] : t->vocab_) {
    if (!t->id_to_token_[id].empty())
      return invalid_model(where + ": vocab tokens '" + t->id_to_token_[id] + "' and '" + tok + "' share id " + std::to_string(id));
    t->id_to_token_[id] = tok;
  }
  for (const AddedToken& a : t->added_) {
    t->id_to_token_[a.id] = a.content;
    t->is_special_[a.id] = a.special;
  }
  std::stable_sort(t->added_.begin(), t->added_.end(), [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  for (size_t k = 0; k < t->added_.size(); ++k) t->added_by_first_[t->added_[k].content32[0]].push_back(k);

  // Byte alphabet: every byte's character must be a token, or some text could not be encoded.
  const auto b2u = bytes_to_unicode();
  for (int b = 0; b < 256; ++b) {
    t->byte_char_[b] = utf8_encode(std::u32string(1, b2u[b]));
    t->char_byte_[b2u[b]] = static_cast<uint8_t>(b);
    auto it = t->vocab_.find(t->byte_char_[b]);
    if (it == t->vocab_.end()) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      return unsupported(where + ": the vocabulary has no token for byte " + std::string(hex) + " ('" + t->byte_char_[b] +
                         "'): not a byte-level BPE vocabulary");
    }
    t->byte_id_[b] = it->second;
  }
  // ByteLevel decoder, per id: a token made only of byte characters is those bytes; any other
  // (an added token with characters outside the byte alphabet) is its own UTF-8.
  t->decoded_.resize(t->id_to_token_.size());
  for (size_t id = 0; id < t->id_to_token_.size(); ++id) {
    const std::string& tok = t->id_to_token_[id];
    auto chars = utf8_decode(tok);  // JSON strings are valid UTF-8; checked all the same
    if (!chars.ok()) return invalid_model(where + ": token " + std::to_string(id) + ": " + chars.status().message());
    std::string bytes;
    bool all = true;
    for (char32_t c : *chars) {
      auto it = t->char_byte_.find(c);
      if (it == t->char_byte_.end()) {
        all = false;
        break;
      }
      bytes.push_back(static_cast<char>(it->second));
    }
    t->decoded_[id] = all ? bytes : tok;
  }
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    auto it = t->vocab_.find(m["unk_token"].get<std::string>());
    if (it != t->vocab_.end()) t->unk_id_ = it->second;
  }

  // Merges: "a b" strings (tokenizers < 0.20) or [a, b] lists; rank = position.
  if (!m.contains("merges") || !m["merges"].is_array()) return invalid_model(where + ": model.merges is not a list");
  const json& merges = m["merges"];
  t->merges_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const json& e = merges[r];
    std::string a, b;
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return invalid_model(where + ": merge " + std::to_string(r) + " '" + s + "' is not two tokens separated by one space");
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>(), b = e[1].get<std::string>();
    } else {
      return invalid_model(where + ": merge " + std::to_string(r) + " is " + e.dump() + ", expected \"a b\" or [\"a\", \"b\"]");
    }
    auto ia = t->vocab_.find(a), ib = t->vocab_.find(b), iab = t->vocab_.find(a + b);
    for (const auto& [it, name] : {std::pair{ia, a}, std::pair{ib, b}, std::pair{iab, a + b}})
      if (it == t->vocab_.end())
        return invalid_model(where + ": merge " + std::to_string(r) + " ('" + a + "' '" + b + "') uses '" + name + "', which is not in the vocabulary");
    const uint64_t key = (static_cast<uint64_t>(ia->second) << 32) | static_cast<uint32_t>(ib->second);
    t->merges_.emplace(key, Merge{static_cast<int32_t>(r), iab->second});  // a repeated pair keeps its first rank
  }

  // Normalizer.
  if (j.contains("normalizer") && !j["normalizer"].is_null()) {
    const std::string n = type_of(j["normalizer"]);
    if (n == "NFC" && !have_nfc())
      return unsupported(where + ": the NFC normalizer needs ICU, and this Kiln was built without it "
                                 "(install Debian's libicu-dev and re-run cmake)");
    if (n == "NFC") t->nfc_ = true;
    else if (!(n == "Sequence" && j["normalizer"].contains("normalizers") && j["normalizer"]["normalizers"].empty()))
      return unsupported(where + ": normalizer '" + n + "' is not supported (none and NFC are)");
  }

  // Pre-tokenizer: [Split(known regex)] then ByteLevel.
  if (!j.contains("pre_tokenizer") || j["pre_tokenizer"].is_null())
    return unsupported(where + ": no pre_tokenizer; byte-level BPE needs a ByteLevel pre-tokenizer");
  std::vector<const json*> steps;
  const json& pt = j["pre_tokenizer"];
  if (type_of(pt) == "Sequence" && pt.contains("pretokenizers") && pt["pretokenizers"].is_array()) {
    for (const json& s : pt["pretokenizers"]) steps.push_back(&s);
  } else {
    steps.push_back(&pt);
  }
  bool byte_level = false;
  for (const json* s : steps) {
    const std::string st = type_of(*s);
    if (st == "ByteLevel" && !byte_level) {
      byte_level = true;
      t->add_prefix_space_ = flag(*s, "add_prefix_space", true);
      t->byte_level_regex_ = flag(*s, "use_regex", true);
    } else if (st == "Split" && !byte_level && !t->split_) {
      const json& p = (*s).contains("pattern") ? (*s)["pattern"] : json();
      if (!p.is_object() || !p.contains("Regex") || !p["Regex"].is_string())
        return unsupported(where + ": Split pre-tokenizer without a regex pattern is not supported");
      const std::string re = p["Regex"].get<std::string>();
      t->split_ = split_pattern_from_regex(re);
      if (!t->split_)
        return unsupported(where + ": Split pre-tokenizer regex '" + re + "' is not one Kiln implements (GPT-2's, Llama 3's, Qwen2's)");
      const std::string behavior = s->contains("behavior") && (*s)["behavior"].is_string() ? (*s)["behavior"].get<std::string>() : "";
      if (behavior != "Isolated" || flag(*s, "invert", false))
        return unsupported(where + ": Split pre-tokenizer with behavior '" + behavior + "'" + (flag(*s, "invert", false) ? " inverted" : "") +
                           " is not supported (Isolated is)");
    } else {
      return unsupported(where + ": pre-tokenizer '" + st + "' here is not supported (ByteLevel, optionally after one Split, is)");
    }
  }
  if (!byte_level) return unsupported(where + ": the pre-tokenizer has no ByteLevel step; only byte-level BPE is supported");

  // Post-processor: what add_special_tokens puts around one sequence.
  std::vector<const json*> post;
  if (j.contains("post_processor") && !j["post_processor"].is_null()) {
    const json& pp = j["post_processor"];
    if (type_of(pp) == "Sequence" && pp.contains("processors") && pp["processors"].is_array()) {
      for (const json& p : pp["processors"]) post.push_back(&p);
    } else {
      post.push_back(&pp);
    }
  }
  for (const json* p : post) {
    const std::string pt2 = type_of(*p);
    if (pt2 == "ByteLevel") continue;  // offsets only
    if (pt2 != "TemplateProcessing") return unsupported(where + ": post-processor '" + pt2 + "' is not supported (ByteLevel, TemplateProcessing are)");
    if (!p->contains("single") || !(*p)["single"].is_array()) return invalid_model(where + ": TemplateProcessing has no 'single' template");
    bool after = false;
    for (const json& item : (*p)["single"]) {
      if (item.contains("Sequence")) {
        after = true;
        continue;
      }
      if (!item.contains("SpecialToken") || !item["SpecialToken"].contains("id") || !item["SpecialToken"]["id"].is_string())
        return invalid_model(where + ": TemplateProcessing item " + item.dump() + " is neither a Sequence nor a SpecialToken");
      const std::string name = item["SpecialToken"]["id"].get<std::string>();
      const json* sp = p->contains("special_tokens") && (*p)["special_tokens"].contains(name) ? &(*p)["special_tokens"][name] : nullptr;
      if (!sp || !sp->contains("ids") || !(*sp)["ids"].is_array())
        return invalid_model(where + ": TemplateProcessing names special token '" + name + "' without its ids");
      for (const json& id : (*sp)["ids"]) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > max_id)
          return invalid_model(where + ": TemplateProcessing token '" + name + "' has id " + id.dump() + " outside the vocabulary");
        (after ? t->suffix_ids_ : t->prefix_ids_).push_back(id.get<int32_t>());
      }
    }
  }

  // Decoder.
  if (!j.contains("decoder") || type_of(j["decoder"]) != "ByteLevel")
    return unsupported(where + ": decoder '" + (j.contains("decoder") ? type_of(j["decoder"]) : std::string("null")) +
                       "' is not supported (ByteLevel is)");
  return t;
}

std::optional<int32_t> BpeTokenizer::token_to_id(std::string_view token) const {
  for (const AddedToken& a : added_)
    if (a.content == token) return a.id;
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::string BpeTokenizer::id_to_token(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < id_to_token_.size() ? id_to_token_[id] : std::string();
}

void BpeTokenizer::bpe(const std::string& bytes, std::vector<int32_t>* out) const {
  std::vector<int32_t> sym;
  sym.reserve(bytes.size());
  for (unsigned char b : bytes) sym.push_back(byte_id_[b]);
  auto lookup = [&](int32_t a, int32_t b) -> const Merge* {
    auto it = merges_.find((static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  std::vector<int32_t> next;
  while (sym.size() > 1) {
    const Merge* best = nullptr;
    int32_t left = 0, right = 0;
    for (size_t k = 0; k + 1 < sym.size(); ++k) {
      const Merge* mg = lookup(sym[k], sym[k + 1]);
      if (mg && (!best || mg->rank < best->rank)) best = mg, left = sym[k], right = sym[k + 1];
    }
    if (!best) break;
    next.clear();
    for (size_t k = 0; k < sym.size();) {
      if (k + 1 < sym.size() && sym[k] == left && sym[k + 1] == right) {
        next.push_back(best->merged);
        k += 2;
      } else {
        next.push_back(sym[k++]);
      }
    }
    sym.swap(next);
  }
  out->insert(out->end(), sym.begin(), sym.end());
}

void BpeTokenizer::encode_piece(const std::string& bytes, std::vector<int32_t>* out) const {
  if (bytes.empty()) return;
  if (ignore_merges_) {
    std::string mapped;
    for (unsigned char b : bytes) mapped += byte_char_[b];
    auto it = vocab_.find(mapped);
    if (it != vocab_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(bytes);
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  bpe(bytes, &ids);
  out->insert(out->end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(bytes, std::move(ids));
}

namespace {

// Refines each piece with `pattern`.
std::vector<std::u32string> refine(const std::vector<std::u32string>& pieces, SplitPattern pattern) {
  std::vector<std::u32string> out;
  for (const std::u32string& p : pieces)
    for (const auto& [b, e] : split_pretokens(pattern, p)) out.push_back(p.substr(b, e - b));
  return out;
}

}  // namespace

std::vector<std::u32string> BpeTokenizer::pieces(std::u32string_view text) const {
  std::vector<std::u32string> out{nfc_ ? nfc(text) : std::u32string(text)};
  if (split_) out = refine(out, *split_);
  // ByteLevel: the prefix space goes on every piece that reaches it (tokenizers' ByteLevel
  // pre_tokenize), then GPT-2's regex when use_regex.
  if (add_prefix_space_)
    for (std::u32string& p : out)
      if (p.empty() || p[0] != U' ') p.insert(p.begin(), U' ');
  if (byte_level_regex_) out = refine(out, SplitPattern::kGpt2);
  return out;
}

void BpeTokenizer::encode_text(std::u32string_view text, std::vector<int32_t>* out) const {
  if (text.empty()) return;
  for (const std::u32string& p : pieces(text)) encode_piece(utf8_encode(p), out);
}

StatusOr<std::vector<std::string>> BpeTokenizer::pretokenize(std::string_view text) const {
  KILN_ASSIGN_OR_RETURN(std::u32string u, utf8_decode(text));
  std::vector<std::string> out;
  if (u.empty()) return out;
  for (const auto& p : pieces(u)) out.push_back(utf8_encode(p));
  return out;
}

StatusOr<std::vector<int32_t>> BpeTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  KILN_ASSIGN_OR_RETURN(std::u32string u, utf8_decode(text));
  std::vector<int32_t> ids;
  if (options.add_special_tokens) ids = prefix_ids_;
  // Added tokens: at each position the longest one whose text starts there (leftmost-longest).
  size_t seg = 0, i = 0;
  while (i < u.size()) {
    const AddedToken* hit = nullptr;
    size_t len = 0;
    auto cands = added_by_first_.find(u[i]);
    if (cands != added_by_first_.end())
      for (size_t k : cands->second) {  // longest first
        if (added_[k].special && !options.parse_special) continue;
        const std::u32string& c = added_[k].content32;
        if (u.compare(i, c.size(), c) == 0) {
          hit = &added_[k], len = c.size();
          break;
        }
      }
    if (!hit) {
      ++i;
      continue;
    }
    size_t seg_end = i;
    if (hit->lstrip)
      while (seg_end > seg && is_whitespace(u[seg_end - 1])) --seg_end;
    encode_text(std::u32string_view(u).substr(seg, seg_end - seg), &ids);
    ids.push_back(hit->id);
    i += len;
    if (hit->rstrip)
      while (i < u.size() && is_whitespace(u[i])) ++i;
    seg = i;
  }
  encode_text(std::u32string_view(u).substr(seg), &ids);
  if (options.add_special_tokens) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

StatusOr<std::string> BpeTokenizer::decode(const std::vector<int32_t>& ids, const DecodeOptions& options) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || id_to_token_[id].empty())
      return invalid_argument("token id " + std::to_string(id) + " is not in the vocabulary (" + std::to_string(vocab_size()) + " ids)");
    if (options.skip_special_tokens && is_special_[id]) continue;
    out += decoded_[id];
  }
  return out;
}

}  // namespace kiln::llm
