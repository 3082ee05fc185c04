// Block dtypes decoded on the GPU, 32 values at a time: chunk c of a row is values [32c, 32c + 32),
// one Q8_0/Q4_0/Q4_1/MXFP4 block, one sub-block of a 256-value K-quant super-block, a quarter of an
// FP8 row block or half an NVFP4 one. Each value is computed as ggml's dequantize_row_* computes it (the reference,
// src/ops/reference/dequant.cpp): the same products in the same order, rounded one at a time
// (__fmul_rn and friends, so nvcc cannot fuse them into FMAs), so the GPU sees the reference's
// exact weights. Internal to engine/cuda; include from .cu files only.
#pragma once

#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ft/engine/dtype.h"
#include "ops/block_fields.h"

namespace ft::engine::cuda {

// Calls f(std::integral_constant<DType, T>{}) for a block dtype; false for any other.
template <typename F>
bool with_block_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kQ8_0:
      f(std::integral_constant<DType, DType::kQ8_0>{});
      return true;
    case DType::kQ4_0:
      f(std::integral_constant<DType, DType::kQ4_0>{});
      return true;
    case DType::kQ4_1:
      f(std::integral_constant<DType, DType::kQ4_1>{});
      return true;
    case DType::kQ4_K:
      f(std::integral_constant<DType, DType::kQ4_K>{});
      return true;
    case DType::kQ5_K:
      f(std::integral_constant<DType, DType::kQ5_K>{});
      return true;
    case DType::kQ6_K:
      f(std::integral_constant<DType, DType::kQ6_K>{});
      return true;
    case DType::kMXFP4:
      f(std::integral_constant<DType, DType::kMXFP4>{});
      return true;
    case DType::kF8E4M3B128:
      f(std::integral_constant<DType, DType::kF8E4M3B128>{});
      return true;
    case DType::kNVFP4:
      f(std::integral_constant<DType, DType::kNVFP4>{});
      return true;
    default:
      return false;
  }
}

__device__ __forceinline__ float f16_at(const std::uint8_t* p) {
  return __half2float(__ushort_as_half(std::uint16_t(p[0] | (p[1] << 8))));
}
__device__ __forceinline__ float f32_at(const std::uint8_t* p) {  // 4-byte aligned in both row blocks that hold one
  return *reinterpret_cast<const float*>(p);
}

// The bytes and values of one block of a block dtype (dtype_block on the device).
__host__ __device__ constexpr int block_bytes_of(DType t) {
  return t == DType::kQ8_0         ? 34
         : t == DType::kQ4_0       ? 18
         : t == DType::kQ4_1       ? 20
         : t == DType::kQ4_K       ? 144
         : t == DType::kQ5_K       ? 176
         : t == DType::kQ6_K       ? 210
         : t == DType::kMXFP4      ? 17
         : t == DType::kF8E4M3B128 ? 132
         : t == DType::kNVFP4      ? 40
                                   : 0;
}
__host__ __device__ constexpr int block_elems_of(DType t) {
  return t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K ? 256
         : t == DType::kF8E4M3B128                                   ? 128
         : t == DType::kNVFP4                                        ? 64
                                                                     : 32;
}

// Values [32c, 32c + 32) of `row` (a row of whole blocks of `T`) into v.
template <DType T>
__device__ __forceinline__ void dequant_chunk(const std::byte* row, int c, float (&v)[32]) {
  const auto* r = reinterpret_cast<const std::uint8_t*>(row);
  if constexpr (T == DType::kQ8_0) {
    const std::uint8_t* b = r + std::size_t(c) * 34;
    const float d = f16_at(b);
    for (int j = 0; j < 32; ++j) v[j] = __fmul_rn(float(std::int8_t(b[2 + j])), d);
  } else if constexpr (T == DType::kQ4_0) {
    const std::uint8_t* b = r + std::size_t(c) * 18;
    const float d = f16_at(b);
    for (int j = 0; j < 16; ++j) {
      v[j] = __fmul_rn(float((b[2 + j] & 0x0F) - 8), d);
      v[j + 16] = __fmul_rn(float((b[2 + j] >> 4) - 8), d);
    }
  } else if constexpr (T == DType::kQ4_1) {
    const std::uint8_t* b = r + std::size_t(c) * 20;
    const float d = f16_at(b), m = f16_at(b + 2);
    for (int j = 0; j < 16; ++j) {
      v[j] = __fadd_rn(__fmul_rn(float(b[4 + j] & 0x0F), d), m);
      v[j + 16] = __fadd_rn(__fmul_rn(float(b[4 + j] >> 4), d), m);
    }
  } else if constexpr (T == DType::kMXFP4) {
    constexpr std::int8_t kFp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const std::uint8_t* b = r + std::size_t(c) * 17;
    const float d = __uint_as_float(e8m0_half_bits(b[0]));
    for (int j = 0; j < 16; ++j) {
      v[j] = __fmul_rn(float(kFp4Doubled[b[1 + j] & 0x0F]), d);
      v[j + 16] = __fmul_rn(float(kFp4Doubled[b[1 + j] >> 4]), d);
    }
  } else if constexpr (T == DType::kF8E4M3B128) {
    const std::uint8_t* b = r + std::size_t(c / 4) * 132;
    const float d = f32_at(b);
    const std::uint8_t* q = b + 4 + 32 * (c % 4);
    for (int j = 0; j < 32; ++j) v[j] = __fmul_rn(__uint_as_float(e4m3_bits(q[j])), d);
  } else if constexpr (T == DType::kNVFP4) {
    const std::uint8_t* b = r + std::size_t(c / 2) * 40;
    const float global = f32_at(b);
    for (int s = 0; s < 2; ++s) {  // this chunk's two groups of 16
      const int g = 2 * (c % 2) + s;
      const float d = __fmul_rn(__uint_as_float(e4m3_bits(b[4 + g])), global);
      const std::uint8_t* q = b + 8 + 8 * g;
      for (int k = 0; k < 8; ++k) {
        v[16 * s + 2 * k] = __fmul_rn(e2m1_value(q[k] & 0x0F), d);
        v[16 * s + 2 * k + 1] = __fmul_rn(e2m1_value(q[k] >> 4), d);
      }
    }
  } else if constexpr (T == DType::kQ4_K || T == DType::kQ5_K) {
    constexpr int kBytes = T == DType::kQ4_K ? 144 : 176;
    const int j = c % 8;  // sub-block; pairs (2p, 2p + 1) share 32 bytes of nibbles, low then high
    const std::uint8_t* b = r + std::size_t(c / 8) * kBytes;
    const float d = f16_at(b), min = f16_at(b + 2);
    int sc, m;
    scale_min_k4(j, b + 4, sc, m);
    const float d1 = __fmul_rn(d, float(sc)), m1 = __fmul_rn(min, float(m));
    const std::uint8_t* q = b + (T == DType::kQ4_K ? 16 : 48) + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) {
      int x = (q[l] >> shift) & 0xF;
      if constexpr (T == DType::kQ5_K) x += (b[16 + l] >> j) & 1 ? 16 : 0;  // qh: bit j of byte l
      v[l] = __fsub_rn(__fmul_rn(d1, float(x)), m1);
    }
  } else if constexpr (T == DType::kQ6_K) {
    const std::uint8_t* b = r + std::size_t(c / 8) * 210;
    const int j = c % 8, half = j / 4, quarter = j % 4;  // 128-value halves, each four runs of 32
    const std::uint8_t* ql = b + 64 * half + (quarter % 2) * 32;
    const std::uint8_t* qh = b + 128 + 32 * half;
    const auto* sc = reinterpret_cast<const std::int8_t*>(b + 192 + 8 * half);
    const float d = f16_at(b + 208);
    const int lo_shift = quarter >= 2 ? 4 : 0, hi_shift = 2 * quarter;
    for (int l = 0; l < 32; ++l) {
      const int q = int(std::int8_t(((ql[l] >> lo_shift) & 0xF) | (((qh[l] >> hi_shift) & 3) << 4))) - 32;
      v[l] = __fmul_rn(__fmul_rn(d, float(sc[l / 16 + 2 * quarter])), float(q));
    }
  }
}

}  // namespace ft::engine::cuda
