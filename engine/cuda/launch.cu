// launch.h's host side: which devices take programmatic dependent launches.
#include "launch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace ft::engine::cuda {

bool pdl_supported() {
  // Per device: 0 not asked yet, 1 no, 2 yes. FT_CUDA_PDL=0 turns it off (to measure what it
  // brings, or to rule it out when a result looks wrong).
  static std::atomic<int> known[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
  int v = known[dev].load(std::memory_order_relaxed);
  if (v == 0) {
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    const char* env = std::getenv("FT_CUDA_PDL");
    const bool off = env && std::strcmp(env, "0") == 0;
    v = major >= 9 && !off ? 2 : 1;
    known[dev].store(v, std::memory_order_relaxed);
  }
  return v == 2;
}

}  // namespace ft::engine::cuda
