// Comparing a presented secret (an API key) with the expected one in time that does not depend on
// where they first differ, so response timing cannot be used to guess the key byte by byte.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace ft {

inline bool secrets_equal(std::string_view presented, std::string_view expected) {
  // The length is not secret (it differs or not); the bytes are compared in full either way.
  volatile unsigned char diff = presented.size() != expected.size();
  const std::size_t n = std::max(presented.size(), expected.size());
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char a = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    const unsigned char b = i < expected.size() ? static_cast<unsigned char>(expected[i]) : 0;
    diff = static_cast<unsigned char>(diff | (a ^ b));
  }
  return diff == 0;
}

}  // namespace ft
