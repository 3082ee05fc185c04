// bfloat16 <-> float, inline: used in the loader and in the inner loops of the CPU kernels.
#pragma once

#include <bit>
#include <cstdint>

namespace ft::engine {

// A bfloat16 as its raw bits (the top half of an IEEE fp32).
using bf16_t = std::uint16_t;

inline float bf16_to_f32(bf16_t v) { return std::bit_cast<float>(std::uint32_t(v) << 16); }

// Round to nearest, ties to even. Rounding could carry a NaN payload into the exponent and turn it
// into Inf, so a NaN stays a (quiet) NaN.
inline bf16_t f32_to_bf16(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return bf16_t((bits >> 16) | 0x0040u);
  return bf16_t((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace ft::engine
