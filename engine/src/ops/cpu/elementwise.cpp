#include "ops/cpu/elementwise.h"

#include <cmath>

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

}  // namespace ft::engine::cpu
