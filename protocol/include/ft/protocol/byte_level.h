// GPT-2's byte-level alphabet: each of the 256 byte values is shown as one printable Unicode
// character (printable Latin-1 stays itself, the rest map to U+0100 upwards, e.g. ' ' -> 'Ġ'),
// so BPE vocabularies can be written as JSON strings. Tokenizer vocabularies use this spelling.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ft::protocol {

// The character byte `b` is spelled as.
char32_t byte_level_char(uint8_t b);
// "hello world" -> "helloĠworld" (UTF-8 of the mapped characters).
std::string bytes_to_byte_level(std::string_view bytes);
// The inverse; nullopt when `text` holds a character outside the alphabet or is not UTF-8.
std::optional<std::string> byte_level_to_bytes(std::string_view text);

}  // namespace ft::protocol
