#include "ops/cpu/dequant_rows.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "ft/engine/bf16.h"
#include "ops/block_fields.h"
#include "ops/cpu/simd.h"

namespace ft::engine::cpu {

namespace {

#if FT_X86
FT_SIMD_BEGIN

// 16 bytes -> 16 int32.
FT_TARGET_AVX512 inline __m512i bytes16(const std::uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// The decoders hand each 32 decoded values, as two vectors of 16, to a sink with their offset in
// the row: StoreSink writes them out (decode_row), DotSink multiplies them into per-token
// accumulators (block_dots), the first 16 of each 32 into one and the second into another, so a
// token's products form two dependent chains, not one. Both see the same values, computed as the
// reference computes them.

template <typename Sink>
FT_TARGET_AVX512 void q8_0(const std::uint8_t* b, std::size_t n, Sink& sink) {
  for (std::size_t i = 0; i < n / 32; ++i, b += 34) {
    const __m512 d = _mm512_set1_ps(f16_at_f16c(b));
    const auto half = [&](int h) FT_TARGET_AVX512 {
      const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + 16 * h)));
      return _mm512_mul_ps(_mm512_cvtepi32_ps(q), d);
    };
    sink(32 * i, half(0), half(1));
  }
}

template <typename Sink>
FT_TARGET_AVX512 void q4_0(const std::uint8_t* b, std::size_t n, Sink& sink) {
  const __m512i low = _mm512_set1_epi32(0xF), eight = _mm512_set1_epi32(8);
  for (std::size_t i = 0; i < n / 32; ++i, b += 18) {
    const __m512 d = _mm512_set1_ps(f16_at_f16c(b));
    const __m512i q = bytes16(b + 2);
    const __m512i x0 = _mm512_sub_epi32(_mm512_and_si512(q, low), eight);
    const __m512i x1 = _mm512_sub_epi32(_mm512_srli_epi32(q, 4), eight);
    sink(32 * i, _mm512_mul_ps(_mm512_cvtepi32_ps(x0), d), _mm512_mul_ps(_mm512_cvtepi32_ps(x1), d));
  }
}

// Q4_1: (q d) + m, rounded twice as the reference rounds it.
template <typename Sink>
FT_TARGET_AVX512 void q4_1(const std::uint8_t* b, std::size_t n, Sink& sink) {
  const __m512i low = _mm512_set1_epi32(0xF);
  for (std::size_t i = 0; i < n / 32; ++i, b += 20) {
    const __m512 d = _mm512_set1_ps(f16_at_f16c(b)), m = _mm512_set1_ps(f16_at_f16c(b + 2));
    const __m512i q = bytes16(b + 4);
    const __m512 x0 = _mm512_cvtepi32_ps(_mm512_and_si512(q, low)), x1 = _mm512_cvtepi32_ps(_mm512_srli_epi32(q, 4));
    sink(32 * i, _mm512_add_ps(_mm512_mul_ps(x0, d), m), _mm512_add_ps(_mm512_mul_ps(x1, d), m));
  }
}

// Q4_K, and with Five Q5_K: Q4_K's layout plus 32 bytes of fifth bits before the nibbles (bit j of
// byte l for sub-block j's value l).
template <typename Sink, bool Five = false>
FT_TARGET_AVX512 void q4_k(const std::uint8_t* b, std::size_t n, Sink& sink) {
  constexpr std::size_t kBytes = Five ? 176 : 144, kNibbles = Five ? 48 : 16;
  const __m512i low = _mm512_set1_epi32(0xF), one = _mm512_set1_epi32(1);
  for (std::size_t i = 0; i < n / 256; ++i, b += kBytes) {
    const float d = f16_at_f16c(b), min = f16_at_f16c(b + 2);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      scale_min_k4(j, b + 4, sc, m);
      const __m512 d1 = _mm512_set1_ps(d * float(sc)), m1 = _mm512_set1_ps(min * float(m));
      const std::uint8_t* q = b + kNibbles + 32 * (j / 2);
      const auto half = [&](int h) FT_TARGET_AVX512 {
        __m512i x = bytes16(q + 16 * h);
        x = _mm512_and_si512(j % 2 ? _mm512_srli_epi32(x, 4) : x, low);
        if constexpr (Five) {
          const __m512i top = _mm512_and_si512(_mm512_srli_epi32(bytes16(b + 16 + 16 * h), unsigned(j)), one);
          x = _mm512_or_si512(x, _mm512_slli_epi32(top, 4));
        }
        return _mm512_sub_ps(_mm512_mul_ps(d1, _mm512_cvtepi32_ps(x)), m1);
      };
      sink(256 * i + 32 * std::size_t(j), half(0), half(1));
    }
  }
}

template <typename Sink>
FT_TARGET_AVX512 void q5_k(const std::uint8_t* b, std::size_t n, Sink& sink) {
  q4_k<Sink, true>(b, n, sink);
}

template <typename Sink>
FT_TARGET_AVX512 void q6_k(const std::uint8_t* b, std::size_t n, Sink& sink) {
  const __m512i low = _mm512_set1_epi32(0xF), two = _mm512_set1_epi32(3), off = _mm512_set1_epi32(32);
  for (std::size_t i = 0; i < n / 256; ++i, b += 210) {
    const float d = f16_at_f16c(b + 208);
    for (int half = 0; half < 2; ++half) {
      const std::uint8_t* qh = b + 128 + 32 * half;
      const auto* sc = reinterpret_cast<const std::int8_t*>(b + 192 + 8 * half);
      for (int quarter = 0; quarter < 4; ++quarter) {
        const std::uint8_t* ql = b + 64 * half + (quarter % 2) * 32;
        const int lo_shift = quarter >= 2 ? 4 : 0, hi_shift = 2 * quarter;
        const auto part = [&](int h) FT_TARGET_AVX512 {  // l in [16h, 16h + 16): scale sc[h + 2 quarter]
          const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(bytes16(ql + 16 * h), unsigned(lo_shift)), low);
          const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(bytes16(qh + 16 * h), unsigned(hi_shift)), two);
          const __m512i q = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), off);
          const __m512 s = _mm512_set1_ps(d * float(sc[h + 2 * quarter]));
          return _mm512_mul_ps(s, _mm512_cvtepi32_ps(q));
        };
        sink(256 * i + 128 * std::size_t(half) + 32 * std::size_t(quarter), part(0), part(1));
      }
    }
  }
}

template <typename Sink>
FT_TARGET_AVX512 void mxfp4(const std::uint8_t* b, std::size_t n, Sink& sink) {
  // kvalues_mxfp4: the E2M1 values doubled, by 4-bit code.
  const __m512i table = _mm512_setr_epi32(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  const __m512i low = _mm512_set1_epi32(0xF);
  for (std::size_t i = 0; i < n / 32; ++i, b += 17) {
    const float d = std::bit_cast<float>(e8m0_half_bits(b[0]));
    const __m512 dv = _mm512_set1_ps(d);
    const __m512i q = bytes16(b + 1);
    const __m512i x0 = _mm512_permutexvar_epi32(_mm512_and_si512(q, low), table);
    const __m512i x1 = _mm512_permutexvar_epi32(_mm512_srli_epi32(q, 4), table);
    sink(32 * i, _mm512_mul_ps(_mm512_cvtepi32_ps(x0), dv), _mm512_mul_ps(_mm512_cvtepi32_ps(x1), dv));
  }
}

// FP8 row blocks (128 values: fp32 d, 128 E4M3 codes). An E4M3 code's bits shifted into an fp16's
// (sign to bit 15, exponent and mantissa to bits 13..7) are its value times 2^-8 exactly, normal or
// subnormal; times 256 (exact), then d, as the reference. Codes S.1111.111 are NaN, as there.
// Sixteen values a step in 32-bit lanes: the exact form for every block.
template <typename Sink>
FT_TARGET_AVX512 void f8_block_exact(const std::uint8_t* b, std::size_t at, Sink& sink) {
  const __m512i sign = _mm512_set1_epi32(0x80), magnitude = _mm512_set1_epi32(0x7F);
  const __m512 two8 = _mm512_set1_ps(256.f);
  const __m512i quiet_nan = _mm512_set1_epi32(0x7FC00000);
  float d;
  std::memcpy(&d, b, 4);
  const __m512 dv = _mm512_set1_ps(d);
  const auto part = [&](int c) FT_TARGET_AVX512 {
    const __m512i q = bytes16(b + 4 + 16 * c);
    const __m512i m = _mm512_and_si512(q, magnitude);
    const __m512i h = _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(q, sign), 8), _mm512_slli_epi32(m, 7));
    __m512 v = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)), two8);
    const __m512i nan = _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(q, sign), 24), quiet_nan);
    v = _mm512_mask_mov_ps(v, _mm512_cmpeq_epi32_mask(m, magnitude), _mm512_castsi512_ps(nan));
    return _mm512_mul_ps(v, dv);
  };
  for (int c = 0; c < 8; c += 2) sink(at + 16 * std::size_t(c), part(c), part(c + 1));
}

// The same values 32 codes a step in 16-bit lanes, a third of the instructions: (v 2^-8) (256 d)
// is v d rounded once, as (v 2^-8 * 256) * d is, while 256 d is exact (finite). A block with a NaN
// code or a d that large takes the exact form.
template <typename Sink>
FT_TARGET_AVX512 void f8_b128(const std::uint8_t* b, std::size_t n, Sink& sink) {
  const __m512i sign = _mm512_set1_epi16(std::int16_t(0x8000)), magnitude = _mm512_set1_epi16(0x7F);
  for (std::size_t i = 0; i < n / 128; ++i, b += 132) {
    float d;
    std::memcpy(&d, b, 4);
    const float d256 = d * 256.f;
    __m512i h[4];
    __mmask32 nan = 0;
    for (int c = 0; c < 4; ++c) {
      const __m512i q = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 4 + 32 * c)));
      const __m512i m = _mm512_and_si512(q, magnitude);
      nan |= _mm512_cmpeq_epi16_mask(m, magnitude);
      h[c] = _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi16(q, 8), sign), _mm512_slli_epi16(m, 7));
    }
    if (nan != 0 || !std::isfinite(d256)) {
      f8_block_exact(b, 128 * i, sink);
      continue;
    }
    const __m512 dv = _mm512_set1_ps(d256);
    for (int c = 0; c < 4; ++c) {
      sink(128 * i + 32 * std::size_t(c), _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h[c])), dv),
           _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h[c], 1)), dv));
    }
  }
}

// NVFP4 row blocks (64 values: fp32 tensor scale, 4 E4M3 group scales, 32 bytes of E2M1 pairs, the
// even value low): a group's 8 bytes become 16 codes in value order, looked up as floats.
template <typename Sink>
FT_TARGET_AVX512 void nvfp4(const std::uint8_t* b, std::size_t n, Sink& sink) {
  const __m512 table =
      _mm512_setr_ps(0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f, -0.f, -0.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f);
  const __m128i low = _mm_set1_epi8(0x0F);
  for (std::size_t i = 0; i < n / 64; ++i, b += 40) {
    float global;
    std::memcpy(&global, b, 4);
    const auto group = [&](int g) FT_TARGET_AVX512 {
      const __m512 d = _mm512_set1_ps(std::bit_cast<float>(e4m3_bits(b[4 + g])) * global);
      const __m128i t = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + 8 + 8 * g));
      const __m128i codes = _mm_unpacklo_epi8(_mm_and_si128(t, low), _mm_and_si128(_mm_srli_epi16(t, 4), low));
      return _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(codes), table), d);
    };
    sink(64 * i, group(0), group(1));
    sink(64 * i + 32, group(2), group(3));
  }
}

struct StoreSink {
  float* y;
  FT_TARGET_AVX512 void operator()(std::size_t at, __m512 lo, __m512 hi) const {
    _mm512_storeu_ps(y + at, lo);
    _mm512_storeu_ps(y + at + 16, hi);
  }
};

// NT activation rows: acc[t] += lo * x_t[at .. at + 16), acc2[t] += hi * x_t[at + 16 .. at + 32),
// unrolled so the accumulators stay in registers; a token's sum is acc + acc2, then across lanes.
// One chain a token would wait out an FMA's latency every 16 values (a single-token product was
// bound by it, not by memory).
template <int NT>
struct DotSink {
  const float* x;
  std::size_t ldx;
  __m512 acc[NT], acc2[NT];
  FT_TARGET_AVX512 void operator()(std::size_t at, __m512 lo, __m512 hi) {
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const float* xt = x + std::size_t(t) * ldx + at;
      acc[t] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(xt), acc[t]);
      acc2[t] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(xt + 16), acc2[t]);
    }
  }
};

// DotSink's sum for one token of a decoded row (cols a multiple of 32, as every block is).
FT_TARGET_AVX512 float dot_decoded_avx512(const float* row, const float* x, std::size_t cols) {
  __m512 acc = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps();
  for (std::size_t at = 0; at < cols; at += 32) {
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(row + at), _mm512_loadu_ps(x + at), acc);
    acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(row + at + 16), _mm512_loadu_ps(x + at + 16), acc2);
  }
  return hsum512(_mm512_add_ps(acc, acc2));
}

// Each decoder as a type, so one name serves every sink.
#define FT_DECODER(Name, fn, values, bytes)                                           \
  struct Name {                                                                       \
    static constexpr std::size_t kBlockValues = values, kBlockBytes = bytes;          \
    template <typename Sink>                                                          \
    FT_TARGET_AVX512 static void run(const std::uint8_t* b, std::size_t n, Sink& s) { \
      fn(b, n, s);                                                                    \
    }                                                                                 \
  };
FT_DECODER(Q8_0, q8_0, 32, 34)
FT_DECODER(Q4_0, q4_0, 32, 18)
FT_DECODER(Q4_1, q4_1, 32, 20)
FT_DECODER(Q4_K, q4_k, 256, 144)
FT_DECODER(Q5_K, q5_k, 256, 176)
FT_DECODER(Q6_K, q6_k, 256, 210)
FT_DECODER(MXFP4, mxfp4, 32, 17)
FT_DECODER(F8B128, f8_b128, 128, 132)
FT_DECODER(NVFP4, nvfp4, 64, 40)
#undef FT_DECODER

template <typename D>
FT_TARGET_AVX512 void decode_with(const std::uint8_t* b, float* y, std::size_t n) {
  StoreSink sink{y};
  D::run(b, n, sink);
}

template <typename D, int NT>
FT_TARGET_AVX512 void dots_n(const std::uint8_t* row, std::size_t cols, const float* x, std::size_t ldx, float* out) {
  DotSink<NT> sink{x, ldx, {}, {}};
  for (int t = 0; t < NT; ++t) sink.acc[t] = sink.acc2[t] = _mm512_setzero_ps();
  // The stream a row ahead: rows of a matrix lie one after the other.
  if (const std::size_t ahead = prefetch_distance()) prefetch(row + ahead, cols / D::kBlockValues * D::kBlockBytes);
  D::run(row, cols, sink);
  for (int t = 0; t < NT; ++t) out[t] = hsum512(_mm512_add_ps(sink.acc[t], sink.acc2[t]));
}

template <typename D>
FT_TARGET_AVX512 void dots_with(const std::uint8_t* row, std::size_t cols, const float* x, std::size_t ldx,
                                std::size_t T, float* out) {
  switch (std::min(T, kBlockDotTokens)) {
    case 1:
      return dots_n<D, 1>(row, cols, x, ldx, out);
    case 2:
      return dots_n<D, 2>(row, cols, x, ldx, out);
    case 3:
      return dots_n<D, 3>(row, cols, x, ldx, out);
    default:
      return dots_n<D, 4>(row, cols, x, ldx, out);
  }
}

FT_SIMD_END
#endif

using Decoder = void (*)(const std::uint8_t*, float*, std::size_t);

// The decoder and the fused dot of one type, or nulls.
struct Kernels {
  Decoder decode = nullptr;
  BlockDotsFn dots = nullptr;
};

Kernels kernels_for(CpuIsa isa, DType dtype) {
#if FT_X86
  if (isa == CpuIsa::kAvx512 || isa == CpuIsa::kAvx512Bf16 || isa == CpuIsa::kAmxBf16) {
    switch (dtype) {
      case DType::kQ8_0:
        return {decode_with<Q8_0>, dots_with<Q8_0>};
      case DType::kQ4_0:
        return {decode_with<Q4_0>, dots_with<Q4_0>};
      case DType::kQ4_1:
        return {decode_with<Q4_1>, dots_with<Q4_1>};
      case DType::kQ4_K:
        return {decode_with<Q4_K>, dots_with<Q4_K>};
      case DType::kQ5_K:
        return {decode_with<Q5_K>, dots_with<Q5_K>};
      case DType::kQ6_K:
        return {decode_with<Q6_K>, dots_with<Q6_K>};
      case DType::kMXFP4:
        return {decode_with<MXFP4>, dots_with<MXFP4>};
      case DType::kF8E4M3B128:
        return {decode_with<F8B128>, dots_with<F8B128>};
      case DType::kNVFP4:
        return {decode_with<NVFP4>, dots_with<NVFP4>};
      default:
        return {};
    }
  }
#endif
  (void)isa;
  (void)dtype;
  return {};
}

Decoder fast_decoder(CpuIsa isa, DType dtype) { return kernels_for(isa, dtype).decode; }

}  // namespace

bool has_fast_decoder(CpuIsa isa, DType dtype) { return fast_decoder(isa, dtype) != nullptr; }

BlockDotsFn block_dots_for(CpuIsa isa, DType dtype) { return kernels_for(isa, dtype).dots; }

float dot_decoded(const float* row, const float* x, std::size_t cols) {
#if FT_X86
  return dot_decoded_avx512(row, x, cols);
#else
  (void)row;
  (void)x;
  (void)cols;
  return 0.f;  // unreachable: block_dots_for gives no fused kernel off x86
#endif
}

void decode_row(CpuIsa isa, const Matrix& m, int64_t r, float* out) {
  if (const Decoder fast = fast_decoder(isa, m.dtype)) {
    fast(reinterpret_cast<const std::uint8_t*>(m.row(r)), out, std::size_t(m.cols));
    return;
  }
  matrix_row_f32(m, r, out);
}

}  // namespace ft::engine::cpu
