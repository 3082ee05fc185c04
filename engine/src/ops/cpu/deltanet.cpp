#include "ops/cpu/deltanet.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cmath>
#include <cstring>

#include "ops/cpu/simd.h"

namespace ft::engine::cpu {
namespace {

float silu(float v) { return v / (1.0f + std::exp(-v)); }

// ref::causal_conv1d_silu with its rows spread over the threads: each output is the same sum of
// taps in the same order, so the result is the reference's bit for bit.
void conv1d_silu(const float* x, std::size_t T, std::size_t C, const float* w, std::size_t K, float* state,
                 float* out) {
  const std::size_t S = K - 1;
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, T, 16), [&](const tbb::blocked_range<std::size_t>& rg) {
    for (std::size_t t = rg.begin(); t < rg.end(); ++t) {
      float* o = out + t * C;
      for (std::size_t c = 0; c < C; ++c) o[c] = 0.f;
      for (std::size_t j = 0; j < K; ++j) {
        const std::size_t p = t + j;  // position in [state columns ; x rows]
        if (p < S) {
          for (std::size_t c = 0; c < C; ++c) o[c] += w[c * K + j] * state[c * S + p];
        } else {
          const float* row = x + (p - S) * C;
          for (std::size_t c = 0; c < C; ++c) o[c] += w[c * K + j] * row[c];
        }
      }
      for (std::size_t c = 0; c < C; ++c) o[c] = silu(o[c]);
    }
  });
  for (std::size_t c = 0; c < C; ++c) {
    float* st = state + c * S;
    for (std::size_t i = 0; i < S; ++i) {
      const std::size_t p = T + i;
      st[i] = p < S ? st[p] : x[(p - S) * C + c];
    }
  }
}

// x * rsqrt(sum(x^2) + 1e-6) * scale, the sum in double (as the reference).
void l2_normalize(const float* x, float* out, std::size_t n, float scale) {
  double ss = 0.0;
  for (std::size_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const float inv = float(1.0 / std::sqrt(ss + 1e-6)) * scale;
  for (std::size_t i = 0; i < n; ++i) out[i] = x[i] * inv;
}

// One value head over T tokens (HF torch_recurrent_gated_delta_rule):
//   S *= exp(g); delta = (v - k^T S) * beta; S += k (outer) delta; out = q^T S
using HeadFn = void (*)(float* S, std::size_t dk, std::size_t dv, const float* q, const float* k, const float* v,
                        float decay, float beta, float* o);

void head_step_scalar(float* S, std::size_t dk, std::size_t dv, const float* q, const float* k, const float* v,
                      float decay, float beta, float* o) {
  float kv[1024];
  for (std::size_t j = 0; j < dv; ++j) kv[j] = 0.f;
  for (std::size_t a = 0; a < dk; ++a) {
    float* row = S + a * dv;
    for (std::size_t j = 0; j < dv; ++j) {
      row[j] *= decay;
      kv[j] += k[a] * row[j];
    }
  }
  for (std::size_t j = 0; j < dv; ++j) kv[j] = (v[j] - kv[j]) * beta;
  for (std::size_t j = 0; j < dv; ++j) o[j] = 0.f;
  for (std::size_t a = 0; a < dk; ++a) {
    float* row = S + a * dv;
    for (std::size_t j = 0; j < dv; ++j) {
      row[j] += k[a] * kv[j];
      o[j] += q[a] * row[j];
    }
  }
}

#if FT_X86
FT_SIMD_BEGIN
// dv a multiple of 16 and at most 256: the delta and output vectors stay in registers.
FT_TARGET_AVX512 void head_step_avx512(float* S, std::size_t dk, std::size_t dv, const float* q, const float* k,
                                       const float* v, float decay, float beta, float* o) {
  const std::size_t nvec = dv / 16;
  __m512 acc[16];
  const __m512 dec = _mm512_set1_ps(decay);
  for (std::size_t i = 0; i < nvec; ++i) acc[i] = _mm512_setzero_ps();
  for (std::size_t a = 0; a < dk; ++a) {
    float* row = S + a * dv;
    const __m512 ka = _mm512_set1_ps(k[a]);
    for (std::size_t i = 0; i < nvec; ++i) {
      const __m512 r = _mm512_mul_ps(_mm512_loadu_ps(row + 16 * i), dec);
      _mm512_storeu_ps(row + 16 * i, r);
      acc[i] = _mm512_fmadd_ps(ka, r, acc[i]);
    }
  }
  const __m512 bt = _mm512_set1_ps(beta);
  for (std::size_t i = 0; i < nvec; ++i) acc[i] = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(v + 16 * i), acc[i]), bt);
  __m512 out[16];
  for (std::size_t i = 0; i < nvec; ++i) out[i] = _mm512_setzero_ps();
  for (std::size_t a = 0; a < dk; ++a) {
    float* row = S + a * dv;
    const __m512 ka = _mm512_set1_ps(k[a]), qa = _mm512_set1_ps(q[a]);
    for (std::size_t i = 0; i < nvec; ++i) {
      const __m512 r = _mm512_fmadd_ps(ka, acc[i], _mm512_loadu_ps(row + 16 * i));
      _mm512_storeu_ps(row + 16 * i, r);
      out[i] = _mm512_fmadd_ps(qa, r, out[i]);
    }
  }
  for (std::size_t i = 0; i < nvec; ++i) _mm512_storeu_ps(o + 16 * i, out[i]);
}
FT_SIMD_END
#endif

HeadFn head_fn(CpuIsa isa, std::size_t dv) {
#if FT_X86
  if ((isa == CpuIsa::kAvx512 || isa == CpuIsa::kAvx512Bf16 || isa == CpuIsa::kAmxBf16) && dv % 16 == 0 && dv <= 256)
    return head_step_avx512;
#endif
  (void)isa;
  (void)dv;
  return head_step_scalar;
}

}  // namespace

void deltanet(Scratch& scratch, CpuIsa isa, const ref::DeltaNetDims& d, const DeltaNetParams& p, const float* qkv,
              const float* z, const float* b, const float* a, std::span<const DeltaNetSeq> seqs, float* out) {
  const std::size_t conv_dim = d.conv_dim(), key_dim = d.key_dim(), value_dim = d.value_dim();
  const std::size_t nv = d.num_v_heads, dk = d.head_k_dim, dv = d.head_v_dim;
  const HeadFn step = dv <= 1024 ? head_fn(isa, dv) : nullptr;
  Scratch::Frame frame(scratch);
  std::size_t T = 0;
  for (const DeltaNetSeq& s : seqs) T = std::max(T, s.row0 + s.rows);
  float* mixed = scratch.floats(T * conv_dim);
  float* g = scratch.floats(T * nv);
  float* beta = scratch.floats(T * nv);
  for (const DeltaNetSeq& s : seqs) {
    conv1d_silu(qkv + s.row0 * conv_dim, s.rows, conv_dim, p.conv1d, d.conv_kernel, s.conv, mixed + s.row0 * conv_dim);
    ref::deltanet_gates(a + s.row0 * nv, b + s.row0 * nv, p.A_log, p.dt_bias, s.rows, nv, g + s.row0 * nv,
                        beta + s.row0 * nv);
  }
  const float q_scale = 1.0f / std::sqrt(float(dk));
  // Heads and sequences are independent; each writes only its own state and output slices.
  tbb::parallel_for(std::size_t(0), seqs.size() * nv, [&](std::size_t i) {
    const DeltaNetSeq& s = seqs[i / nv];
    const std::size_t h = i % nv, kh = d.k_head(h);
    float* S = s.recurrent + h * dk * dv;
    float qn[1024], kn[1024];
    for (std::size_t t = s.row0; t < s.row0 + s.rows; ++t) {
      const float* m = mixed + t * conv_dim;
      l2_normalize(m + kh * dk, qn, dk, q_scale);
      l2_normalize(m + key_dim + kh * dk, kn, dk, 1.0f);
      const float* v = m + 2 * key_dim + h * dv;
      float* o = out + t * value_dim + h * dv;
      if (step && dk <= 1024) {
        step(S, dk, dv, qn, kn, v, std::exp(g[t * nv + h]), beta[t * nv + h], o);
      }
    }
  });
  // Gated RMSNorm, one row per (token, value head).
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, T * nv, 64), [&](const tbb::blocked_range<std::size_t>& rg) {
    ref::rms_norm_gated(out + rg.begin() * dv, z + rg.begin() * dv, p.norm, out + rg.begin() * dv, rg.size(), dv,
                        d.norm_eps);
  });
}

}  // namespace ft::engine::cpu
