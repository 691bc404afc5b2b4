// UTF-8 coding (RFC 3629), the character classes (generated tables) and NFC (ICU, when built
// with it).
#include "llm/unicode.h"

#include <algorithm>

#include "llm/unicode_tables.h"

#ifdef KILN_HAVE_ICU
#include <unicode/unorm2.h>
#include <unicode/utf16.h>
#endif

namespace kiln::llm {

StatusOr<std::u32string> utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    int len = 0;
    char32_t c = 0, min = 0;
    if (b < 0x80) len = 1, c = b;
    else if ((b & 0xE0) == 0xC0) len = 2, c = b & 0x1F, min = 0x80;
    else if ((b & 0xF0) == 0xE0) len = 3, c = b & 0x0F, min = 0x800;
    else if ((b & 0xF8) == 0xF0) len = 4, c = b & 0x07, min = 0x10000;
    else return invalid_argument("text is not valid UTF-8 (byte " + std::to_string(i) + ")");
    if (i + len > s.size()) return invalid_argument("text is not valid UTF-8 (truncated sequence at byte " + std::to_string(i) + ")");
    for (int k = 1; k < len; ++k) {
      const uint8_t cb = static_cast<uint8_t>(s[i + k]);
      if ((cb & 0xC0) != 0x80) return invalid_argument("text is not valid UTF-8 (byte " + std::to_string(i + k) + ")");
      c = (c << 6) | (cb & 0x3F);
    }
    if (len > 1 && (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)))
      return invalid_argument("text is not valid UTF-8 (bad sequence at byte " + std::to_string(i) + ")");
    out.push_back(c);
    i += len;
  }
  return out;
}

void utf8_append(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(c, &out);
  return out;
}

namespace {

bool in_ranges(const CodeRange* r, size_t n, char32_t c) {
  const CodeRange* end = r + n;
  const CodeRange* it = std::upper_bound(r, end, c, [](char32_t v, const CodeRange& x) { return v < x.first; });
  return it != r && c <= (it - 1)->last;
}

}  // namespace

bool is_letter(char32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  return in_ranges(kLetterRanges, kLetterRangesCount, c);
}

bool is_number(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return in_ranges(kNumberRanges, kNumberRangesCount, c);
}

bool is_whitespace(char32_t c) {
  // The White_Space property (Unicode PropList.txt), which is Oniguruma's \s.
  switch (c) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

#ifdef KILN_HAVE_ICU

bool have_nfc() { return true; }

std::u32string nfc(std::u32string_view s) {
  std::u16string src;
  src.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0x10000) {
      src.push_back(static_cast<char16_t>(c));
    } else {
      src.push_back(static_cast<char16_t>(U16_LEAD(c)));
      src.push_back(static_cast<char16_t>(U16_TRAIL(c)));
    }
  }
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* n = unorm2_getNFCInstance(&err);
  KILN_CHECK(U_SUCCESS(err));  // ICU's data is linked in; this cannot fail on a working install
  if (unorm2_isNormalized(n, reinterpret_cast<const UChar*>(src.data()), static_cast<int32_t>(src.size()), &err) && U_SUCCESS(err))
    return std::u32string(s);
  err = U_ZERO_ERROR;
  std::u16string dst(src.size() * 3 + 16, u'\0');  // NFC grows a string at most 3x (UAX #15)
  const int32_t len = unorm2_normalize(n, reinterpret_cast<const UChar*>(src.data()), static_cast<int32_t>(src.size()),
                                       reinterpret_cast<UChar*>(dst.data()), static_cast<int32_t>(dst.size()), &err);
  KILN_CHECK(U_SUCCESS(err));
  std::u32string out;
  out.reserve(len);
  for (int32_t i = 0; i < len;) {
    UChar32 c;
    U16_NEXT(dst.data(), i, len, c);
    out.push_back(static_cast<char32_t>(c));
  }
  return out;
}

#else

bool have_nfc() { return false; }
std::u32string nfc(std::u32string_view s) { return std::u32string(s); }

#endif

}  // namespace kiln::llm
