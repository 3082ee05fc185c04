// The int8 planes of a 32-value block (kernels.h's X8), computed by one warp: the quantiser that
// quantize_x8, the MoE's gather and its GLU share, so that a value gets the same bytes whichever
// kernel quantised it. Device code; include from .cu files only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ft::engine::cuda {

// Lane `lane` of a warp holds value v of block `block`, whose first value sits at `at` in the
// planes: the block's largest magnitude, the two int8 planes (x ~= d1 hi + d2 lo, d2 = d1 / 254),
// and the sums of its two halves (a fixed shuffle tree, so the same x always gives the same bytes).
// A block holding a NaN or an infinity gets NaN scales and zero codes (its products are NaN, as with
// fp32 activations). Every lane of the warp must call it.
__device__ __forceinline__ void quantize_block_x8(float v, int lane, std::size_t at, std::size_t block, std::int8_t* hi,
                                                  std::int8_t* lo, float4* meta) {
  float amax = fabsf(v);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const bool finite = __all_sync(0xffffffffu, isfinite(v));
  const float d1 = finite ? amax / 127.f : __int_as_float(0x7fc00000), d2 = d1 / 254.f;
  int q1 = 0, q2 = 0;
  if (finite && amax > 0.f) {
    q1 = max(-127, min(127, __float2int_rn(v / d1)));
    q2 = max(-127, min(127, __float2int_rn(fmaf(-float(q1), d1, v) / d2)));
  }
  hi[at + std::size_t(lane)] = std::int8_t(q1);
  lo[at + std::size_t(lane)] = std::int8_t(q2);
  float sum = v;
#pragma unroll
  for (int off = 8; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);  // within each half
  const float upper = __shfl_sync(0xffffffffu, sum, 16);
  if (lane == 0) meta[block] = make_float4(d1, d2, sum, upper);
}

}  // namespace ft::engine::cuda
