// A well-mixed 64-bit hash of two 32-bit values (splitmix64's finaliser of hi:lo), defined once for
// the host and the GPU: where a (layer, expert) falls in the CPU's hashed share of the misses
// (in_place_experts.cpp), and a layer's dither at a step in the split on the device
// (dense_kernels.cu).
#pragma once

#include <cstdint>

#include "ops/host_device.h"

namespace ft::engine {

FT_HOST_DEVICE inline std::uint64_t pair_hash(std::uint32_t hi, std::uint32_t lo) {
  std::uint64_t z = (std::uint64_t(hi) << 32 | lo) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace ft::engine
