// UTF-8 validation and lossy repair with the Unicode "maximal subpart" rule, so replacement
// characters land exactly where Python's decode(errors="replace") and Rust's from_utf8_lossy put
// them (HF tokenizers' decode uses the latter; the goldens read invalid files with the former).
#include <cstring>

#include "ft/protocol/unicode.h"

namespace ft::protocol {
namespace {

// Allowed range of the second byte for each lead byte (Unicode Table 3-7); later bytes are
// always 80..BF. Returns the sequence length, 0 for a byte that cannot start a sequence.
inline int lead_info(unsigned char c, unsigned char& lo, unsigned char& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (c < 0x80) return 1;
  if (c < 0xC2) return 0;
  if (c < 0xE0) return 2;
  if (c < 0xF0) {
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  // no surrogates
    return 3;
  }
  if (c < 0xF5) {
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // <= U+10FFFF
    return 4;
  }
  return 0;
}

// Length of the ASCII run at s[i..]: checked eight bytes at a time, since most text is ASCII.
inline std::size_t ascii_run(const char* p, std::size_t n) {
  std::size_t i = 0;
  while (i + 8 <= n) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w & 0x8080808080808080ull) break;
    i += 8;
  }
  while (i < n && static_cast<unsigned char>(p[i]) < 0x80) ++i;
  return i;
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    i += ascii_run(s.data() + i, n - i);
    if (i >= n) break;
    unsigned char lo, hi;
    int len = lead_info(static_cast<unsigned char>(s[i]), lo, hi);
    if (len == 0 || i + len > n) return false;
    auto b1 = static_cast<unsigned char>(s[i + 1]);
    if (b1 < lo || b1 > hi) return false;
    for (int k = 2; k < len; ++k) {
      auto b = static_cast<unsigned char>(s[i + k]);
      if (b < 0x80 || b > 0xBF) return false;
    }
    i += len;
  }
  return true;
}

std::size_t append_utf8_lossy(std::string_view s, bool final, std::string& out) {
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    std::size_t run = ascii_run(s.data() + i, n - i);
    out.append(s.data() + i, run);
    i += run;
    if (i >= n) break;
    unsigned char lo, hi;
    int len = lead_info(static_cast<unsigned char>(s[i]), lo, hi);
    if (len == 0) {
      out.append(kReplacementChar);
      ++i;
      continue;
    }
    // Count how many bytes continue the sequence validly (the maximal subpart).
    int good = 1;
    while (good < len && i + good < n) {
      auto b = static_cast<unsigned char>(s[i + good]);
      bool ok = good == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
      if (!ok) break;
      ++good;
    }
    if (good == len) {
      out.append(s.data() + i, len);
    } else if (i + good == n && !final) {
      return i;  // valid so far, cut by the end of the input: may complete later
    } else {
      out.append(kReplacementChar);
    }
    i += good;
  }
  return n;
}

}  // namespace ft::protocol
