// The row x token dot-product kernels every bf16 CPU op is built from (see dots.h). Only the
// functions marked FT_TARGET_* use the wider ISAs; everything else is baseline x86-64, so the
// binary runs on any x86-64 CPU.
#include "ops/cpu/dots.h"

#include <algorithm>
#include <cstring>

#include "ops/cpu/simd.h"

namespace ft::engine::cpu {

namespace {

[[maybe_unused]] inline void row_pointers(const bf16_t* w, std::size_t nr, std::size_t cols,
                                          const bf16_t** rows) {
  for (std::size_t r = 0; r < kRowTile; ++r) rows[r] = w + std::min(r, nr - 1) * cols;
}

#if FT_X86
FT_SIMD_BEGIN

// The tile's rows' cache lines at column c on their way to L1 (prefetch_distance()).
inline void prefetch_rows(const bf16_t* const* w, std::size_t c) {
  for (std::size_t r = 0; r < kRowTile; ++r) _mm_prefetch(reinterpret_cast<const char*>(w[r] + c), _MM_HINT_T0);
}

// -- AVX2 + FMA: 8 columns a step, weights widened bf16 -> f32 by a 16-bit left shift.

// 4 rows x TT tokens = 4*TT accumulators; TT <= 2 keeps them, the x vectors and a weight vector
// within the 16 YMM registers.
template <int TT>
FT_TARGET_AVX2 void tile_avx2(const bf16_t* const* w, const float* const* x, std::size_t cols,
                              float* out, std::size_t ldo) {
  __m256 acc[kRowTile][TT];
  for (std::size_t r = 0; r < kRowTile; ++r)
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm256_setzero_ps();
  const std::size_t ahead = prefetch_distance() / sizeof(bf16_t);
  std::size_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    if (ahead && c % 32 == 0) prefetch_rows(w, c + ahead);
    __m256 xv[TT];
    for (int t = 0; t < TT; ++t) xv[t] = _mm256_loadu_ps(x[t] + c);
    for (std::size_t r = 0; r < kRowTile; ++r) {
      const __m256 wv = load8_bf16(w[r] + c);
      for (int t = 0; t < TT; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (std::size_t r = 0; r < kRowTile; ++r) {
    for (int t = 0; t < TT; ++t) {
      float s = hsum256(acc[r][t]);
      for (std::size_t k = c; k < cols; ++k) s += bf16_to_f32(w[r][k]) * x[t][k];
      out[r * ldo + t] = s;
    }
  }
}

FT_TARGET_AVX2 void dots_avx2(const bf16_t* w, std::size_t nr, const void* xv, std::size_t ldx,
                              std::size_t nt, std::size_t cols, float* out) {
  const float* x = static_cast<const float*>(xv);
  const bf16_t* wr[kRowTile];
  row_pointers(w, nr, cols, wr);
  std::size_t t0 = 0;
  for (; t0 + 2 <= nt; t0 += 2) {
    const float* xr[2] = {x + t0 * ldx, x + (t0 + 1) * ldx};
    tile_avx2<2>(wr, xr, cols, out + t0, nt);
  }
  if (t0 < nt) {
    const float* xr[1] = {x + t0 * ldx};
    tile_avx2<1>(wr, xr, cols, out + t0, nt);
  }
}

// -- AVX-512F: 16 columns a step, same widening; masked loads for the tail.

// 4 rows x TT (<= 4) tokens: 16 accumulators + 4 x vectors + weights fit the 32 ZMM registers.
template <int TT>
FT_TARGET_AVX512 void tile_avx512(const bf16_t* const* w, const float* const* x, std::size_t cols,
                                  float* out, std::size_t ldo) {
  __m512 acc[kRowTile][TT];
  for (std::size_t r = 0; r < kRowTile; ++r)
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_setzero_ps();
  const std::size_t ahead = prefetch_distance() / sizeof(bf16_t);
  std::size_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    if (ahead && c % 32 == 0) prefetch_rows(w, c + ahead);
    __m512 xv[TT];
    for (int t = 0; t < TT; ++t) xv[t] = _mm512_loadu_ps(x[t] + c);
    for (std::size_t r = 0; r < kRowTile; ++r) {
      const __m512 wv = widen16_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r] + c)));
      for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  if (c < cols) {
    const __mmask16 m = __mmask16((1u << (cols - c)) - 1u);
    __m512 xv[TT];
    for (int t = 0; t < TT; ++t) xv[t] = _mm512_maskz_loadu_ps(m, x[t] + c);
    for (std::size_t r = 0; r < kRowTile; ++r) {
      const __m512 wv = widen16_bf16(_mm256_maskz_loadu_epi16(m, w[r] + c));
      for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (std::size_t r = 0; r < kRowTile; ++r)
    for (int t = 0; t < TT; ++t) out[r * ldo + t] = hsum512(acc[r][t]);
}

// -- AVX512-BF16: 32 columns a step; VDPBF16PS multiplies bf16 pairs exactly and adds them into
// fp32 lanes. x must already be bf16 (see expert_swiglu / matmul_bf16).

template <int TT>
FT_TARGET_AVX512BF16 void tile_avx512bf16(const bf16_t* const* w, const bf16_t* const* x,
                                          std::size_t cols, float* out, std::size_t ldo) {
  // x[t] holds the token's high halves, x[t] + cols its low halves (dots.h): both products go
  // into the same accumulator, high first.
  __m512 acc[kRowTile][TT];
  for (std::size_t r = 0; r < kRowTile; ++r)
    for (int t = 0; t < TT; ++t) acc[r][t] = _mm512_setzero_ps();
  std::size_t c = 0;
  for (; c + 32 <= cols; c += 32) {
    __m512bh hi[TT], lo[TT];
    for (int t = 0; t < TT; ++t) {
      hi[t] = (__m512bh)_mm512_loadu_si512(x[t] + c);
      lo[t] = (__m512bh)_mm512_loadu_si512(x[t] + cols + c);
    }
    for (std::size_t r = 0; r < kRowTile; ++r) {
      const __m512bh wv = (__m512bh)_mm512_loadu_si512(w[r] + c);
      for (int t = 0; t < TT; ++t) {
        acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, hi[t]);
        acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, lo[t]);
      }
    }
  }
  if (c < cols) {  // zeroed lanes pair 0 with 0, so an odd tail is fine
    const __mmask32 m = __mmask32((1u << (cols - c)) - 1u);
    __m512bh hi[TT], lo[TT];
    for (int t = 0; t < TT; ++t) {
      hi[t] = (__m512bh)_mm512_maskz_loadu_epi16(m, x[t] + c);
      lo[t] = (__m512bh)_mm512_maskz_loadu_epi16(m, x[t] + cols + c);
    }
    for (std::size_t r = 0; r < kRowTile; ++r) {
      const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(m, w[r] + c);
      for (int t = 0; t < TT; ++t) {
        acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, hi[t]);
        acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, lo[t]);
      }
    }
  }
  for (std::size_t r = 0; r < kRowTile; ++r)
    for (int t = 0; t < TT; ++t) out[r * ldo + t] = hsum512(acc[r][t]);
}

// Shared token-tiling loop for the two AVX-512 paths (4 tokens a tile, then the remainder).
template <typename X, void (*T4)(const bf16_t* const*, const X* const*, std::size_t, float*, std::size_t),
          void (*T3)(const bf16_t* const*, const X* const*, std::size_t, float*, std::size_t),
          void (*T2)(const bf16_t* const*, const X* const*, std::size_t, float*, std::size_t),
          void (*T1)(const bf16_t* const*, const X* const*, std::size_t, float*, std::size_t)>
void dots_by4(const bf16_t* w, std::size_t nr, const void* xv, std::size_t ldx, std::size_t nt,
              std::size_t cols, float* out) {
  const X* x = static_cast<const X*>(xv);
  const bf16_t* wr[kRowTile];
  row_pointers(w, nr, cols, wr);
  for (std::size_t t0 = 0; t0 < nt; t0 += 4) {
    const X* xr[4];
    const std::size_t n = std::min<std::size_t>(4, nt - t0);
    for (std::size_t i = 0; i < n; ++i) xr[i] = x + (t0 + i) * ldx;
    switch (n) {
      case 4: T4(wr, xr, cols, out + t0, nt); break;
      case 3: T3(wr, xr, cols, out + t0, nt); break;
      case 2: T2(wr, xr, cols, out + t0, nt); break;
      default: T1(wr, xr, cols, out + t0, nt); break;
    }
  }
}

constexpr DotsFn kDotsAvx512 = dots_by4<float, tile_avx512<4>, tile_avx512<3>, tile_avx512<2>, tile_avx512<1>>;
constexpr DotsFn kDotsAvx512Bf16 =
    dots_by4<bf16_t, tile_avx512bf16<4>, tile_avx512bf16<3>, tile_avx512bf16<2>, tile_avx512bf16<1>>;
FT_SIMD_END
#endif  // FT_X86

}  // namespace

DotsFn dots_for(CpuIsa isa) {
#if FT_X86
  switch (isa) {
    case CpuIsa::kAvx2: return dots_avx2;
    case CpuIsa::kAvx512: return kDotsAvx512;
    case CpuIsa::kAvx512Bf16:
    case CpuIsa::kAmxBf16: return kDotsAvx512Bf16;
    case CpuIsa::kScalar: break;
  }
#else
  (void)isa;
#endif
  return nullptr;
}

#if FT_X86
FT_SIMD_BEGIN
// f32_to_bf16 sixteen at a time (bf16_round16: the same integer rounding).
FT_TARGET_AVX512 static void to_bf16_avx512(const float* src, bf16_t* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), bf16_round16(_mm512_loadu_ps(src + i)));
  for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}
FT_SIMD_END
#endif

#if FT_X86
FT_SIMD_BEGIN
FT_TARGET_AVX512 static void split_bf16_avx512(const float* src, bf16_t* hi, bf16_t* lo, std::size_t n) {
  constexpr std::size_t kStep = 256;
  alignas(64) float rest[kStep];
  for (std::size_t i = 0; i < n; i += kStep) {
    const std::size_t m = std::min(kStep, n - i);
    to_bf16_avx512(src + i, hi + i, m);
    std::size_t j = 0;
    for (; j + 16 <= m; j += 16) {
      const __m512 h = widen16_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi + i + j)));
      _mm512_store_ps(rest + j, _mm512_sub_ps(_mm512_loadu_ps(src + i + j), h));
    }
    for (; j < m; ++j) rest[j] = src[i + j] - bf16_to_f32(hi[i + j]);
    to_bf16_avx512(rest, lo + i, m);
  }
}
FT_SIMD_END
#endif

void split_bf16(const float* src, bf16_t* hi, bf16_t* lo, std::size_t n) {
#if FT_X86
  static const bool avx512 = cpu_isa_supported(CpuIsa::kAvx512);
  if (avx512) return split_bf16_avx512(src, hi, lo, n);
#endif
  for (std::size_t i = 0; i < n; ++i) {
    hi[i] = f32_to_bf16(src[i]);
    lo[i] = f32_to_bf16(src[i] - bf16_to_f32(hi[i]));
  }
}

void to_bf16(const float* src, bf16_t* dst, std::size_t n) {
#if FT_X86
  static const bool avx512 = cpu_isa_supported(CpuIsa::kAvx512);
  if (avx512) return to_bf16_avx512(src, dst, n);
#endif
  for (std::size_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

void prepare_row(CpuIsa isa, const float* src, std::size_t n, void* dst) {
  if (!wants_bf16_x(isa)) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  auto* hi = static_cast<bf16_t*>(dst);
  split_bf16(src, hi, hi + n, n);
}

CpuIsa usable(CpuIsa isa) { return cpu_isa_supported(isa) ? isa : best_cpu_isa(); }

}  // namespace ft::engine::cpu
