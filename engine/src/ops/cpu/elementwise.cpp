#include "ops/cpu/elementwise.h"

#include <cmath>

#include "ft/engine/ops.h"
#include "ops/cpu/simd.h"

namespace ft::engine::cpu {
namespace {

#if FT_X86
FT_SIMD_BEGIN
FT_TARGET_AVX512 void silu_mul_avx512(const float* gate, const float* up, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, _mm512_mul_ps(silu512(_mm512_loadu_ps(gate + i)), _mm512_loadu_ps(up + i)));
  if (i < n) {
    const __mmask16 k = __mmask16((1u << (n - i)) - 1u);
    const __m512 v = _mm512_mul_ps(silu512(_mm512_maskz_loadu_ps(k, gate + i)), _mm512_maskz_loadu_ps(k, up + i));
    _mm512_mask_storeu_ps(out + i, k, v);
  }
}

// Sum of x[i]^2 in double: each square is exact, the lanes' partial sums added in a fixed order.
FT_TARGET_AVX512 double sum_squares_avx512(const float* x, std::size_t n) {
  __m512d acc[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8 * k));
      acc[k] = _mm512_fmadd_pd(v, v, acc[k]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
    acc[0] = _mm512_fmadd_pd(v, v, acc[0]);
  }
  double sum = _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(acc[0], acc[1]), _mm512_add_pd(acc[2], acc[3])));
  for (; i < n; ++i) sum += double(x[i]) * x[i];
  return sum;
}

FT_TARGET_AVX512 void scale_row_avx512(const float* x, const float* weight, float inv, bool zero_centered, float* o,
                                       std::size_t n) {
  const __m512 vinv = _mm512_set1_ps(inv), one = _mm512_set1_ps(1.f);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 wv = _mm512_loadu_ps(weight + i);
    const __m512 w = zero_centered ? _mm512_add_ps(one, wv) : wv;
    _mm512_storeu_ps(o + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vinv), w));
  }
  for (; i < n; ++i) o[i] = x[i] * inv * (zero_centered ? 1.0f + weight[i] : weight[i]);
}
FT_SIMD_END
#endif

bool avx512(CpuIsa isa) {
  return isa == CpuIsa::kAvx512 || isa == CpuIsa::kAvx512Bf16 || isa == CpuIsa::kAmxBf16;
}

}  // namespace

void silu_mul(CpuIsa isa, const float* gate, const float* up, float* out, std::size_t n) {
#if FT_X86
  if (avx512(isa)) return silu_mul_avx512(gate, up, out, n);
#endif
  (void)isa;
  for (std::size_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void rms_norm(CpuIsa isa, const float* x, const float* weight, float* out, std::size_t rows, std::size_t dim, float eps,
              bool zero_centered) {
#if FT_X86
  if (avx512(isa)) {
    for (std::size_t r = 0; r < rows; ++r) {
      const float* xr = x + r * dim;
      const float inv = 1.0f / std::sqrt(float(sum_squares_avx512(xr, dim) / double(dim)) + eps);
      scale_row_avx512(xr, weight, inv, zero_centered, out + r * dim, dim);
    }
    return;
  }
#endif
  (void)isa;
  ref::rms_norm(x, weight, out, rows, dim, eps, zero_centered);
}

}  // namespace ft::engine::cpu
