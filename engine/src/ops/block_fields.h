// Fields of GGUF blocks whose decoding is more than a cast, defined once for the reference
// dequantisers, the CPU decoders and the CUDA kernels (hence host and device).
#pragma once

#include <cstdint>

#include "ops/host_device.h"

namespace ft::engine {

// The 6-bit scale and min of sub-block j of a Q4_K / Q5_K super-block, from its 12 packed bytes
// (ggml's get_scale_min_k4).
FT_HOST_DEVICE inline void scale_min_k4(int j, const std::uint8_t* q, int& d, int& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// ggml_e8m0_to_fp32_half as fp32 bits: 2^(e - 128), half the E8M0 scale (MXFP4's value table holds
// twice the FP4 values); below e = 2 an fp32 subnormal, spelled out as ggml does.
FT_HOST_DEVICE inline std::uint32_t e8m0_half_bits(std::uint32_t e) { return e < 2 ? 0x00200000u << e : (e - 1) << 23; }

// An OCP UE8M0 scale as fp32 bits: 2^(e - 127), e = 0 the fp32 subnormal 2^-127, e = 255 NaN.
FT_HOST_DEVICE inline std::uint32_t e8m0_bits(std::uint32_t e) {
  return e == 255 ? 0x7FC00000u : e == 0 ? 0x00400000u : e << 23;
}

// An OCP FP8 E4M3 code ("e4m3fn": bias 7, no infinities, S.1111.111 NaN) as fp32 bits, exactly as
// PyTorch's float8_e4m3fn converts it; a subnormal m * 2^-9 is renormalised.
FT_HOST_DEVICE inline std::uint32_t e4m3_bits(std::uint32_t code) {
  const std::uint32_t sign = (code & 0x80u) << 24, e = (code >> 3) & 0xF, m = code & 7;
  if (e == 15 && m == 7) return sign | 0x7FC00000u;
  if (e != 0) return sign | (e + 120) << 23 | m << 20;
  if (m == 0) return sign;
  const std::uint32_t lead = m >= 4 ? 2 : m >= 2 ? 1 : 0;  // m = 1.f * 2^lead
  return sign | (lead + 118) << 23 | ((m << (3 - lead)) & 7) << 20;
}

// An E2M1 (FP4) code's value: sign, 2 exponent bits (bias 1), 1 mantissa bit; 0.5 is the subnormal.
FT_HOST_DEVICE inline float e2m1_value(std::uint32_t code) {
  const float magnitude =
      (code & 7) < 2 ? 0.5f * float(code & 1) : float(2 + (code & 1)) * float(1 << ((code & 7) >> 1)) * 0.25f;
  return code & 8 ? -magnitude : magnitude;
}

}  // namespace ft::engine
