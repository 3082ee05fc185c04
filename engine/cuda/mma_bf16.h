// The tensor-core product the attention kernels share (sm_80 and later): mma m16n8k16 on bf16
// operands with fp32 accumulation, and the split of an fp32 operand into two bf16 halves whose two
// products together keep ~16 significant bits. Device code; include only where __CUDA_ARCH__ >= 800.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace ft::engine::cuda {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

// a = hi + lo and b = hi + lo in bf16 (round to nearest even), packed as the mma operands pack a
// pair: the lower k (here a) in the low half.
__device__ __forceinline__ void split_bf16x2(float a, float b, std::uint32_t& hi, std::uint32_t& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  const __nv_bfloat162 l = __floats2bfloat162_rn(a - __low2float(h), b - __high2float(h));
  hi = *reinterpret_cast<const std::uint32_t*>(&h);  // .x (a) is the low half
  lo = *reinterpret_cast<const std::uint32_t*>(&l);
}

// d += a b for one m16n8k16 tile. Fragments (g = lane / 4, t = lane % 4; pairs low half first):
//   a[0] = A[g][2t, 2t+1]  a[1] = A[g+8][2t, 2t+1]  a[2] = A[g][2t+8, 2t+9]  a[3] = A[g+8][2t+8, 2t+9]
//   b0 = B[2t, 2t+1][g]    b1 = B[2t+8, 2t+9][g]
//   d[0], d[1] = D[g][2t, 2t+1]   d[2], d[3] = D[g+8][2t, 2t+1]
__device__ __forceinline__ void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#endif  // __CUDA_ARCH__ >= 800

}  // namespace ft::engine::cuda
