#include "jinja/text.h"

#include "tokenizer/utf8.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace ft::protocol::jinja::text {

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t extra = c < 0xC0 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
    if (extra == 0 || i + extra >= s.size()) {
      out.push_back(c);  // ASCII, or a stray/truncated byte kept as itself
      ++i;
      continue;
    }
    char32_t cp = c & (extra == 1 ? 0x1F : extra == 2 ? 0x0F : 0x07);
    for (size_t k = 1; k <= extra; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += extra + 1;
  }
  return out;
}

void append_utf8(char32_t cp, std::string& out) { tok::append_code_point(cp, out); }

std::vector<std::string> split_lines(std::string_view s) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      lines.emplace_back(s.substr(start, i - start));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < s.size()) lines.emplace_back(s.substr(start));
  return lines;
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) append_utf8(cp, out);
  return out;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_space(char32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x1C: case 0x1D: case 0x1E:
    case 0x1F: case 0x20: case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::string strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::u32string cps = decode(s);
  std::u32string set = chars ? decode(*chars) : std::u32string();
  auto drop = [&](char32_t cp) { return chars ? set.find(cp) != std::u32string::npos : is_space(cp); };
  size_t b = 0, e = cps.size();
  if (left) while (b < e && drop(cps[b])) ++b;
  if (right) while (e > b && drop(cps[e - 1])) --e;
  return encode(std::u32string_view(cps).substr(b, e - b));
}

namespace {

std::vector<std::string> split_whitespace(std::string_view s, int64_t maxsplit, bool from_right) {
  std::u32string cps = decode(s);
  std::vector<std::u32string> parts;
  if (!from_right) {
    size_t i = 0, n = cps.size();
    while (true) {
      while (i < n && is_space(cps[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = n;
        while (e > i && is_space(cps[e - 1])) --e;
        parts.push_back(cps.substr(i, e - i));
        break;
      }
      size_t j = i;
      while (j < n && !is_space(cps[j])) ++j;
      parts.push_back(cps.substr(i, j - i));
      i = j;
    }
  } else {
    size_t e = cps.size();
    while (true) {
      while (e > 0 && is_space(cps[e - 1])) --e;
      if (e == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t b = 0;
        while (b < e && is_space(cps[b])) ++b;
        parts.push_back(cps.substr(b, e - b));
        break;
      }
      size_t b = e;
      while (b > 0 && !is_space(cps[b - 1])) --b;
      parts.push_back(cps.substr(b, e - b));
      e = b;
    }
    std::reverse(parts.begin(), parts.end());
  }
  std::vector<std::string> out;
  for (auto& p : parts) out.push_back(encode(p));
  return out;
}

}  // namespace

std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit, bool from_right) {
  if (!sep) return split_whitespace(s, maxsplit, from_right);
  std::vector<std::string> out;
  if (sep->empty()) return out;  // Python raises; callers check first
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  size_t end = s.size();
  std::vector<std::string> rev;
  while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
    if (end < sep->size()) break;
    size_t at = s.rfind(*sep, end - sep->size());
    if (at == std::string_view::npos) break;
    rev.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
    end = at;
  }
  rev.emplace_back(s.substr(0, end));
  return std::vector<std::string>(rev.rbegin(), rev.rend());
}

std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` between every code point (and at both ends).
    std::u32string cps = decode(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out.append(to);
        ++done;
      }
      if (i < cps.size()) append_utf8(cps[i], out);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(from, pos);
    if (at == std::string_view::npos) break;
    out.append(s.substr(pos, at - pos));
    out.append(to);
    pos = at + from.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form, then laid out the way Python's repr does:
  // positional for exponents in [-4, 16), scientific otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e_at = sci.find('e');
  std::string mant = sci.substr(0, e_at);
  int exp = std::stoi(sci.substr(e_at + 1));
  std::string digits;
  for (char c : mant) if (c != '.') digits.push_back(c);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      std::string ip = digits.substr(0, std::min<size_t>(digits.size(), exp + 1));
      while (static_cast<int>(ip.size()) < exp + 1) ip.push_back('0');
      std::string fp = static_cast<int>(digits.size()) > exp + 1 ? digits.substr(exp + 1) : "0";
      out += ip + "." + fp;
    } else {
      out += "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  }
  return out;
}

std::string string_repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (char32_t cp : decode(s)) {
    switch (cp) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (cp == static_cast<char32_t>(q)) {
          out.push_back('\\');
          out.push_back(q);
        } else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
          char b[8];
          std::snprintf(b, sizeof b, "\\x%02x", static_cast<unsigned>(cp));
          out += b;
        } else {
          append_utf8(cp, out);
        }
    }
  }
  out.push_back(q);
  return out;
}

}  // namespace ft::protocol::jinja::text
