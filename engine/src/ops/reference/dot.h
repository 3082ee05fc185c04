// The fixed-order fp32 dot product of the reference ops (and of the CPU backend's paths for weights
// without a vector kernel): eight independent partial sums, so the compiler can vectorise it
// without -ffast-math (a single running sum is a dependency chain it may not reorder), then a fixed
// tree. The result depends on nothing but the two vectors.
#pragma once

#include <cstddef>

namespace ft::engine::ref {

inline float dot8(const float* a, const float* b, std::size_t n) {
  float acc[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  float tail = 0.f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

}  // namespace ft::engine::ref
