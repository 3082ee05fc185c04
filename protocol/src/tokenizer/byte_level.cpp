// GPT-2's bytes_to_unicode(): bytes that are printable Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') keep
// their own code point; the other 68 get U+0100, U+0101, ... in byte order.
#include "ft/protocol/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace ft::protocol {
namespace {

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 324> to_byte{};  // indexed by code point; every mapped char is < U+0144
  Tables() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_char[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_level_char(uint8_t b) { return tables().to_char[b]; }

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) tok::append_code_point(tables().to_char[b], out);
  return out;
}

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
  const auto& t = tables();
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    std::size_t len = tok::utf8_len(c);
    if (c >= 0x80 && c < 0xC0) return std::nullopt;
    if (i + len > text.size()) return std::nullopt;
    char32_t cp = tok::next_code_point(text, i);
    if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(t.to_byte[cp]));
  }
  return out;
}

}  // namespace ft::protocol
