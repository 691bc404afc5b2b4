// The pre-tokenizer splits of byte-level BPE tokenizers, written as matchers over code points
// instead of a regex engine. Each reproduces one regex exactly as a backtracking engine with
// leftmost-first alternation (Oniguruma, which Hugging Face tokenizers uses) runs it:
//   kGpt2   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//           (GPT-2's encoder.py; tokenizers' ByteLevel with use_regex)
//   kLlama3 (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+   (Llama 3's Split pre-tokenizer)
//   kQwen2  the same with \p{N} for \p{N}{1,3} (Qwen2's Split pre-tokenizer)
// Character classes: unicode.h.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::llm {

enum class SplitPattern : uint8_t { kGpt2, kLlama3, kQwen2 };

// The regex string (as tokenizer.json holds it) of each pattern.
const char* split_pattern_regex(SplitPattern p);
// The pattern whose regex string is `regex`; nullopt for any other.
std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex);

// Splits `text` (code points) into the regex's consecutive matches (every code point belongs to
// one: the alternatives cover every class). Returns [begin, end) code-point ranges, in order.
std::vector<std::pair<size_t, size_t>> split_pretokens(SplitPattern p, std::u32string_view text);

}  // namespace kiln::llm
