// Fields of GGUF blocks whose decoding is more than a cast, defined once for the reference
// dequantisers, the CPU decoders and the CUDA kernels (hence host and device).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FT_HOST_DEVICE __host__ __device__
#else
#define FT_HOST_DEVICE
#endif

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

}  // namespace ft::engine
