// Hand-written matchers for the three pre-tokenizer regexes (see the header for the patterns).
// Each function returns the length of the match at position i, trying the alternatives in the
// regex's order; the comments give the alternative each block implements.
#include "llm/pretokenizer.h"

#include "llm/unicode.h"

namespace kiln::llm {

namespace {

constexpr const char* kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool is_other(char32_t c) { return !is_whitespace(c) && !is_letter(c) && !is_number(c); }  // [^\s\p{L}\p{N}]
bool is_crlf(char32_t c) { return c == '\r' || c == '\n'; }

// Case-insensitive equality under Unicode simple case folding, for the contraction letters
// only: s also matches ſ (U+017F LATIN SMALL LETTER LONG S), which folds to s; k (K, U+212A)
// is no contraction letter.
bool fold_eq(char32_t c, char lower) {
  if (c < 0x80) return static_cast<char>(c | 0x20) == lower && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
  return lower == 's' && c == 0x17F;
}

// 's|'t|'re|'ve|'m|'ll|'d at i (case-insensitive when `fold`); 0 if none.
size_t match_contraction(std::u32string_view t, size_t i, bool fold) {
  if (t[i] != '\'' || i + 1 >= t.size()) return 0;
  auto eq = [&](size_t k, char ch) { return i + k < t.size() && (fold ? fold_eq(t[i + k], ch) : t[i + k] == static_cast<char32_t>(ch)); };
  static constexpr const char* kSuffixes[] = {"s", "t", "re", "ve", "m", "ll", "d"};
  for (const char* s : kSuffixes) {
    size_t k = 0;
    while (s[k] && eq(k + 1, s[k])) ++k;
    if (!s[k]) return k + 1;
  }
  return 0;
}

template <typename Pred>
size_t run(std::u32string_view t, size_t i, Pred pred) {
  size_t j = i;
  while (j < t.size() && pred(t[j])) ++j;
  return j - i;
}

// \s+(?!\S)|\s+ at i (t[i] is whitespace): the whole run if it ends the text, else the run
// minus its last character (which then starts the next piece), unless that would be empty.
size_t match_whitespace_tail(std::u32string_view t, size_t i) {
  const size_t k = run(t, i, is_whitespace);
  if (k == 0) return 0;
  if (i + k == t.size() || k == 1) return k;
  return k - 1;
}

size_t match_gpt2(std::u32string_view t, size_t i) {
  if (size_t n = match_contraction(t, i, /*fold=*/false)) return n;
  const bool space = t[i] == ' ' && i + 1 < t.size();
  //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+
  for (bool (*cls)(char32_t) : {is_letter, is_number, is_other}) {
    if (space && cls(t[i + 1])) return 1 + run(t, i + 1, cls);
    if (cls(t[i])) return run(t, i, cls);
  }
  return match_whitespace_tail(t, i);
}

size_t match_llama3(std::u32string_view t, size_t i, size_t max_digits) {
  if (size_t n = match_contraction(t, i, /*fold=*/true)) return n;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  const char32_t c = t[i];
  if (!is_crlf(c) && !is_letter(c) && !is_number(c) && i + 1 < t.size() && is_letter(t[i + 1]))
    return 1 + run(t, i + 1, is_letter);
  if (is_letter(c)) return run(t, i, is_letter);
  // \p{N}{1,3}  (or \p{N})
  if (is_number(c)) return std::min(max_digits, run(t, i, is_number));
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  const size_t start = (c == ' ' && i + 1 < t.size() && is_other(t[i + 1])) ? i + 1 : i;
  if (is_other(t[start])) {
    size_t j = start + run(t, start, is_other);
    j += run(t, j, is_crlf);
    return j - i;
  }
  // \s*[\r\n]+ : up to the last \r or \n of the whitespace run starting here.
  const size_t k = run(t, i, is_whitespace);
  for (size_t j = i + k; j > i; --j)
    if (is_crlf(t[j - 1])) return j - i;
  // \s+(?!\S)|\s+
  return match_whitespace_tail(t, i);
}

}  // namespace

const char* split_pattern_regex(SplitPattern p) {
  switch (p) {
    case SplitPattern::kGpt2: return kGpt2Regex;
    case SplitPattern::kLlama3: return kLlama3Regex;
    case SplitPattern::kQwen2: return kQwen2Regex;
  }
  return "";
}

std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex) {
  for (SplitPattern p : {SplitPattern::kGpt2, SplitPattern::kLlama3, SplitPattern::kQwen2})
    if (regex == split_pattern_regex(p)) return p;
  return std::nullopt;
}

std::vector<std::pair<size_t, size_t>> split_pretokens(SplitPattern p, std::u32string_view text) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t n = p == SplitPattern::kGpt2 ? match_gpt2(text, i) : match_llama3(text, i, p == SplitPattern::kLlama3 ? 3 : 1);
    if (n == 0) n = 1;  // unreachable (the classes cover everything); never loop forever
    out.emplace_back(i, i + n);
    i += n;
  }
  return out;
}

}  // namespace kiln::llm
