// Unicode character-class tables (generated: scripts/gen_unicode_tables.js -> unicode_tables.cc).
#pragma once

#include <cstddef>

namespace kiln::llm {

struct CodeRange {
  char32_t first, last;  // inclusive
};

extern const CodeRange kLetterRanges[];  // general category L, sorted, disjoint
extern const size_t kLetterRangesCount;
extern const CodeRange kNumberRanges[];  // general category N
extern const size_t kNumberRangesCount;
extern const char kUnicodeTablesVersion[];  // "15.1"

}  // namespace kiln::llm
