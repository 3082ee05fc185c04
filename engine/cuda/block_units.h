// Decode-sized products on GGUF blocks, the fast way. A row is read in units of 256 values (one
// K-quant super-block, read by 8 lanes; or eight 32-value blocks, read by 32), every lane a few
// contiguous bytes of it: its loads, and its loads of x, sit next to its neighbours', so a warp's
// requests are whole cache lines, and the per-block work (scales) is spread over 32 values a lane
// for the K-quants. Each of a lane's values becomes an fp32 small integer with one byte permute and
// one add (the exponent trick: 2^23 + code, exact; no int-to-float conversion, a quarter-rate
// instruction), and the block's scale (and offset) multiply the sums of a group (4 or 16 values), not each
// value: sum_i (a q_i + b) x_i = a (sum_i q_i x_i) + b (sum_i x_i).
// The codes and scales are ggml's exactly (a = d * sc rounded as the reference rounds it); only
// the order of the fp32 sums differs from the dequantise-then-dot reference (~1e-7 relative).
// The integer types (Q4_K, Q5_K, Q6_K, Q4_0, Q8_0) also hand out their codes as packed bytes, for
// products with x as two int8 planes (X8Row, codes_dot): four products per dp4a instead of a
// permute, an add and an FMA per value, and 2 bytes of x a value instead of 4.
// Internal to engine/cuda; include from .cu files only.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "ft/engine/dtype.h"

namespace ft::engine::cuda::units {

constexpr int kUnitValues = 256;  // values of a unit: one K-quant super-block, or eight 32-value blocks

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

// 16 bytes from a 2-byte-aligned address as 4 words: loads of the aligned words that hold them,
// funnel-shifted (every word loaded holds a byte of the range, so nothing is read past its last
// aligned word).
__device__ __forceinline__ void load16_a2(const std::uint8_t* p, std::uint32_t (&w)[4]) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  const auto* base = reinterpret_cast<const std::uint32_t*>(addr & ~std::uintptr_t(3));
  const unsigned shift = unsigned(addr & 3) * 8;
  std::uint32_t a[5];
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = __ldg(base + i);
  a[4] = shift ? __ldg(base + 4) : 0u;
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = __funnelshift_r(a[i], a[i + 1], shift);
}

// A small integer (|v| < 2^22) as fp32, exactly, with an add and a subtract (1.5 * 2^23 + v is a
// float whose low mantissa bits are v): full-rate instructions where a conversion is quarter-rate.
__device__ __forceinline__ float small_int_to_float(int v) { return __int_as_float(0x4B400000 + v) - 12582912.f; }

// ggml's get_scale_min_k4 for sub-blocks 2p and 2p + 1, both at once and without a branch, on the
// K-quants' 12 packed scale bytes held as three words: sub-block q < 4 takes its 6-bit scale and min
// from byte q of the first and second word; q >= 4 takes their low 4 bits from byte q - 4 of the third
// and their top 2 bits from the top bits of byte q - 4 of the first (scale) and second (min). Either
// way the pair's bytes sit at the same place, bits 16 (p % 2) .. + 15 of their words. Returns the
// scales (byte g for sub-block 2p + g) in sc and the mins in m.
__device__ __forceinline__ void scale_min_pair(int p, std::uint32_t s0, std::uint32_t s1, std::uint32_t s2,
                                               std::uint32_t& sc, std::uint32_t& m) {
  const unsigned shift = 16u * unsigned(p & 1);
  const std::uint32_t a = s0 >> shift, b = s1 >> shift, c = s2 >> shift;
  if (p < 2) {
    sc = a & 0x3F3Fu;
    m = b & 0x3F3Fu;
  } else {
    sc = (c & 0x0F0Fu) | ((a >> 2) & 0x3030u);
    m = ((c >> 4) & 0x0F0Fu) | ((b >> 2) & 0x3030u);
  }
}

// A lane's 2 * G values of a unit (a 256-value stretch of the row): two groups of G consecutive
// values, group g at x offset at[g] from the unit's first value, each value a[g] * q + b[g].
template <int G>
struct Piece {
  float q[2 * G];
  float a[2], b[2];
  int at[2];
};

// The same 2 * G values as integer codes for the int8 products (codes_dot below): group g's G
// codes packed four to a word as signed bytes, value = a[g] * code + offset, where the offsets of a
// group add up to b[g] times the sum of x over the group's G values (G = 16), or over the group's
// 32-value block divided by the 8 groups that share it (G = 4, the same in total).
template <int G>
struct CodePiece {
  std::uint32_t w[2][G / 4];
  float a[2], b[2];
  int at[2];
};

// A lane's piece with its codes made fp32 (the exponent trick: the float 2^23 + byte, less kBias =
// 2^23 plus the type's offset, exact; signed codes flipped to unsigned by kFlip first), for the types
// whose lanes hand out integer codes: the same values, in the same places, as the codes' (kOffset
// types keep their offsets in b, the others fold them into kBias).
template <typename L>
__device__ __forceinline__ void decode_codes(const std::uint8_t* blk, int j, Piece<L::kGroup>& o) {
  constexpr int G = L::kGroup;
  CodePiece<G> c;
  L::codes(blk, j, c);
#pragma unroll
  for (int g = 0; g < 2; ++g) {
#pragma unroll
    for (int k = 0; k < G / 4; ++k)
#pragma unroll
      for (int i = 0; i < 4; ++i) o.q[G * g + 4 * k + i] = byte_plus_2p23(c.w[g][k] ^ L::kFlip, i) - L::kBias;
    o.a[g] = c.a[g];
    o.b[g] = L::kOffset ? c.b[g] : 0.f;
    o.at[g] = c.at[g];
  }
}

template <DType T>
struct Lane;

// Q4_K's and Q5_K's per-group scales for lane j (pair p = j / 2 of sub-blocks 2p, 2p + 1), from the
// super-block's first 16 bytes (d, dmin, 12 packed scale bytes): value = d sc q - dmin m, and where
// the lane's two groups of 16 values start.
__device__ __forceinline__ void k_quant_scales(const uint4& head, int j, CodePiece<16>& o) {
  const float d = __half2float(__ushort_as_half(std::uint16_t(head.x))),
              dmin = __half2float(__ushort_as_half(std::uint16_t(head.x >> 16)));
  const int p = j / 2;
  std::uint32_t sc, m;
  scale_min_pair(p, head.y, head.z, head.w, sc, m);
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    o.a[g] = __fmul_rn(d, byte_plus_2p23(sc, g) - 8388608.f);
    o.b[g] = -__fmul_rn(dmin, byte_plus_2p23(m, g) - 8388608.f);
  }
  o.at[0] = 64 * p + 16 * (j % 2);
  o.at[1] = o.at[0] + 32;
}

// Q4_K: a unit is a super-block (144 bytes, 16-byte aligned: d, dmin, 12 scale bytes, 128 bytes
// of nibbles) read by 8 lanes, 16 nibble bytes each: lane j holds bytes 16j..16j+15, of pair p =
// j / 2 (sub-blocks 2p, 2p + 1), values 16 (j % 2) .. + 15 of each; value = d sc q - dmin m.
// Q5_K (Five): 176 bytes, 32 bytes of fifth bits between the scales and the nibbles, read as Q4_K's;
// lane j also takes the 16 fifth-bit bytes qh[16 (j % 2) ..] that its values share with every pair
// (bit 2p for the low nibbles, 2p + 1 for the high), q 0..31.
template <bool Five>
struct KQuantLane {
  static constexpr bool kOffset = true;
  static constexpr int kUnitBytes = Five ? 176 : 144, kLanes = 8, kGroup = 16;
  static constexpr std::uint32_t kFlip = 0u;
  static constexpr float kBias = 8388608.f;
  __device__ __forceinline__ static void decode(const std::uint8_t* blk, int j, Piece<kGroup>& o) {
    decode_codes<KQuantLane>(blk, j, o);
  }
  __device__ __forceinline__ static void codes(const std::uint8_t* blk, int j, CodePiece<kGroup>& o) {
    const uint4 head = __ldg(reinterpret_cast<const uint4*>(blk));
    const uint4 w = __ldg(reinterpret_cast<const uint4*>(blk + (Five ? 48 : 16)) + j);
    const std::uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      o.w[0][k] = words[k] & 0x0F0F0F0Fu;
      o.w[1][k] = (words[k] >> 4) & 0x0F0F0F0Fu;
    }
    if constexpr (Five) {
      const uint4 h = __ldg(reinterpret_cast<const uint4*>(blk + 16) + (j % 2));
      const std::uint32_t high[4] = {h.x, h.y, h.z, h.w};
      const int p = j / 2;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        o.w[0][k] |= ((high[k] >> (2 * p)) & 0x01010101u) << 4;
        o.w[1][k] |= ((high[k] >> (2 * p + 1)) & 0x01010101u) << 4;
      }
    }
    k_quant_scales(head, j, o);
  }
};
template <>
struct Lane<DType::kQ4_K> : KQuantLane<false> {};
template <>
struct Lane<DType::kQ5_K> : KQuantLane<true> {};

// Q6_K: a unit is a super-block (210 bytes, 2-byte aligned: 128 bytes ql, 64 qh, 16 int8 scales,
// d) read by 8 lanes: lane j holds ql bytes 16j..16j+15: half h = j / 4, quarter qa = (j / 2) % 2
// (low nibbles) and qa + 2 (high), values 16 (j % 2) .. + 15 of each, their top bits from qh;
// value = d sc (q - 32), one scale per group.
template <>
struct Lane<DType::kQ6_K> {
  static constexpr bool kOffset = false;
  static constexpr int kUnitBytes = 210, kLanes = 8, kGroup = 16;
  static constexpr std::uint32_t kFlip = 0u;
  static constexpr float kBias = 8388640.f;
  __device__ __forceinline__ static void decode(const std::uint8_t* blk, int j, Piece<kGroup>& o) {
    decode_codes<Lane>(blk, j, o);
  }
  // Codes 0..63 (the stored bits); the -32 is the offset, b = -32 a.
  __device__ __forceinline__ static void codes(const std::uint8_t* blk, int j, CodePiece<kGroup>& o) {
    const int half = j / 4, qa = (j / 2) % 2, l16 = 16 * (j % 2);
    const float d = half_at(blk + 208);
    const auto* sc = reinterpret_cast<const std::int8_t*>(blk + 192 + 8 * half);
    std::uint32_t ql[4], qh[4];
    load16_a2(blk + 16 * j, ql);
    load16_a2(blk + 128 + 32 * half + l16, qh);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      o.w[0][k] = (ql[k] & 0x0F0F0F0Fu) | (((qh[k] >> (2 * qa)) & 0x03030303u) << 4);
      o.w[1][k] = ((ql[k] >> 4) & 0x0F0F0F0Fu) | (((qh[k] >> (2 * qa + 4)) & 0x03030303u) << 4);
    }
    const int is = j % 2;
    o.a[0] = __fmul_rn(d, small_int_to_float(sc[is + 2 * qa]));
    o.a[1] = __fmul_rn(d, small_int_to_float(sc[is + 2 * (qa + 2)]));
    o.b[0] = -32.f * o.a[0];
    o.b[1] = -32.f * o.a[1];
    o.at[0] = 128 * half + 32 * qa + l16;
    o.at[1] = o.at[0] + 64;
  }
};

// Q4_0: a unit is 8 blocks of 18 bytes (2-byte aligned: d, 16 bytes of nibbles) read by 32 lanes:
// lane l holds bytes 4 (l % 4) .. + 3 of block l / 4: values 4 (l % 4) .. + 3 (low nibbles) and 16
// + those (high); value = d (q - 8).
template <>
struct Lane<DType::kQ4_0> {
  static constexpr bool kOffset = false;
  static constexpr int kUnitBytes = 8 * 18, kLanes = 32, kGroup = 4;
  static constexpr std::uint32_t kFlip = 0u;
  static constexpr float kBias = 8388616.f;
  __device__ __forceinline__ static void decode(const std::uint8_t* blk, int j, Piece<kGroup>& o) {
    decode_codes<Lane>(blk, j, o);
  }
  // Codes 0..15; the -8 is the offset, b = -8 d.
  __device__ __forceinline__ static void codes(const std::uint8_t* unit, int lane, CodePiece<kGroup>& o) {
    const std::uint8_t* blk = unit + (lane / 4) * 18;
    const std::uint32_t w = load4_a2(blk + 2 + 4 * (lane % 4));
    const float d = half_at(blk);
    o.w[0][0] = w & 0x0F0F0F0Fu;
    o.w[1][0] = (w >> 4) & 0x0F0F0F0Fu;
    o.a[0] = o.a[1] = d;
    o.b[0] = o.b[1] = -8.f * d;
    o.at[0] = 32 * (lane / 4) + 4 * (lane % 4);
    o.at[1] = o.at[0] + 16;
  }
};

// Q8_0: a unit is 8 blocks of 34 bytes (2-byte aligned: d, 32 signed bytes) read by 32 lanes:
// lane l holds bytes 8 (l % 4) .. + 7 of block l / 4; value = d q (the byte's bits xor 0x80 are
// q + 128).
template <>
struct Lane<DType::kQ8_0> {
  static constexpr bool kOffset = false;
  static constexpr int kUnitBytes = 8 * 34, kLanes = 32, kGroup = 4;
  static constexpr std::uint32_t kFlip = 0x80808080u;
  static constexpr float kBias = 8388736.f;
  __device__ __forceinline__ static void decode(const std::uint8_t* blk, int j, Piece<kGroup>& o) {
    decode_codes<Lane>(blk, j, o);
  }
  // The stored signed bytes are the codes.
  __device__ __forceinline__ static void codes(const std::uint8_t* unit, int lane, CodePiece<kGroup>& o) {
    const std::uint8_t* blk = unit + (lane / 4) * 34;
    o.w[0][0] = load4_a2(blk + 2 + 8 * (lane % 4));
    o.w[1][0] = load4_a2(blk + 6 + 8 * (lane % 4));
    o.a[0] = o.a[1] = half_at(blk);
    o.b[0] = o.b[1] = 0.f;
    o.at[0] = 32 * (lane / 4) + 8 * (lane % 4);
    o.at[1] = o.at[0] + 4;
  }
};

// F8_E4M3_B128 (safetensors FP8 repacked, dtype.h): a unit is 2 blocks of 132 bytes (4-byte aligned:
// an fp32 scale, 128 E4M3 codes) read by 32 lanes: lane l holds codes 8 (l % 16) .. + 7 of block
// l / 16, two groups of 4; value = code * d. E4M3 pairs convert to fp16 pairs in one instruction on
// sm_89+ (exact: fp16 holds every E4M3 value), then to fp32.
template <>
struct Lane<DType::kF8E4M3B128> {
  static constexpr bool kOffset = false;
  static constexpr int kUnitBytes = 2 * 132, kLanes = 32, kGroup = 4;
  __device__ __forceinline__ static void decode(const std::uint8_t* unit, int lane, Piece<kGroup>& o) {
    const std::uint8_t* blk = unit + (lane / 16) * 132;
    const auto* codes = reinterpret_cast<const std::uint32_t*>(blk + 4 + 8 * (lane % 16));
    const float d = __ldg(reinterpret_cast<const float*>(blk));
    const std::uint32_t words[2] = {__ldg(codes), __ldg(codes + 1)};
#pragma unroll
    for (int k = 0; k < 2; ++k)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const __half2 pair = __half2(__nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(words[k] >> (16 * h)), __NV_E4M3));
        const float2 f = __half22float2(pair);
        o.q[4 * k + 2 * h] = f.x;
        o.q[4 * k + 2 * h + 1] = f.y;
      }
    o.a[0] = o.a[1] = d;
    o.b[0] = o.b[1] = 0.f;
    o.at[0] = 128 * (lane / 16) + 8 * (lane % 16);
    o.at[1] = o.at[0] + 4;
  }
};

// NVFP4 (dtype.h): a unit is 4 blocks of 40 bytes (4-byte aligned: the fp32 tensor scale, 4 E4M3
// group scales, 32 bytes of E2M1 pairs) read by 32 lanes: lane l holds code bytes 4 (l % 8) .. + 3
// of block l / 8, values 8 (l % 8) .. + 7 of one 16-value group, two groups of 4 here. An E2M1 code
// (s, e, m) is the fp16 s.000ee.m000000000 times 2^14, exactly; the 2^14 joins the scale
// (value = code * (e4m3 * global), the product the reference rounds, times a power of two).
template <>
struct Lane<DType::kNVFP4> {
  static constexpr bool kOffset = false;
  static constexpr int kUnitBytes = 4 * 40, kLanes = 32, kGroup = 4;
  __device__ __forceinline__ static void decode(const std::uint8_t* unit, int lane, Piece<kGroup>& o) {
    const std::uint8_t* blk = unit + (lane / 8) * 40;
    const std::uint32_t w = __ldg(reinterpret_cast<const std::uint32_t*>(blk + 8 + 4 * (lane % 8)));
    const float global = __ldg(reinterpret_cast<const float*>(blk));
    const int g = (lane % 8) / 2;
    const std::uint32_t scale_code = (__ldg(reinterpret_cast<const std::uint32_t*>(blk + 4)) >> (8 * g)) & 0xFF;
    const float d =
        __fmul_rn(__half2float(__half(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(scale_code), __NV_E4M3))), global);
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const std::uint32_t x =
          __byte_perm(w, 0, k == 0 ? 0x4140u : 0x4342u);  // bytes 2k, 2k + 1 in the halves' low bytes
      const std::uint32_t lo = ((x & 0x00080008u) << 12) | ((x & 0x00070007u) << 9);  // values 4k, 4k + 2
      const std::uint32_t hi = ((x & 0x00800080u) << 8) | ((x & 0x00700070u) << 5);   // values 4k + 1, 4k + 3
      const float2 fl = __half22float2(*reinterpret_cast<const __half2*>(&lo));
      const float2 fh = __half22float2(*reinterpret_cast<const __half2*>(&hi));
      o.q[4 * k] = fl.x;
      o.q[4 * k + 1] = fh.x;
      o.q[4 * k + 2] = fl.y;
      o.q[4 * k + 3] = fh.y;
    }
    o.a[0] = o.a[1] = d * 16384.f;  // 2^14, exact
    o.b[0] = o.b[1] = 0.f;
    o.at[0] = 64 * (lane / 8) + 8 * (lane % 8);
    o.at[1] = o.at[0] + 4;
  }
};

// The piece's contribution to row . x, x at the unit's first value (16-byte aligned).
template <DType T>
__device__ __forceinline__ float piece_dot(const Piece<Lane<T>::kGroup>& o, const float* x) {
  constexpr int G = Lane<T>::kGroup;
  float s = 0.f;
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    float qx = 0.f, sx = 0.f;
#pragma unroll
    for (int v = 0; v < G / 4; ++v) {
      const float4 a = *reinterpret_cast<const float4*>(x + o.at[g] + 4 * v);
      const float* q = o.q + G * g + 4 * v;
      qx = fmaf(q[0], a.x, qx);
      qx = fmaf(q[1], a.y, qx);
      qx = fmaf(q[2], a.z, qx);
      qx = fmaf(q[3], a.w, qx);
      if constexpr (Lane<T>::kOffset) sx += (a.x + a.y) + (a.z + a.w);
    }
    s = fmaf(o.a[g], qx, s);
    if constexpr (Lane<T>::kOffset) s = fmaf(o.b[g], sx, s);
  }
  return s;
}

// Activations for the integer products, per 32-value block of a row: x ~= d1 hi + d2 lo with hi, lo
// int8 (d1 = max |x| / 127, d2 = d1 / 254: within 1/64,516 of the block's largest value, what
// bf16 hi + lo gives the prefill tiles), and the fp32 sums of its two 16-value halves.
struct X8Row {
  const std::int8_t* hi;  // the unit's first value
  const std::int8_t* lo;
  const float4* meta;  // the unit's first block: {d1, d2, sum of values 0..15, sum of 16..31}
};

// What a lane's piece multiplies in x (X8Row): the two groups' hi and lo codes and their blocks'
// scales and sums. A lane's groups sit at the same places in every unit of its step (they depend on
// the lane alone), so the products of several rows at one step (gate and up, a block's rows of
// down) load them once.
template <int G>
struct XPiece {
  std::uint32_t hi[2][G / 4], lo[2][G / 4];
  float4 meta[2];
};

template <DType T>
__device__ __forceinline__ XPiece<Lane<T>::kGroup> x_piece(const int (&at)[2], const X8Row& x) {
  constexpr int G = Lane<T>::kGroup;
  XPiece<G> o;
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    if constexpr (G == 16) {
      const uint4 h = *reinterpret_cast<const uint4*>(x.hi + at[g]);
      const uint4 l = *reinterpret_cast<const uint4*>(x.lo + at[g]);
      o.hi[g][0] = h.x, o.hi[g][1] = h.y, o.hi[g][2] = h.z, o.hi[g][3] = h.w;
      o.lo[g][0] = l.x, o.lo[g][1] = l.y, o.lo[g][2] = l.z, o.lo[g][3] = l.w;
    } else {
      o.hi[g][0] = *reinterpret_cast<const std::uint32_t*>(x.hi + at[g]);
      o.lo[g][0] = *reinterpret_cast<const std::uint32_t*>(x.lo + at[g]);
    }
    o.meta[g] = x.meta[at[g] / 32];
  }
  return o;
}

// The piece's contribution to row . x, four products per dp4a. Exact integer sums of codes times hi
// and times lo, scaled in fp32; the offsets through the block sums.
template <DType T>
__device__ __forceinline__ float codes_dot(const CodePiece<Lane<T>::kGroup>& o, const XPiece<Lane<T>::kGroup>& x) {
  constexpr int G = Lane<T>::kGroup;
  float s = 0.f;
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    int s1 = 0, s2 = 0;
#pragma unroll
    for (int k = 0; k < G / 4; ++k) {
      s1 = __dp4a(int(o.w[g][k]), int(x.hi[g][k]), s1);
      s2 = __dp4a(int(o.w[g][k]), int(x.lo[g][k]), s2);
    }
    const float4 m = x.meta[g];
    s = fmaf(o.a[g], fmaf(m.x, small_int_to_float(s1), m.y * small_int_to_float(s2)), s);
    const float sum = G == 16 ? ((o.at[g] & 16) ? m.w : m.z) : 0.125f * (m.z + m.w);
    s = fmaf(o.b[g], sum, s);
  }
  return s;
}

template <DType T>
__device__ __forceinline__ float codes_dot(const CodePiece<Lane<T>::kGroup>& o, const X8Row& x) {
  return codes_dot<T>(o, x_piece<T>(o.at, x));
}

// Whether a dtype's lanes also read integer codes (codes_dot).
__host__ __device__ constexpr bool has_codes(DType t) {
  return t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K || t == DType::kQ4_0 || t == DType::kQ8_0;
}

// Whether a dtype has lanes here (others take block_kernels.cu's per-value path).
__host__ __device__ constexpr bool has_units(DType t) {
  return t == DType::kQ4_K || t == DType::kQ5_K || t == DType::kQ6_K || t == DType::kQ4_0 || t == DType::kQ8_0 ||
         t == DType::kF8E4M3B128 || t == DType::kNVFP4;
}

}  // namespace ft::engine::cuda::units
