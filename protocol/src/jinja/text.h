// Python str semantics on UTF-8 bytes: templates index, slice, measure and strip strings by code
// point and treat Unicode whitespace as Python does, so byte-level shortcuts would differ on
// non-ASCII content.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ft::protocol::jinja::text {

// Code points of `s`; invalid bytes decode to themselves (templates receive valid UTF-8).
std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
void append_utf8(char32_t cp, std::string& out);
size_t length(std::string_view s);  // in code points

// str.isspace() for one code point.
bool is_space(char32_t cp);
// str.strip/lstrip/rstrip; `chars` null means Unicode whitespace.
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split(sep=None) / str.split(sep) with maxsplit (-1: all); rsplit when `from_right`.
std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit, bool from_right);
// Python str.splitlines() for \n, \r and \r\n: no line terminators kept, no trailing empty line.
std::vector<std::string> split_lines(std::string_view s);
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
std::string ascii_lower(std::string_view s);
std::string ascii_upper(std::string_view s);
// Python's repr() of a float: shortest round-trip digits, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string float_repr(double d);
// Python's repr() of a str: single quotes unless it holds ' and no ", escapes for controls.
std::string string_repr(std::string_view s);

}  // namespace ft::protocol::jinja::text
