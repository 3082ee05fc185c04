// NFC = canonical decomposition, canonical reordering, canonical composition (UAX #15), with the
// quick check in front so ordinary text (ASCII, precomposed Latin, CJK) is never rewritten.
// Hangul syllables are decomposed/composed arithmetically, as the standard specifies.
#include <algorithm>
#include <vector>

#include "ft/protocol/unicode.h"
#include "tokenizer/nfc_tables.h"
#include "tokenizer/utf8.h"

namespace ft::protocol {
namespace {

using namespace tok::nfc;

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint8_t ccc(char32_t cp) {
  if (cp < kFirstUnsafe) return 0;
  auto it = std::lower_bound(kCcc, kCcc + kCccSize, cp, [](const CccEntry& e, char32_t c) { return e.cp < c; });
  return it != kCcc + kCccSize && it->cp == cp ? it->ccc : 0;
}

bool unsafe(char32_t cp) {
  if (cp < kFirstUnsafe) return false;
  auto it = std::upper_bound(kUnsafe, kUnsafe + kUnsafeSize, cp, [](char32_t c, const Range& r) { return c < r.lo; });
  return it != kUnsafe && cp <= (it - 1)->hi;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  auto it =
      std::lower_bound(kDecomp, kDecomp + kDecompSize, cp, [](const DecompEntry& e, char32_t c) { return e.cp < c; });
  if (it != kDecomp + kDecompSize && it->cp == cp) {
    out.insert(out.end(), kDecompPool + it->offset, kDecompPool + it->offset + it->length);
  } else {
    out.push_back(cp);
  }
}

// The primary composite of (a, b), or 0.
char32_t compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  auto it = std::lower_bound(kComp, kComp + kCompSize, std::pair{a, b},
                             [](const CompEntry& e, std::pair<char32_t, char32_t> k) {
                               return e.first != k.first ? e.first < k.first : e.second < k.second;
                             });
  return it != kComp + kCompSize && it->first == a && it->second == b ? it->composite : 0;
}

// The full algorithm, for a segment that starts at a safe boundary.
std::string nfc_segment(std::string_view s) {
  std::vector<char32_t> cps;
  cps.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) decompose(tok::next_code_point(s, i), cps);

  // Canonical ordering: stable sort each run of non-starters by combining class.
  std::vector<uint8_t> cls(cps.size());
  for (std::size_t k = 0; k < cps.size(); ++k) cls[k] = ccc(cps[k]);
  for (std::size_t k = 1; k < cps.size(); ++k) {
    if (cls[k] == 0) continue;
    for (std::size_t j = k; j > 0 && cls[j - 1] > cls[j]; --j) {
      std::swap(cps[j - 1], cps[j]);
      std::swap(cls[j - 1], cls[j]);
    }
  }

  // Canonical composition: a character joins the last starter unless blocked by one in between
  // with the same or a higher class (or by an uncombined starter).
  std::vector<char32_t> out;
  out.reserve(cps.size());
  std::size_t starter = 0;
  bool have_starter = false;
  int last_class = -1;
  for (std::size_t k = 0; k < cps.size(); ++k) {
    char32_t cp = cps[k];
    int c = cls[k];
    if (have_starter) {
      bool adjacent = out.size() == starter + 1;
      if (adjacent || (last_class != -1 && last_class < c)) {
        if (char32_t comp = compose(out[starter], cp)) {
          out[starter] = comp;
          continue;
        }
      }
    }
    if (c == 0) {
      starter = out.size();
      have_starter = true;
      last_class = -1;
    } else {
      last_class = c;
    }
    out.push_back(cp);
  }
  std::string result;
  result.reserve(s.size());
  for (char32_t cp : out) tok::append_code_point(cp, result);
  return result;
}

}  // namespace

// "Unsafe" covers NFC_QC No and Maybe and every non-zero combining class, so text without any
// is NFC (a conservative quick check: Maybe answers "not certainly").
bool nfc_quick_check(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    char32_t cp = tok::next_code_point(s, i);
    if (cp >= kFirstUnsafe && unsafe(cp)) return false;
  }
  return true;
}

// Only the segments around "unsafe" characters are rewritten: each runs from the last safe
// starter (ccc 0, NFC_QC Yes: nothing before it can interact with what follows) before an unsafe
// character to the next safe one. Long texts with one accent stay a copy, not a rewrite.
std::string nfc(std::string_view s) {
  std::string out;
  std::size_t copied = 0, boundary = 0, i = 0;
  auto safe = [](char32_t cp) { return cp < kFirstUnsafe || !unsafe(cp); };  // unsafe covers ccc != 0
  while (i < s.size()) {
    const std::size_t start = i;
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      boundary = start;
      continue;
    }
    if (safe(tok::next_code_point(s, i))) {
      boundary = start;
      continue;
    }
    std::size_t end = i;
    while (end < s.size()) {
      std::size_t j = end;
      if (safe(tok::next_code_point(s, j))) break;
      end = j;
    }
    out.append(s.substr(copied, boundary - copied));
    out.append(nfc_segment(s.substr(boundary, end - boundary)));
    copied = i = boundary = end;
  }
  if (copied == 0) return std::string(s);
  out.append(s.substr(copied));
  return out;
}

const char* nfc_unicode_version() { return kUnicodeVersion; }

}  // namespace ft::protocol
