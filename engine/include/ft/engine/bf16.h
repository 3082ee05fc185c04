// bfloat16 <-> float and half -> float, inline: used in the loader and in the inner loops of the
// CPU kernels.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

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

// IEEE half -> float, exact (every half is a float); NaN payloads are kept.
inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // Inf, or NaN with its payload kept
  } else if (exp != 0) {
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal halves are normal floats: shift the leading 1 into the implicit bit position.
    int e = 127 - 15 + 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (std::uint32_t(e) << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

// The half stored at p, any alignment (a GGUF block's scale fields).
inline float f16_at(const void* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

}  // namespace ft::engine
