// Decode-sized products on GGUF blocks, the fast way. A warp reads a row 256 values at a time
// (one K-quant super-block, or eight 32-value blocks), every lane a few contiguous bytes of it:
// its loads, and its loads of x, sit next to its neighbours', so a warp's requests are whole
// cache lines. Each of a lane's 8 values becomes an fp32 small integer with one byte permute and
// one add (the exponent trick: 2^23 + code, exact; no int-to-float conversion, a quarter-rate
// instruction), and the block's scale (and offset) multiply the sums of a group of 4, not each
// value: sum_i (a q_i + b) x_i = a (sum_i q_i x_i) + b (sum_i x_i).
// The codes and scales are ggml's exactly (a = d * sc rounded as the reference rounds it); only
// the order of the fp32 sums differs from the dequantise-then-dot reference (~1e-7 relative).
// Internal to engine/cuda; include from .cu files only.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "ft/engine/dtype.h"

namespace ft::engine::cuda::units {

constexpr int kStep = 256;  // values of a row a warp reads per step

// Byte i of w as an fp32 integer 0..255 plus 2^23 (one PRMT): subtract 2^23 (+ an offset) exactly.
__device__ __forceinline__ float byte_plus_2p23(std::uint32_t w, int i) {
  return __int_as_float(int(__byte_perm(w, 0x4B000000u, 0x7540u | unsigned(i))));
}

__device__ __forceinline__ float half_at(const std::uint8_t* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const std::uint16_t*>(p)));
}

// 4 bytes from a 2-byte-aligned address.
__device__ __forceinline__ std::uint32_t load4_a2(const std::uint8_t* p) {
  const auto* h = reinterpret_cast<const std::uint16_t*>(p);
  return std::uint32_t(__ldg(h)) | (std::uint32_t(__ldg(h + 1)) << 16);
}

// Byte k (0..11) of the K-quants' 12 packed scale bytes held as three words.
__device__ __forceinline__ int scale_byte(std::uint32_t s0, std::uint32_t s1, std::uint32_t s2, int k) {
  const std::uint32_t w = k < 4 ? s0 : k < 8 ? s1 : s2;
  return int((w >> (8 * (k & 3))) & 0xFF);
}

// ggml's get_scale_min_k4 on the packed scales as words.
__device__ __forceinline__ void scale_min(int j, std::uint32_t s0, std::uint32_t s1, std::uint32_t s2, int& sc,
                                          int& m) {
  if (j < 4) {
    sc = scale_byte(s0, s1, s2, j) & 63;
    m = scale_byte(s0, s1, s2, j + 4) & 63;
  } else {
    sc = (scale_byte(s0, s1, s2, j + 4) & 0xF) | ((scale_byte(s0, s1, s2, j - 4) >> 6) << 4);
    m = (scale_byte(s0, s1, s2, j + 4) >> 4) | ((scale_byte(s0, s1, s2, j) >> 6) << 4);
  }
}

// A lane's 8 values of one step: two groups of 4 consecutive values, group g at x offset at[g]
// (from the step's first value), each value a[g] * q + b[g].
struct Piece {
  float q[8];
  float a[2], b[2];
  int at[2];
};

template <DType T>
struct Lane;

// Q4_K: step s is super-block s (144 bytes, 16-byte aligned: d, dmin, 12 scale bytes, 128 bytes of
// nibbles). Lane l reads nibble bytes 4l..4l+3: pair p = l / 8 (sub-blocks 2p, 2p + 1), values
// 4 (l % 8) .. + 3 of each; value = d sc q - dmin m.
template <>
struct Lane<DType::kQ4_K> {
  static constexpr bool kOffset = true;
  static constexpr int kStepBytes = 144;
  __device__ __forceinline__ static void decode(const std::uint8_t* blk, int lane, Piece& o) {
    const uint4 head = __ldg(reinterpret_cast<const uint4*>(blk));
    const std::uint32_t w = __ldg(reinterpret_cast<const std::uint32_t*>(blk + 16) + lane);
    const float d = __half2float(__ushort_as_half(std::uint16_t(head.x))),
                dmin = __half2float(__ushort_as_half(std::uint16_t(head.x >> 16)));
    const std::uint32_t lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      o.q[i] = byte_plus_2p23(lo, i) - 8388608.f;
      o.q[4 + i] = byte_plus_2p23(hi, i) - 8388608.f;
    }
    const int p = lane / 8;
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      int sc, m;
      scale_min(2 * p + g, head.y, head.z, head.w, sc, m);
      o.a[g] = __fmul_rn(d, float(sc));
      o.b[g] = -__fmul_rn(dmin, float(m));
    }
    o.at[0] = 64 * p + 4 * (lane % 8);
    o.at[1] = o.at[0] + 32;
  }
};

// Q6_K: step s is super-block s (210 bytes, 2-byte aligned: 128 bytes ql, 64 qh, 16 int8 scales,
// d). Lane l reads ql bytes 4l..4l+3: half h = l / 16, quarter qa = (l / 8) % 2 (low nibbles) and
// qa + 2 (high), values 4 (l % 8) .. + 3 of each, their top bits from qh; value = d sc (q - 32).
template <>
struct Lane<DType::kQ6_K> {
  static constexpr bool kOffset = false;
  static constexpr int kStepBytes = 210;
  __device__ __forceinline__ static void decode(const std::uint8_t* blk, int lane, Piece& o) {
    const int half = lane / 16, qa = (lane / 8) % 2, l4 = 4 * (lane % 8);
    const std::uint32_t ql = load4_a2(blk + 4 * lane);
    const std::uint32_t qh = load4_a2(blk + 128 + 32 * half + l4);
    const float d = half_at(blk + 208);
    const auto* sc = reinterpret_cast<const std::int8_t*>(blk + 192 + 8 * half);
    const std::uint32_t lo = (ql & 0x0F0F0F0Fu) | (((qh >> (2 * qa)) & 0x03030303u) << 4);
    const std::uint32_t hi = ((ql >> 4) & 0x0F0F0F0Fu) | (((qh >> (2 * qa + 4)) & 0x03030303u) << 4);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      o.q[i] = byte_plus_2p23(lo, i) - 8388640.f;  // - 2^23 - 32
      o.q[4 + i] = byte_plus_2p23(hi, i) - 8388640.f;
    }
    const int is = l4 / 16;
    o.a[0] = __fmul_rn(d, float(sc[is + 2 * qa]));
    o.a[1] = __fmul_rn(d, float(sc[is + 2 * (qa + 2)]));
    o.b[0] = o.b[1] = 0.f;
    o.at[0] = 128 * half + 32 * qa + l4;
    o.at[1] = o.at[0] + 64;
  }
};

// Q4_0: a step is 8 blocks of 18 bytes (2-byte aligned: d, 16 bytes of nibbles). Lane l reads
// bytes 4 (l % 4) .. + 3 of block l / 4: values 4 (l % 4) .. + 3 (low nibbles) and 16 + those
// (high); value = d (q - 8).
template <>
struct Lane<DType::kQ4_0> {
  static constexpr bool kOffset = false;
  static constexpr int kStepBytes = 8 * 18;
  __device__ __forceinline__ static void decode(const std::uint8_t* step, int lane, Piece& o) {
    const std::uint8_t* blk = step + (lane / 4) * 18;
    const std::uint32_t w = load4_a2(blk + 2 + 4 * (lane % 4));
    const float d = half_at(blk);
    const std::uint32_t lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      o.q[i] = byte_plus_2p23(lo, i) - 8388616.f;  // - 2^23 - 8
      o.q[4 + i] = byte_plus_2p23(hi, i) - 8388616.f;
    }
    o.a[0] = o.a[1] = d;
    o.b[0] = o.b[1] = 0.f;
    o.at[0] = 32 * (lane / 4) + 4 * (lane % 4);
    o.at[1] = o.at[0] + 16;
  }
};

// Q8_0: a step is 8 blocks of 34 bytes (2-byte aligned: d, 32 signed bytes). Lane l reads bytes
// 8 (l % 4) .. + 7 of block l / 4; value = d q (the byte's bits xor 0x80 are q + 128).
template <>
struct Lane<DType::kQ8_0> {
  static constexpr bool kOffset = false;
  static constexpr int kStepBytes = 8 * 34;
  __device__ __forceinline__ static void decode(const std::uint8_t* step, int lane, Piece& o) {
    const std::uint8_t* blk = step + (lane / 4) * 34;
    const std::uint32_t w0 = load4_a2(blk + 2 + 8 * (lane % 4)) ^ 0x80808080u;
    const std::uint32_t w1 = load4_a2(blk + 6 + 8 * (lane % 4)) ^ 0x80808080u;
    const float d = half_at(blk);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      o.q[i] = byte_plus_2p23(w0, i) - 8388736.f;  // - 2^23 - 128
      o.q[4 + i] = byte_plus_2p23(w1, i) - 8388736.f;
    }
    o.a[0] = o.a[1] = d;
    o.b[0] = o.b[1] = 0.f;
    o.at[0] = 32 * (lane / 4) + 8 * (lane % 4);
    o.at[1] = o.at[0] + 4;
  }
};

// The piece's contribution to row . x, x at the step's first value (16-byte aligned).
template <DType T>
__device__ __forceinline__ float piece_dot(const Piece& o, const float* x) {
  float s = 0.f;
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    const float4 v = *reinterpret_cast<const float4*>(x + o.at[g]);
    float qx = o.q[4 * g] * v.x;
    qx = fmaf(o.q[4 * g + 1], v.y, qx);
    qx = fmaf(o.q[4 * g + 2], v.z, qx);
    qx = fmaf(o.q[4 * g + 3], v.w, qx);
    s = fmaf(o.a[g], qx, s);
    if constexpr (Lane<T>::kOffset) s = fmaf(o.b[g], (v.x + v.y) + (v.z + v.w), s);
  }
  return s;
}

// Whether a dtype has lanes here (others take block_kernels.cu's per-value path).
__host__ __device__ constexpr bool has_units(DType t) {
  return t == DType::kQ4_K || t == DType::kQ6_K || t == DType::kQ4_0 || t == DType::kQ8_0;
}

}  // namespace ft::engine::cuda::units
