#include "ops/cpu/int8_dots.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "ft/engine/bf16.h"
#include "ops/block_fields.h"
#include "ops/cpu/simd.h"

namespace ft::engine::cpu {

namespace {

// Block b's (d1, d2) from its largest magnitude into d; false when its codes are all zero (a NaN or
// an infinity in it, or d2 underflowing).
inline bool block_scales(float amax, bool finite, float* d) {
  d[0] = finite ? amax / 127.f : std::nanf("");
  d[1] = d[0] / 254.f;
  return d[1] > 0.f;  // false for NaN too
}

// One row of `cols` values: per 256, d1 = max |x| / 127 and d2 = d1 / 254; hi = round(x / d1),
// lo = round((x - d1 hi) / d2), both within [-127, 127]; the sums in a fixed order. A block holding
// a NaN or an infinity gets NaN scales (and zero codes), so the products it enters are NaN, as with
// fp32 activations; one so small that d2 underflows to zero (|x| < ~4e-34) gets zero codes.
void quantize_row(const float* x, std::size_t cols, std::int8_t* hi, std::int8_t* lo, float* d, float* s16,
                  float* s32) {
  for (std::size_t b = 0; b < cols / kX8Block; ++b) {
    const float* v = x + b * kX8Block;
    float amax = 0.f;
    bool finite = true;
    for (std::size_t i = 0; i < kX8Block; ++i) {
      amax = std::max(amax, std::fabs(v[i]));
      finite = finite && std::isfinite(v[i]);
    }
    const bool codes = block_scales(amax, finite, d + 2 * b);
    const float d1 = d[2 * b], d2 = d[2 * b + 1];
    for (std::size_t i = 0; i < kX8Block; ++i) {
      int q1 = 0, q2 = 0;
      if (codes) {
        q1 = std::clamp(int(std::nearbyint(v[i] / d1)), -127, 127);
        q2 = std::clamp(int(std::nearbyint(std::fma(-float(q1), d1, v[i]) / d2)), -127, 127);
      }
      hi[b * kX8Block + i] = std::int8_t(q1);
      lo[b * kX8Block + i] = std::int8_t(q2);
    }
  }
  for (std::size_t g = 0; g < cols / 16; ++g) {
    float s = 0.f;
    for (std::size_t i = 0; i < 16; ++i) s += x[16 * g + i];
    s16[g] = s;
  }
  for (std::size_t g = 0; g < cols / 32; ++g) s32[g] = s16[2 * g] + s16[2 * g + 1];
}

#if FT_X86
FT_SIMD_BEGIN

// quantize_row 16 values a vector, the same bits: the same IEEE divisions, fma and
// round-to-nearest-even, and each 16-value sum added in the same order (one group per lane,
// gathered with a stride of 16).
FT_TARGET_AVX512 void quantize_row512(const float* x, std::size_t cols, std::int8_t* hi, std::int8_t* lo, float* d,
                                      float* s16, float* s32) {
  const __m512 inf = _mm512_set1_ps(INFINITY), lim = _mm512_set1_ps(127.f), neg = _mm512_set1_ps(-127.f);
  const __m512i group = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(16));
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  for (std::size_t b = 0; b < cols / kX8Block; ++b) {
    const float* v = x + b * kX8Block;
    __m512 amax = _mm512_setzero_ps();
    __mmask16 bad = 0;
    for (std::size_t k = 0; k < kX8Block; k += 16) {
      const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(v + k));
      amax = _mm512_max_ps(amax, a);
      bad |= _mm512_cmp_ps_mask(a, inf, _CMP_NLT_UQ);  // infinite or NaN
    }
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, amax);
    float m = 0.f;
    for (float l : lanes) m = std::max(m, l);
    const bool codes = block_scales(m, bad == 0, d + 2 * b);
    const float d1 = d[2 * b], d2 = d[2 * b + 1];
    std::int8_t* h = hi + b * kX8Block;
    std::int8_t* l = lo + b * kX8Block;
    if (!codes) {
      std::memset(h, 0, kX8Block);
      std::memset(l, 0, kX8Block);
    } else {
      const __m512 vd1 = _mm512_set1_ps(d1), vd2 = _mm512_set1_ps(d2);
      for (std::size_t k = 0; k < kX8Block; k += 16) {
        const __m512 z = _mm512_loadu_ps(v + k);
        const __m512 q1 = _mm512_min_ps(_mm512_max_ps(_mm512_roundscale_ps(_mm512_div_ps(z, vd1), kNearest), neg), lim);
        const __m512 r = _mm512_fnmadd_ps(q1, vd1, z);
        const __m512 q2 = _mm512_min_ps(_mm512_max_ps(_mm512_roundscale_ps(_mm512_div_ps(r, vd2), kNearest), neg), lim);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(h + k), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q1)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(l + k), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q2)));
      }
    }
    __m512 sum = _mm512_setzero_ps();
    for (int i = 0; i < 16; ++i) sum = _mm512_add_ps(sum, _mm512_i32gather_ps(group, v + i, 4));
    _mm512_storeu_ps(s16 + 16 * b, sum);
  }
  for (std::size_t g = 0; g < cols / 32; ++g) s32[g] = s16[2 * g] + s16[2 * g + 1];
}

// The same with 8 lanes.
FT_TARGET_AVX2 void quantize_row256(const float* x, std::size_t cols, std::int8_t* hi, std::int8_t* lo, float* d,
                                    float* s16, float* s32) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(INFINITY), lim = _mm256_set1_ps(127.f), neg = _mm256_set1_ps(-127.f);
  const __m256i group = _mm256_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  // 32 values as int8, in order: four vectors of 8 int32 packed down twice, then the 32-bit
  // pieces the in-lane packs interleaved put back in place.
  const auto store32 = [&](const __m256(&q)[4], std::int8_t* out) FT_TARGET_AVX2 {
    const __m256i ab = _mm256_packs_epi32(_mm256_cvtps_epi32(q[0]), _mm256_cvtps_epi32(q[1]));
    const __m256i cd = _mm256_packs_epi32(_mm256_cvtps_epi32(q[2]), _mm256_cvtps_epi32(q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                        _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), order));
  };
  for (std::size_t b = 0; b < cols / kX8Block; ++b) {
    const float* v = x + b * kX8Block;
    __m256 amax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (std::size_t k = 0; k < kX8Block; k += 8) {
      const __m256 a = _mm256_and_ps(_mm256_loadu_ps(v + k), magnitude);
      amax = _mm256_max_ps(amax, a);
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, amax);
    float m = 0.f;
    for (float l : lanes) m = std::max(m, l);
    const bool codes = block_scales(m, _mm256_movemask_ps(bad) == 0, d + 2 * b);
    const float d1 = d[2 * b], d2 = d[2 * b + 1];
    std::int8_t* h = hi + b * kX8Block;
    std::int8_t* l = lo + b * kX8Block;
    if (!codes) {
      std::memset(h, 0, kX8Block);
      std::memset(l, 0, kX8Block);
    } else {
      const __m256 vd1 = _mm256_set1_ps(d1), vd2 = _mm256_set1_ps(d2);
      for (std::size_t k = 0; k < kX8Block; k += 32) {
        __m256 q1[4], q2[4];
        for (int j = 0; j < 4; ++j) {
          const __m256 z = _mm256_loadu_ps(v + k + 8 * j);
          q1[j] = _mm256_min_ps(_mm256_max_ps(_mm256_round_ps(_mm256_div_ps(z, vd1), kNearest), neg), lim);
          const __m256 r = _mm256_fnmadd_ps(q1[j], vd1, z);
          q2[j] = _mm256_min_ps(_mm256_max_ps(_mm256_round_ps(_mm256_div_ps(r, vd2), kNearest), neg), lim);
        }
        store32(q1, h + k);
        store32(q2, l + k);
      }
    }
    for (int half = 0; half < 2; ++half) {
      __m256 sum = _mm256_setzero_ps();
      for (int i = 0; i < 16; ++i) sum = _mm256_add_ps(sum, _mm256_i32gather_ps(v + 128 * half + i, group, 4));
      _mm256_storeu_ps(s16 + 16 * b + 8 * half, sum);
    }
  }
  for (std::size_t g = 0; g < cols / 32; ++g) s32[g] = s16[2 * g] + s16[2 * g + 1];
}

FT_TARGET_AVX2 inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// The 12 bytes of 6-bit scales and mins at q (Q4_K, Q5_K) as bytes [sc_0..7 | m_0..7],
// get_scale_min_k4 for every j at once in a few byte shuffles (the scalar unpacking was a fifth of
// a super-block's instructions): for j < 4, sc_j = q_j & 63 and m_j = q_j+4 & 63; for j >= 4,
// sc_j = (q_j+4 & 15) | (q_j-4 >> 6) << 4 and m_j = (q_j+4 >> 4) | (q_j >> 6) << 4. Reads 16 bytes
// from q: the block's nibbles follow the 12.
FT_TARGET_AVX2 inline __m128i k_quant_scales(const std::uint8_t* q) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m128i low = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i top = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  // Bytes 12..15 (m_4..7) take the high nibbles of q_8..11; a 16-bit shift brings the neighbour
  // byte's bits in above them, which the masks drop.
  const __m128i nibbles = _mm_blend_epi16(low, _mm_srli_epi16(low, 4), 0xC0);
  const __m128i keep = _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15);
  return _mm_or_si128(_mm_and_si128(nibbles, keep), _mm_and_si128(_mm_srli_epi16(top, 2), _mm_set1_epi8(0x30)));
}

namespace avx2 {
#define FT_I8_TARGET FT_TARGET_AVX2
#define FT_I8_ADD_PAIRS(acc, a, b) _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
#include "ops/cpu/int8_dots_avx2.inc"
#undef FT_I8_ADD_PAIRS
#undef FT_I8_TARGET
}  // namespace avx2

namespace avx_vnni {
#define FT_I8_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#define FT_I8_ADD_PAIRS(acc, a, b) _mm256_dpwssd_avx_epi32(acc, a, b)
#include "ops/cpu/int8_dots_avx2.inc"
#undef FT_I8_ADD_PAIRS
#undef FT_I8_TARGET
}  // namespace avx_vnni

// The same products 64 values a vector on AVX-512 with VNNI: VPDPWSSD applies the sub-block
// scales and accumulates in one instruction, so a token costs two instructions per 64 values and
// plane where AVX2 takes six. Integer sums are the AVX2 kernels'; only the fp32 lanes they are
// reduced over differ.
#define FT_TARGET_AVX512VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

// Word lanes of a permutation: lane j takes source word pick(j).
template <typename Pick>
FT_TARGET_AVX512VNNI inline __m512i word_index(Pick pick) {
  alignas(64) std::int16_t idx[32];
  for (int j = 0; j < 32; ++j) idx[j] = std::int16_t(pick(j));
  return _mm512_load_si512(idx);
}

// acc += d (d1 sum_c codes_c . hi_c scale_c + d2 sum_c codes_c . lo_c scale_c) over super-block i
// of token t, four 64-value pieces.
FT_TARGET_AVX512VNNI inline __m512 add_super_block512(const __m512i (&codes)[4], const __m512i (&scale)[4],
                                                      const X8Rows& x, std::size_t t, std::size_t i, float d,
                                                      __m512 acc) {
  const std::int8_t* hi = x.hi(t) + 256 * i;
  const std::int8_t* lo = x.lo(t) + 256 * i;
  __m512i sh = _mm512_setzero_si512(), sl = _mm512_setzero_si512();
  for (int c = 0; c < 4; ++c) {
    sh = _mm512_dpwssd_epi32(sh, _mm512_maddubs_epi16(codes[c], _mm512_loadu_si512(hi + 64 * c)), scale[c]);
    sl = _mm512_dpwssd_epi32(sl, _mm512_maddubs_epi16(codes[c], _mm512_loadu_si512(lo + 64 * c)), scale[c]);
  }
  const float* dd = x.scales(t) + 2 * i;
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sh), _mm512_set1_ps(d * dd[0]), acc);
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sl), _mm512_set1_ps(d * dd[1]), acc);
}

// Q4_K: the 32 nibble bytes of piece c hold sub-block 2c (low nibbles) and 2c + 1 (high), so with
// the high nibbles in the upper half a vector is values 64c .. 64c + 63 in order. Q5_K (Five) is
// the same with 32 bytes of fifth bits before the nibbles (bit j of byte l: sub-block j's value
// l): codes 0..31, 2 x 31 x 127 still within VPMADDUBSW's int16.
template <int NT, bool Five = false>
FT_TARGET_AVX512VNNI void q4_k_dots512(const std::uint8_t* b, std::size_t cols, const X8Rows& x, std::size_t t0,
                                       float* out) {
  constexpr std::size_t kBytes = Five ? 176 : 144, kNibbles = Five ? 48 : 16;
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512i pick[4];  // piece c: words [sc_2c x 16 | sc_2c+1 x 16]
  for (int c = 0; c < 4; ++c) pick[c] = word_index([c](int j) { return 2 * c + j / 16; });
  __m512 acc[NT];
  __m256 offs[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = _mm512_setzero_ps();
    offs[t] = _mm256_setzero_ps();
  }
  const std::size_t ahead = prefetch_distance();
  for (std::size_t i = 0; i < cols / 256; ++i, b += kBytes) {
    if (ahead) prefetch(b + ahead, kBytes);
    const float d = f16_at_f16c(b), dmin = f16_at_f16c(b + 2);
    const __m256i sm = _mm256_cvtepu8_epi16(k_quant_scales(b + 4));  // sc | m, int16
    __m512i scale[4], codes[4];
    const __m256i qh = Five ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16)) : _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      scale[c] = _mm512_permutexvar_epi16(pick[c], _mm512_castsi256_si512(sm));
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kNibbles + 32 * c));
      codes[c] = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1), low);
      if constexpr (Five) {
        // Bit 2c (values of sub-block 2c) and 2c + 1 of every qh byte, moved to bit 4.
        const __m256i one = _mm256_set1_epi8(1);
        const __m256i b0 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c)), one);
        const __m256i b1 = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c + 1)), one);
        const __m512i top = _mm512_inserti64x4(_mm512_castsi256_si512(b0), b1, 1);
        codes[c] = _mm512_or_si512(codes[c], _mm512_slli_epi16(top, 4));
      }
    }
    const __m256 m =
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(sm, 1))), _mm256_set1_ps(dmin));
    for (int t = 0; t < NT; ++t) {
      acc[t] = add_super_block512(codes, scale, x, t0 + t, i, d, acc[t]);
      offs[t] = _mm256_fmadd_ps(m, _mm256_loadu_ps(x.sums32(t0 + t) + 8 * i), offs[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum512(acc[t]) - hsum256(offs[t]);
}

// Q6_K: the 64 low-bit bytes of half h are values 128h .. 128h + 63 (low nibbles) and 128h + 64 ..
// 128h + 127 (high); the 32 top-bit bytes, broadcast to both halves, shift by lane half.
template <int NT>
FT_TARGET_AVX512VNNI void q6_k_dots512(const std::uint8_t* b, std::size_t cols, const X8Rows& x, std::size_t t0,
                                       float* out) {
  const __m512i low = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
  const __m512i top_lo = word_index([](int j) { return j < 16 ? 4 : 2; });  // left shifts, values 0 .. 63
  const __m512i top_hi = word_index([](int j) { return j < 16 ? 0 : 2; });  // right shifts, values 64 .. 127
  __m512i pick[4];  // piece c: a scale per 16 values, i.e. per 8 words
  for (int c = 0; c < 4; ++c) pick[c] = word_index([c](int j) { return 4 * c + j / 8; });
  __m512 acc[NT];
  __m256 offs[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = _mm512_setzero_ps();
    offs[t] = _mm256_setzero_ps();
  }
  const std::size_t ahead = prefetch_distance();
  for (std::size_t i = 0; i < cols / 256; ++i, b += 210) {
    if (ahead) prefetch(b + ahead, 210);
    const float d = f16_at_f16c(b + 208);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
    const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(sc8));
    __m512i codes[4], scale[4];
    for (int h = 0; h < 2; ++h) {
      const __m512i a = _mm512_loadu_si512(b + 64 * h);
      const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h)));
      codes[2 * h] = _mm512_or_si512(_mm512_and_si512(a, low), _mm512_and_si512(_mm512_sllv_epi16(q, top_lo), top));
      codes[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(a, 4), low),
                                         _mm512_and_si512(_mm512_srlv_epi16(q, top_hi), top));
    }
    for (int c = 0; c < 4; ++c) scale[c] = _mm512_permutexvar_epi16(pick[c], sc16);
    const __m256 sc_lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8));
    const __m256 sc_hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8)));
    const __m256 off = _mm256_set1_ps(32.f * d);
    for (int t = 0; t < NT; ++t) {
      acc[t] = add_super_block512(codes, scale, x, t0 + t, i, d, acc[t]);
      const float* s = x.sums16(t0 + t) + 16 * i;
      const __m256 corr = _mm256_fmadd_ps(sc_lo, _mm256_loadu_ps(s), _mm256_mul_ps(sc_hi, _mm256_loadu_ps(s + 8)));
      offs[t] = _mm256_fmadd_ps(corr, off, offs[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = hsum512(acc[t]) - hsum256(offs[t]);
}

#define FT_INT8_KERNEL(Target, Name, fn)                                                                      \
  Target void Name(const std::uint8_t* row, std::size_t cols, const X8Rows& x, std::size_t t0, std::size_t n, \
                   float* out) {                                                                              \
    switch (n) {                                                                                              \
      case 1:                                                                                                 \
        return fn<1>(row, cols, x, t0, out);                                                                  \
      case 2:                                                                                                 \
        return fn<2>(row, cols, x, t0, out);                                                                  \
      case 3:                                                                                                 \
        return fn<3>(row, cols, x, t0, out);                                                                  \
      default:                                                                                                \
        return fn<4>(row, cols, x, t0, out);                                                                  \
    }                                                                                                         \
  }
FT_INT8_KERNEL(FT_TARGET_AVX2, q4_k_int8, avx2::q4_k_dots)
FT_INT8_KERNEL(FT_TARGET_AVX2, q6_k_int8, avx2::q6_k_dots)
FT_INT8_KERNEL(__attribute__((target("avx2,fma,f16c,avxvnni"))), q4_k_int8_vnni256, avx_vnni::q4_k_dots)
FT_INT8_KERNEL(__attribute__((target("avx2,fma,f16c,avxvnni"))), q6_k_int8_vnni256, avx_vnni::q6_k_dots)
FT_INT8_KERNEL(FT_TARGET_AVX2, q5_k_int8, avx2::q5_k_dots)
FT_INT8_KERNEL(__attribute__((target("avx2,fma,f16c,avxvnni"))), q5_k_int8_vnni256, avx_vnni::q5_k_dots)
FT_INT8_KERNEL(FT_TARGET_AVX512VNNI, q4_k_int8_avx512, q4_k_dots512)
template <int NT>
FT_TARGET_AVX512VNNI void q5_k_dots512(const std::uint8_t* b, std::size_t cols, const X8Rows& x, std::size_t t0,
                                       float* out) {
  q4_k_dots512<NT, true>(b, cols, x, t0, out);
}
FT_INT8_KERNEL(FT_TARGET_AVX512VNNI, q5_k_int8_avx512, q5_k_dots512)
FT_INT8_KERNEL(FT_TARGET_AVX512VNNI, q6_k_int8_avx512, q6_k_dots512)
#undef FT_INT8_KERNEL

FT_SIMD_END
#endif

bool int8_enabled() {
  static const bool on = [] {
    const char* env = std::getenv("FT_CPU_INT8");
    return !(env && std::strcmp(env, "0") == 0);
  }();
  return on;
}

#if FT_X86
// FT_CPU_INT8=avx2 keeps the 256-bit kernels on an AVX-512 CPU, to compare the two on one machine.
bool avx512_vnni() {
  static const bool on = [] {
    const char* env = std::getenv("FT_CPU_INT8");
    return __builtin_cpu_supports("avx512vnni") && !(env && std::strcmp(env, "avx2") == 0);
  }();
  return on;
}
#endif

}  // namespace

void X8Rows::quantize(Scratch& scratch, const float* x, std::size_t T, std::size_t cols, std::size_t ld, CpuIsa isa) {
  using RowFn = void (*)(const float*, std::size_t, std::int8_t*, std::int8_t*, float*, float*, float*);
  RowFn quantize_one = quantize_row;
#if FT_X86
  if (isa >= CpuIsa::kAvx512 && cpu_isa_supported(CpuIsa::kAvx512)) {
    quantize_one = quantize_row512;
  } else if (isa >= CpuIsa::kAvx2 && cpu_isa_supported(CpuIsa::kAvx2)) {
    quantize_one = quantize_row256;
  }
#endif
  cols_ = cols;
  rows_ = nullptr;
  hi_ = scratch.take<std::int8_t>(T * cols);
  lo_ = scratch.take<std::int8_t>(T * cols);
  d_ = scratch.floats(T * (cols / kX8Block) * 2);
  s16_ = scratch.floats(T * (cols / 16));
  s32_ = scratch.floats(T * (cols / 32));
  const auto row = [&](std::size_t t) {
    quantize_one(x + t * ld, cols, hi_ + t * cols, lo_ + t * cols, d_ + t * (cols / kX8Block) * 2,
                 s16_ + t * (cols / 16), s32_ + t * (cols / 32));
  };
  if (T < 16) {
    for (std::size_t t = 0; t < T; ++t) row(t);
    return;
  }
  tbb::parallel_for(std::size_t(0), T, row);
}

bool int8_vnni512(CpuIsa isa) {
#if FT_X86
  return isa >= CpuIsa::kAvx512 && int8_enabled() && avx512_vnni();
#else
  (void)isa;
  return false;
#endif
}

bool int8_vnni256(CpuIsa isa) {
#if FT_X86
  static const bool avx_vnni = __builtin_cpu_supports("avxvnni");
  return isa >= CpuIsa::kAvx2 && int8_enabled() && avx_vnni;
#else
  (void)isa;
  return false;
#endif
}

Int8DotsFn int8_dots256_for(DType dtype, bool vnni) {
#if FT_X86
  if (!cpu_isa_supported(CpuIsa::kAvx2) || (vnni && !__builtin_cpu_supports("avxvnni"))) return nullptr;
  if (dtype == DType::kQ4_K) return vnni ? q4_k_int8_vnni256 : q4_k_int8;
  if (dtype == DType::kQ6_K) return vnni ? q6_k_int8_vnni256 : q6_k_int8;
  if (dtype == DType::kQ5_K) return vnni ? q5_k_int8_vnni256 : q5_k_int8;
#endif
  (void)dtype;
  (void)vnni;
  return nullptr;
}

Int8DotsFn int8_dots_for(CpuIsa isa, DType dtype) {
#if FT_X86
  if (isa != CpuIsa::kScalar && int8_enabled()) {
    // The AVX-512 paths imply AVX512-BW; VNNI came with every AVX-512 core since Cascade Lake.
    const bool wide = int8_vnni512(isa);
    if (!wide) return int8_dots256_for(dtype, int8_vnni256(isa));
    if (dtype == DType::kQ4_K) return q4_k_int8_avx512;
    if (dtype == DType::kQ6_K) return q6_k_int8_avx512;
    if (dtype == DType::kQ5_K) return q5_k_int8_avx512;
  }
#endif
  (void)isa;
  (void)dtype;
  return nullptr;
}

Int8DotsFn int8_dots_for(CpuIsa isa, const Matrix& m) {
  return m.cols % int64_t(kX8Block) == 0 ? int8_dots_for(isa, m.dtype) : nullptr;
}

}  // namespace ft::engine::cpu
