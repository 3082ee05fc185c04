// Small helpers shared by the ops_deltanet*.cpp files (private to the engine).
#pragma once

#include <cmath>
#include <cstddef>

#include "ops/reference/dot.h"

namespace ft::engine::ref::dn {

// HF l2norm eps (use_qk_l2norm_in_kernel): x * rsqrt(sum(x^2) + 1e-6).
inline constexpr float kL2NormEps = 1e-6f;

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

inline float dot(const float* a, const float* b, std::size_t n) { return dot8(a, b, n); }

// y += a * x
inline void axpy(float a, const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// out = x / sqrt(sum(x^2) + eps) * scale  (sum in double: it is O(n) and sets every later value)
inline void l2_normalize(const float* x, float* out, std::size_t n, float scale) {
  double ss = 0.0;
  for (std::size_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const float inv = float(1.0 / std::sqrt(ss + double(kL2NormEps))) * scale;
  for (std::size_t i = 0; i < n; ++i) out[i] = x[i] * inv;
}

}  // namespace ft::engine::ref::dn
