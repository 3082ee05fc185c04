// Unicode data for NFC, generated into nfc_tables.cpp by scripts/unicode/gen_nfc_tables.py.
// Every table is sorted by its first field so lookups are binary searches.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ft::protocol::tok::nfc {

struct CccEntry {
  char32_t cp;
  uint8_t ccc;  // canonical combining class, only the non-zero ones are listed
};
struct DecompEntry {
  char32_t cp;
  uint16_t offset;  // into kDecompPool: the full (recursive) canonical decomposition
  uint8_t length;
};
struct CompEntry {
  char32_t first, second, composite;  // primary composites only (exclusions removed)
};
struct Range {
  char32_t lo, hi;
};

extern const char* const kUnicodeVersion;
extern const char32_t kFirstUnsafe;  // no code point below this can make text non-NFC
extern const CccEntry kCcc[];
extern const std::size_t kCccSize;
extern const char32_t kDecompPool[];
extern const DecompEntry kDecomp[];
extern const std::size_t kDecompSize;
extern const CompEntry kComp[];
extern const std::size_t kCompSize;
// Code points with NFC_Quick_Check No/Maybe or a non-zero combining class.
extern const Range kUnsafe[];
extern const std::size_t kUnsafeSize;

}  // namespace ft::protocol::tok::nfc
