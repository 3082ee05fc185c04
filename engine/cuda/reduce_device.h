// Warp and block reductions the kernels share. Each sums (or takes the max) in one fixed order, a
// xor butterfly within a warp and then warp 0 over the warps' partials, so every lane gets the
// same bits and a result does not depend on how the blocks were scheduled. Internal to engine/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

namespace ft::engine::cuda {

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Eight sums over the warp at once, in 9 shuffles instead of 40: halves of the values cross at each
// of the first three steps (each lane keeps the half its lane bit names), then the last two steps
// add one value. Lanes 4i .. 4i + 3 return the sum of v[i]. A fixed order, as warp_sum.
__device__ __forceinline__ float warp_sum8(const float (&v)[8]) {
  const unsigned lane = threadIdx.x & 31u;
  float a[4], b[2];
  const bool up16 = lane & 16u, up8 = lane & 8u, up4 = lane & 4u;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float keep = up16 ? v[i + 4] : v[i], give = up16 ? v[i] : v[i + 4];
    a[i] = keep + __shfl_xor_sync(0xffffffffu, give, 16);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float keep = up8 ? a[i + 2] : a[i], give = up8 ? a[i] : a[i + 2];
    b[i] = keep + __shfl_xor_sync(0xffffffffu, give, 8);
  }
  float c = (up4 ? b[1] : b[0]) + __shfl_xor_sync(0xffffffffu, up4 ? b[0] : b[1], 4);
  c += __shfl_xor_sync(0xffffffffu, c, 2);
  return c + __shfl_xor_sync(0xffffffffu, c, 1);
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Every thread of the block gets the result; blockDim.x a multiple of 32. Its shared partials may
// still be read by the previous call's threads, hence the barrier before they are written.
template <typename T>
__device__ T block_sum(T v) {
  __shared__ T partial[32];
  v = warp_sum(v);
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x >> 5) ? partial[lane] : T(0);
  return warp_sum(v);
}

__device__ inline float block_max(float v) {
  __shared__ float partial[32];
  v = warp_max(v);
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x >> 5) ? partial[lane] : -INFINITY;
  return warp_max(v);
}

// Whether this block is the last of `n` to count itself done on `counter` (then it resets the counter
// for the next launch: every other block has counted). The blocks' writes before it are visible to
// the last one (fence, count; count seen, fence): the router's product ranks its logits, and a split
// attention merges its splits, in the block that finishes last.
__device__ __forceinline__ bool last_to_finish(unsigned* counter, int n) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1u) == unsigned(n - 1);
    if (last) *counter = 0;
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

}  // namespace ft::engine::cuda
