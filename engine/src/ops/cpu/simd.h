// What every CPU kernel file needs to use AVX2 / AVX-512 / AVX512-BF16 in a baseline x86-64 build:
// per-function target attributes (the rest of the binary stays baseline; run-time dispatch picks
// the path, see expert_kernels.h) and a few shared vector helpers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "ft/engine/bf16.h"

#if defined(__x86_64__) || defined(_M_X64)
#define FT_X86 1
#include <immintrin.h>
#endif

#if FT_X86
#define FT_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define FT_TARGET_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))
#define FT_TARGET_AVX512BF16 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512bf16")))
// A superset of the others, so that their inline helpers (bf16_round16, transpose16x16) inline
// into AMX kernels instead of being called.
#define FT_TARGET_AMX __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

// GCC 12's AVX-512 intrinsics initialise their "undefined" pass-through operands from themselves
// (`__m512 __Y = __Y;`), which -Wuninitialized reports once inlined (GCC bug 105593, fixed in 13).
#define FT_SIMD_BEGIN                                           \
  _Pragma("GCC diagnostic push")                                \
  _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")         \
  _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define FT_SIMD_END _Pragma("GCC diagnostic pop")

namespace ft::engine::cpu {

// Bytes ahead of the weights in hand that a decode-sized kernel asks the caches for: a core's own stream
// of misses, left to the hardware prefetchers, is latency-bound well below its share of the
// socket's bandwidth. 2 KiB measured best on a 16-core Xeon (docs/perf-notes.md: experts 53-55 ->
// 72-77 GB/s at 15 threads, 6.7 -> 9.1 GB/s on one); FT_CPU_PREFETCH=N sets N bytes, 0 none.
inline std::size_t prefetch_distance() {
  static const std::size_t bytes = [] {
    const char* env = std::getenv("FT_CPU_PREFETCH");
    return env ? std::size_t(std::strtoul(env, nullptr, 10)) : std::size_t(2048);
  }();
  return bytes;
}

// The cache lines of [p, p + n) on their way to L1.
inline void prefetch(const void* p, std::size_t n) {
  for (std::size_t off = 0; off < n; off += 64) _mm_prefetch(static_cast<const char*>(p) + off, _MM_HINT_T0);
}

FT_SIMD_BEGIN

// The IEEE half at p (a GGUF block's scale), any alignment, by F16C's VCVTPH2PS: exact, as
// f16_at, but one instruction where the portable conversion takes ~15 with branches, twice per
// 256 values in the block kernels. Every AVX2 CPU has F16C (cpu_isa_supported checks it).
FT_TARGET_AVX2 inline float f16_at_f16c(const void* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

FT_TARGET_AVX2 inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

FT_TARGET_AVX2 inline __m256 load8_bf16(const bf16_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

// An 8 x 8 transpose of 32-bit lanes in registers: r[i] lane j becomes r[j] lane i.
FT_TARGET_AVX2 inline void transpose8x8(__m256i (&r)[8]) {
  __m256i t[8];
  for (int i = 0; i < 8; i += 2) {  // 32-bit pairs of rows i, i + 1 within each 128-bit half
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {  // 64-bit pairs: column 4H + c of rows i..i+3 in half H of r[i + c]
    r[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // halves: column c from rows 0..3 and 4..7, column 4 + c likewise
    t[c] = _mm256_permute2x128_si256(r[c], r[4 + c], 0x20);
    t[4 + c] = _mm256_permute2x128_si256(r[c], r[4 + c], 0x31);
  }
  for (int i = 0; i < 8; ++i) r[i] = t[i];
}

// exp512's arithmetic on 8 floats (the same operations, so the same bits lane for lane).
FT_TARGET_AVX2 inline __m256 exp256(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654f), hi = _mm256_set1_ps(88.37626f);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  return _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LE_OQ));
}

// A fixed reduction tree, so a sum never depends on anything but the 16 lanes.
// (_mm512_reduce_add_ps trips a -Wuninitialized false positive in GCC 12's headers.)
FT_TARGET_AVX512 inline float hsum512(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  __m128 s = _mm512_castps512_ps128(v);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

FT_TARGET_AVX512 inline __m512 widen16_bf16(__m256i v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

FT_TARGET_AVX512 inline __m512 load16_bf16(const bf16_t* p) {
  return widen16_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// A 16 x 16 transpose of 32-bit lanes in registers: r[i] lane j becomes r[j] lane i.
FT_TARGET_AVX512 inline void transpose16x16(__m512i (&r)[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {  // 32-bit pairs of rows i, i + 1 within each 128-bit lane
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // 64-bit pairs: column 4L + c of rows i..i+3 in lane L of r[i + c]
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // 128-bit lanes: column 4L + c gathers lane L of the four row quads
    const __m512i a = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88), b = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88);
    const __m512i e = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xdd), f = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xdd);
    t[c] = _mm512_shuffle_i32x4(a, b, 0x88);
    t[8 + c] = _mm512_shuffle_i32x4(a, b, 0xdd);
    t[4 + c] = _mm512_shuffle_i32x4(e, f, 0x88);
    t[12 + c] = _mm512_shuffle_i32x4(e, f, 0xdd);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// f32_to_bf16 of 16 values as 16-bit lanes: round to nearest even, a NaN stays a (quiet) NaN.
FT_TARGET_AVX512 inline __m256i bf16_round16(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
}

// e^x for 16 floats: x = n ln2 + r with |r| <= ln2 / 2, e^r by a degree-6 polynomial (Cephes'
// expf coefficients), scaled by 2^n through the exponent bits. Relative error ~2e-7 over the
// normal range; inputs below -87.3 give 0 (softmax feeds it x - max <= 0). Deterministic: the
// same bits for the same input on every call.
FT_TARGET_AVX512 inline __m512 exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.33654f), hi = _mm512_set1_ps(88.37626f);
  x = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  const __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LE_OQ), y, _mm512_setzero_ps());
}

// silu(x) = x / (1 + e^-x), with exp512.
FT_TARGET_AVX512 inline __m512 silu512(__m512 x) {
  const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), x));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

// 32 floats (a: the first 16, b: the next) as bf16x2: hi = bf16(x) and lo = bf16(x - hi), each 32
// bf16 in order (a's 16, then b's). The hardware's conversion, one instruction per 32 values where
// bf16_round16 takes ten per 16: the same round-to-nearest-even and quiet NaNs, but a denormal input
// (|x| < 1.2e-38; for lo, |x| below ~1e-35) reads as zero. Only where AVX512-BF16 is (AMX kernels).
FT_TARGET_AMX inline void bf16x2_split32(__m512 a, __m512 b, __m512i& hi, __m512i& lo) {
  hi = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a));
  const __m512 ha = widen16_bf16(_mm512_castsi512_si256(hi)), hb = widen16_bf16(_mm512_extracti64x4_epi64(hi, 1));
  lo = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_sub_ps(b, hb), _mm512_sub_ps(a, ha)));
}

FT_SIMD_END

}  // namespace ft::engine::cpu
#endif  // FT_X86
