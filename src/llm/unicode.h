// UTF-8 and the Unicode character classes the tokenizers' pre-tokenizer regexes use: \p{L} =
// general category L*, \p{N} = N* (tables generated from node's ICU by
// scripts/gen_unicode_tables.js: unicode_tables.cc), \s = the White_Space property — Oniguruma's
// \s, which Hugging Face tokenizers' regexes run on (JavaScript's \s differs at two code points:
// it adds U+FEFF and drops U+0085). NFC comes from ICU when Kiln is built with it
// (KILN_HAVE_ICU: Debian's libicu-dev), optional so binaries carried elsewhere need no libicu.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/status.h"

namespace kiln::llm {

// Decodes UTF-8 into code points; InvalidArgument naming the byte offset on malformed input
// (overlong forms, surrogates, values past U+10FFFF, truncated sequences).
StatusOr<std::u32string> utf8_decode(std::string_view s);
// Appends the UTF-8 encoding of `c` (a valid scalar value) to `out`.
void utf8_append(char32_t c, std::string* out);
std::string utf8_encode(std::u32string_view s);

bool is_letter(char32_t c);      // \p{L}
bool is_number(char32_t c);      // \p{N}
bool is_whitespace(char32_t c);  // \s (White_Space)

// Unicode Normalization Form C (UAX #15) through ICU's Normalizer2; only when have_nfc() (else
// the text unchanged — callers refuse NFC normalizers up front when it is false).
bool have_nfc();
std::u32string nfc(std::u32string_view s);

}  // namespace kiln::llm
