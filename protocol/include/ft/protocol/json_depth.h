// A guard against JSON nested deep enough to overflow the stack of recursive code after the parse
// (serialising, converting to template values). Both servers check every request body with it
// before parsing: one linear pass over the bytes, no allocation.
#pragma once

#include <cstddef>
#include <string_view>

namespace ft::protocol {

// Deeper bodies are refused. Real requests (tool schemas included) nest a few tens of levels.
inline constexpr std::size_t kMaxJsonDepth = 256;

// Whether no array or object in `text` is nested more than `max_depth` levels (brackets inside
// strings do not count). Says nothing else about validity: the parser still decides that.
bool json_depth_within(std::string_view text, std::size_t max_depth = kMaxJsonDepth);

}  // namespace ft::protocol
