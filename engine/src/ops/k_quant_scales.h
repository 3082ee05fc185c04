// The 6-bit scale and min of sub-block j of a Q4_K / Q5_K super-block, unpacked from its 12 bytes
// (ggml's get_scale_min_k4): one definition for the reference dequantisers, the CPU decoders and
// the CUDA kernels (hence host and device).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FT_HOST_DEVICE __host__ __device__
#else
#define FT_HOST_DEVICE
#endif

namespace ft::engine {

FT_HOST_DEVICE inline void scale_min_k4(int j, const std::uint8_t* q, int& d, int& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

}  // namespace ft::engine
