// UTF-8 repair and Unicode NFC for the tokenizer (and anything else that must treat text exactly
// like Python/Rust do). No ICU: the NFC tables are generated (scripts/unicode/gen_nfc_tables.py).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ft::protocol {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// True when `s` is well-formed UTF-8 (no surrogates, no overlongs, <= U+10FFFF).
bool is_valid_utf8(std::string_view s);

// Appends `s` to `out` with every maximal invalid subsequence replaced by one U+FFFD: the
// Unicode "maximal subpart" practice that Python's decode(errors="replace") and Rust's
// String::from_utf8_lossy both follow. When `final` is false and `s` ends inside a sequence that
// is valid so far, those trailing bytes are not consumed (they may complete later). Returns the
// number of bytes of `s` consumed.
std::size_t append_utf8_lossy(std::string_view s, bool final, std::string& out);

inline std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  append_utf8_lossy(s, true, out);
  return out;
}

// Unicode Normalization Form C of valid UTF-8 `s`. Fast path: text that passes the NFC quick
// check (e.g. all ASCII) is returned unchanged.
std::string nfc(std::string_view s);
// The NFC quick check: true means `s` is certainly NFC; false means it may not be.
bool nfc_quick_check(std::string_view s);
// Unicode version of the NFC tables, e.g. "14.0.0".
const char* nfc_unicode_version();

}  // namespace ft::protocol
