#include "ops/cpu/attention.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/cpu/attention_amx.h"
#include "ops/cpu/dots.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/simd.h"

namespace ft::engine::cpu {
namespace {

constexpr std::size_t kRowBlock = 16;   // query rows per work item
constexpr std::size_t kMaxGroup = 16;   // query heads per kv head this kernel handles at once
constexpr std::size_t kMaxDim = 512;    // head_dim bound (stack buffers)

// The inner products of one page: for `n` keys (rows of `k`, bf16, head_dim D) and G query vectors.
using ScoresFn = void (*)(const float* const* q, std::size_t G, const bf16_t* k, std::size_t n, std::size_t D,
                          float scale, float* scores /* [G][64] */);
// o[g] = o[g] * corr[g] + sum_j p[g][j] * v_j over the page's n values, read as the page stores
// them: vt[d * P + j] is dimension d of value j ([D][P], the A operand of AMX's p.v).
using AccumFn = void (*)(float* const* o, const float* corr, std::size_t G, const float* p, const bf16_t* vt,
                         std::size_t P, std::size_t n, std::size_t D);

void scores_scalar(const float* const* q, std::size_t G, const bf16_t* k, std::size_t n, std::size_t D, float scale,
                   float* scores) {
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t g = 0; g < G; ++g) {
      float acc[8] = {};
      for (std::size_t d = 0; d < D; d += 8)
        for (std::size_t l = 0; l < 8 && d + l < D; ++l) acc[l] += q[g][d + l] * bf16_to_f32(k[j * D + d + l]);
      scores[g * 64 + j] = (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) * scale;
    }
  }
}

void accum_scalar(float* const* o, const float* corr, std::size_t G, const float* p, const bf16_t* vt, std::size_t P,
                  std::size_t n, std::size_t D) {
  for (std::size_t g = 0; g < G; ++g) {
    for (std::size_t d = 0; d < D; ++d) o[g][d] *= corr[g];
    for (std::size_t j = 0; j < n; ++j) {
      const float pj = p[g * 64 + j];
      for (std::size_t d = 0; d < D; ++d) o[g][d] += pj * bf16_to_f32(vt[d * P + j]);
    }
  }
}

// Calls fn(std::integral_constant<std::size_t, NG>{}, g0) for the groups of up to kMax <= 8 heads
// that make up G (the kernels keep a group's accumulators in registers).
template <std::size_t kMax, typename Fn>
void by_head_groups(std::size_t G, Fn&& fn) {
  static_assert(kMax >= 1 && kMax <= 8);
  for (std::size_t g0 = 0; g0 < G; g0 += kMax) {
    switch (std::min(kMax, G - g0)) {
      case 1:
        fn(std::integral_constant<std::size_t, 1>{}, g0);
        break;
      case 2:
        fn(std::integral_constant<std::size_t, 2>{}, g0);
        break;
      case 3:
        fn(std::integral_constant<std::size_t, 3>{}, g0);
        break;
      case 4:
        fn(std::integral_constant<std::size_t, 4>{}, g0);
        break;
      case 5:
        fn(std::integral_constant<std::size_t, std::min<std::size_t>(5, kMax)>{}, g0);
        break;
      case 6:
        fn(std::integral_constant<std::size_t, std::min<std::size_t>(6, kMax)>{}, g0);
        break;
      case 7:
        fn(std::integral_constant<std::size_t, std::min<std::size_t>(7, kMax)>{}, g0);
        break;
      default:
        fn(std::integral_constant<std::size_t, kMax>{}, g0);
        break;
    }
  }
}

#if FT_X86
FT_SIMD_BEGIN
// Both AVX-512 kernels put 16 of something in the lanes and a group of NG <= 8 query heads in
// accumulators (NG registers, independent FMA chains): the scores 16 keys a vector, the values 16
// dimensions a vector. A bf16 block of 16 rows x 32 columns is loaded as 16 rows of 16 pairs and
// transposed in registers (transpose16x16), so that each pair of columns becomes two fp32 vectors
// across the 16 rows (the even column in the low halves). Every sum runs in a fixed order, one term
// at a time: a key's score over d ascending, a dimension's output over the values in order.
constexpr std::size_t kHeadsAtOnce = 8;

// 16 rows x 32 bf16 columns from `at` (row stride `ld` elements), rows past `rows` and columns past
// `cols` zero; transposed: r[u] holds columns 2u, 2u + 1 of the 16 rows.
FT_TARGET_AVX512 inline void load_pairs_transposed(const bf16_t* at, std::size_t ld, std::size_t rows, std::size_t cols,
                                                   __m512i (&r)[16]) {
  const __mmask32 k = cols >= 32 ? ~__mmask32(0) : __mmask32((1u << cols) - 1u);
  for (std::size_t i = 0; i < 16; ++i)
    r[i] = i < rows ? _mm512_maskz_loadu_epi16(k, at + i * ld) : _mm512_setzero_si512();
  transpose16x16(r);
}

FT_TARGET_AVX512 inline __m512 even_bf16(__m512i pair) { return _mm512_castsi512_ps(_mm512_slli_epi32(pair, 16)); }
FT_TARGET_AVX512 inline __m512 odd_bf16(__m512i pair) {
  return _mm512_castsi512_ps(_mm512_and_si512(pair, _mm512_set1_epi32(int(0xffff0000u))));
}

// scores[g][j] = q_g . k_j * scale for NG heads, 16 keys a vector (D a multiple of 16).
template <std::size_t NG>
FT_TARGET_AVX512 void scores_heads(const float* const* q, const bf16_t* k, std::size_t n, std::size_t D, float scale,
                                   float* scores) {
  for (std::size_t j0 = 0; j0 < n; j0 += 16) {
    const std::size_t m = std::min<std::size_t>(16, n - j0);
    __m512 acc[NG];
    for (std::size_t g = 0; g < NG; ++g) acc[g] = _mm512_setzero_ps();
    for (std::size_t d = 0; d < D; d += 32) {
      const std::size_t cols = std::min<std::size_t>(32, D - d);
      __m512i r[16];
      load_pairs_transposed(k + j0 * D + d, D, m, cols, r);
      for (std::size_t u = 0; 2 * u < cols; ++u) {
        const __m512 even = even_bf16(r[u]), odd = odd_bf16(r[u]);
        for (std::size_t g = 0; g < NG; ++g) acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(q[g][d + 2 * u]), even, acc[g]);
        for (std::size_t g = 0; g < NG; ++g) acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(q[g][d + 2 * u + 1]), odd, acc[g]);
      }
    }
    const __mmask16 keep = m == 16 ? __mmask16(0xffff) : __mmask16((1u << m) - 1u);
    for (std::size_t g = 0; g < NG; ++g)
      _mm512_mask_storeu_ps(scores + g * 64 + j0, keep, _mm512_mul_ps(acc[g], _mm512_set1_ps(scale)));
  }
}

// o[g] = o[g] * corr[g] + sum_j p[g][j] v_j for NG heads, 16 dimensions a vector; V as the page
// stores it ([D][P]): a block of 16 dimensions x 32 values transposes into pairs of values.
template <std::size_t NG>
FT_TARGET_AVX512 void accum_heads(float* const* o, const float* corr, const float* p, const bf16_t* vt, std::size_t P,
                                  std::size_t n, std::size_t D) {
  for (std::size_t d = 0; d < D; d += 16) {
    __m512 acc[NG];
    for (std::size_t g = 0; g < NG; ++g) acc[g] = _mm512_mul_ps(_mm512_loadu_ps(o[g] + d), _mm512_set1_ps(corr[g]));
    for (std::size_t j0 = 0; j0 < n; j0 += 32) {
      const std::size_t m = std::min<std::size_t>(32, n - j0);
      __m512i r[16];
      load_pairs_transposed(vt + d * P + j0, P, 16, m, r);
      for (std::size_t u = 0; 2 * u < m; ++u) {
        const float* pj = p + j0 + 2 * u;
        const __m512 even = even_bf16(r[u]);
        for (std::size_t g = 0; g < NG; ++g) acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(pj[g * 64]), even, acc[g]);
        if (2 * u + 1 == m) break;
        const __m512 odd = odd_bf16(r[u]);
        for (std::size_t g = 0; g < NG; ++g) acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(pj[g * 64 + 1]), odd, acc[g]);
      }
    }
    for (std::size_t g = 0; g < NG; ++g) _mm512_storeu_ps(o[g] + d, acc[g]);
  }
}

FT_TARGET_AVX512 void scores_avx512(const float* const* q, std::size_t G, const bf16_t* k, std::size_t n, std::size_t D,
                                    float scale, float* scores) {
  by_head_groups<kHeadsAtOnce>(
      G, [&](auto ng, std::size_t g0) { scores_heads<decltype(ng)::value>(q + g0, k, n, D, scale, scores + g0 * 64); });
}

FT_TARGET_AVX512 void accum_avx512(float* const* o, const float* corr, std::size_t G, const float* p, const bf16_t* vt,
                                   std::size_t P, std::size_t n, std::size_t D) {
  by_head_groups<kHeadsAtOnce>(G, [&](auto ng, std::size_t g0) {
    accum_heads<decltype(ng)::value>(o + g0, corr + g0, p + g0 * 64, vt, P, n, D);
  });
}

// The same two kernels on AVX2 (Intel's client cores have no AVX-512): 8 lanes, 8 x 16 bf16 blocks
// transposed as 8 x 8 pairs, the query and weight scalars broadcast from memory, up to 4 heads'
// accumulators at once (16 registers). The sums run in the AVX-512 kernels' order.
constexpr std::size_t kHeadsAtOnceAvx2 = 4;

FT_TARGET_AVX2 inline __m256 even_bf16(__m256i pair) { return _mm256_castsi256_ps(_mm256_slli_epi32(pair, 16)); }
FT_TARGET_AVX2 inline __m256 odd_bf16(__m256i pair) {
  return _mm256_castsi256_ps(_mm256_and_si256(pair, _mm256_set1_epi32(int(0xffff0000u))));
}
// Lanes [0, n) of 8 set (n <= 8).
FT_TARGET_AVX2 inline __m256i first_lanes(std::size_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <std::size_t NG>
FT_TARGET_AVX2 void scores_heads_avx2(const float* const* q, const bf16_t* k, std::size_t n, std::size_t D, float scale,
                                      float* scores) {
  for (std::size_t j0 = 0; j0 < n; j0 += 8) {
    const std::size_t m = std::min<std::size_t>(8, n - j0);
    __m256 acc[NG];
    for (std::size_t g = 0; g < NG; ++g) acc[g] = _mm256_setzero_ps();
    for (std::size_t d = 0; d < D; d += 16) {
      __m256i r[8];
      for (std::size_t i = 0; i < 8; ++i)
        r[i] =
            i < m ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + (j0 + i) * D + d)) : _mm256_setzero_si256();
      transpose8x8(r);
      for (std::size_t u = 0; u < 8; ++u) {
        const __m256 even = even_bf16(r[u]), odd = odd_bf16(r[u]);
        for (std::size_t g = 0; g < NG; ++g)
          acc[g] = _mm256_fmadd_ps(_mm256_broadcast_ss(&q[g][d + 2 * u]), even, acc[g]);
        for (std::size_t g = 0; g < NG; ++g)
          acc[g] = _mm256_fmadd_ps(_mm256_broadcast_ss(&q[g][d + 2 * u + 1]), odd, acc[g]);
      }
    }
    const __m256i keep = first_lanes(m);
    for (std::size_t g = 0; g < NG; ++g)
      _mm256_maskstore_ps(scores + g * 64 + j0, keep, _mm256_mul_ps(acc[g], _mm256_set1_ps(scale)));
  }
}

template <std::size_t NG>
FT_TARGET_AVX2 void accum_heads_avx2(float* const* o, const float* corr, const float* p, const bf16_t* vt,
                                     std::size_t P, std::size_t n, std::size_t D) {
  for (std::size_t d = 0; d < D; d += 8) {
    __m256 acc[NG];
    for (std::size_t g = 0; g < NG; ++g) acc[g] = _mm256_mul_ps(_mm256_loadu_ps(o[g] + d), _mm256_set1_ps(corr[g]));
    for (std::size_t j0 = 0; j0 < n; j0 += 16) {
      const std::size_t m = std::min<std::size_t>(16, n - j0);
      // The pairs holding values [0, m) of each of the 8 dimensions' rows (of an odd m's last pair
      // only the even value is used: its neighbour may be anything past the row's valid values).
      const __m256i pairs = first_lanes((m + 1) / 2);
      __m256i r[8];
      for (std::size_t i = 0; i < 8; ++i)
        r[i] = _mm256_maskload_epi32(reinterpret_cast<const int*>(vt + (d + i) * P + j0), pairs);
      transpose8x8(r);
      for (std::size_t u = 0; 2 * u < m; ++u) {
        const float* pj = p + j0 + 2 * u;
        const __m256 even = even_bf16(r[u]);
        for (std::size_t g = 0; g < NG; ++g) acc[g] = _mm256_fmadd_ps(_mm256_broadcast_ss(pj + g * 64), even, acc[g]);
        if (2 * u + 1 == m) break;
        const __m256 odd = odd_bf16(r[u]);
        for (std::size_t g = 0; g < NG; ++g)
          acc[g] = _mm256_fmadd_ps(_mm256_broadcast_ss(pj + g * 64 + 1), odd, acc[g]);
      }
    }
    for (std::size_t g = 0; g < NG; ++g) _mm256_storeu_ps(o[g] + d, acc[g]);
  }
}

FT_TARGET_AVX2 void scores_avx2(const float* const* q, std::size_t G, const bf16_t* k, std::size_t n, std::size_t D,
                                float scale, float* scores) {
  by_head_groups<kHeadsAtOnceAvx2>(G, [&](auto ng, std::size_t g0) {
    scores_heads_avx2<decltype(ng)::value>(q + g0, k, n, D, scale, scores + g0 * 64);
  });
}

FT_TARGET_AVX2 void accum_avx2(float* const* o, const float* corr, std::size_t G, const float* p, const bf16_t* vt,
                               std::size_t P, std::size_t n, std::size_t D) {
  by_head_groups<kHeadsAtOnceAvx2>(G, [&](auto ng, std::size_t g0) {
    accum_heads_avx2<decltype(ng)::value>(o + g0, corr + g0, p + g0 * 64, vt, P, n, D);
  });
}
FT_SIMD_END
#endif

// Online softmax over one page's scores sc[0, n) (n <= 64): updates the running max and sum,
// turns the scores into exp(score - max) and returns the factor the earlier output must be scaled by.
using SoftmaxFn = float (*)(float* sc, std::size_t n, float& max, float& sum);

float softmax_scalar(float* sc, std::size_t n, float& max, float& sum) {
  float m = max;
  for (std::size_t j = 0; j < n; ++j) m = std::max(m, sc[j]);
  const float corr = std::exp(max - m);  // exp(-inf) = 0 on the first page
  float s = 0.0f;
  for (std::size_t j = 0; j < n; ++j) s += (sc[j] = std::exp(sc[j] - m));
  sum = sum * corr + s;
  max = m;
  return corr;
}

#if FT_X86
FT_SIMD_BEGIN
FT_TARGET_AVX512 float softmax_avx512(float* sc, std::size_t n, float& max, float& sum) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 mv = ninf;
  for (std::size_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1u);
    mv = _mm512_max_ps(mv, _mm512_mask_loadu_ps(ninf, k, sc + j));
  }
  const float m = std::max(max, _mm512_reduce_max_ps(mv));
  const float corr = std::exp(max - m);
  __m512 acc = _mm512_setzero_ps();
  const __m512 mm = _mm512_set1_ps(m);
  for (std::size_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1u);
    const __m512 e = _mm512_maskz_mov_ps(k, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, sc + j), mm)));
    _mm512_mask_storeu_ps(sc + j, k, e);
    acc = _mm512_add_ps(acc, e);
  }
  sum = sum * corr + hsum512(acc);
  max = m;
  return corr;
}

FT_TARGET_AVX2 float softmax_avx2(float* sc, std::size_t n, float& max, float& sum) {
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 mv = ninf;
  for (std::size_t j = 0; j < n; j += 8) {
    const __m256i k = first_lanes(n - j);
    mv = _mm256_max_ps(mv, _mm256_blendv_ps(ninf, _mm256_maskload_ps(sc + j, k), _mm256_castsi256_ps(k)));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, mv);
  float m = max;
  for (float v : lanes) m = std::max(m, v);
  const float corr = std::exp(max - m);
  __m256 acc = _mm256_setzero_ps();
  const __m256 mm = _mm256_set1_ps(m);
  for (std::size_t j = 0; j < n; j += 8) {
    const __m256i k = first_lanes(n - j);
    const __m256 e = _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_maskload_ps(sc + j, k), mm)), _mm256_castsi256_ps(k));
    _mm256_maskstore_ps(sc + j, k, e);
    acc = _mm256_add_ps(acc, e);
  }
  sum = sum * corr + hsum256(acc);
  max = m;
  return corr;
}
FT_SIMD_END
#endif

struct Kernels {
  ScoresFn scores = scores_scalar;
  AccumFn accum = accum_scalar;
  SoftmaxFn softmax = softmax_scalar;
};

Kernels kernels_for(CpuIsa isa, std::size_t D) {
#if FT_X86
  if (isa != CpuIsa::kScalar && isa != CpuIsa::kAvx2 && D % 16 == 0) return {scores_avx512, accum_avx512, softmax_avx512};
  if (isa == CpuIsa::kAvx2 && D % 16 == 0) return {scores_avx2, accum_avx2, softmax_avx2};
#endif
  (void)isa;
  (void)D;
  return {};
}

using Partial = AttentionPartial;

struct Item {
  std::size_t seq, kv_head, g0, g1;  // query heads [g0, g1) of the kv head's group
  std::size_t row0, rows;            // rows [row0, row0 + rows) of the sequence
  int64_t chunk;
};

}  // namespace

void kv_write(const KvLayout& l, int64_t layer, const float* k, const float* v, std::span<const AttentionSeq> seqs) {
  const std::size_t KV = std::size_t(l.kv_heads_at(layer)), D = std::size_t(l.head_dim_at(layer)),
                    P = std::size_t(l.page_tokens);
  // One item: a sequence's rows [t0, t1) that share a page, one KV head. K rows are copied; V is
  // written transposed ([D][P]).
  const auto write = [&](const AttentionSeq& s, std::size_t t0, std::size_t t1, std::size_t h) {
    const int64_t pos0 = s.pos0 + int64_t(t0);
    std::byte* page = s.pages[pos0 / l.page_tokens];
    const std::size_t slot0 = std::size_t(pos0 % l.page_tokens), stride = KV * D;
    const float* kt = k + ((s.row0 + t0) * KV + h) * D;
    const float* vt = v + ((s.row0 + t0) * KV + h) * D;
    auto* kb = reinterpret_cast<bf16_t*>(page + l.k_offset(layer, int64_t(h))) + slot0 * D;
    for (std::size_t t = 0; t < t1 - t0; ++t) to_bf16(kt + t * stride, kb + t * D, D);
    auto* vb = reinterpret_cast<bf16_t*>(page + l.v_offset(layer, int64_t(h))) + slot0;  // [D][P]
    for (std::size_t d = 0; d < D; ++d)
      for (std::size_t t = 0; t < t1 - t0; ++t) vb[d * P + t] = f32_to_bf16(vt[t * stride + d]);
  };
  struct PageRun {
    std::size_t seq, t0, t1, head;
  };
  std::vector<PageRun> items;
  std::size_t rows = 0;
  for (std::size_t si = 0; si < seqs.size(); ++si) {
    const AttentionSeq& s = seqs[si];
    rows += s.rows;
    for (std::size_t t0 = 0; t0 < s.rows;) {
      const std::size_t in_page = P - std::size_t((s.pos0 + int64_t(t0)) % l.page_tokens);
      const std::size_t t1 = std::min(s.rows, t0 + in_page);
      for (std::size_t h = 0; h < KV; ++h) items.push_back({si, t0, t1, h});
      t0 = t1;
    }
  }
  const auto run = [&](std::size_t i) { write(seqs[items[i].seq], items[i].t0, items[i].t1, items[i].head); };
  // A decode step's few rows on the calling thread; a prefill chunk's pages over the workers.
  if (rows * KV * D < kParallelElems) {
    for (std::size_t i = 0; i < items.size(); ++i) run(i);
  } else {
    tbb::parallel_for(std::size_t(0), items.size(), run);
  }
}

void attention(Scratch& scratch, CpuIsa isa, const KvLayout& l, int64_t layer, const float* q, std::size_t heads,
               float scale, std::span<const AttentionSeq> seqs, float* out, const AttentionOptions& opt, bool bf16_x) {
  const std::size_t KV = std::size_t(l.kv_heads_at(layer)), D = std::size_t(l.head_dim_at(layer)), G = heads / KV;
  const std::size_t P = std::size_t(l.page_tokens);
  const Kernels kern = kernels_for(D <= kMaxDim ? isa : CpuIsa::kScalar, D);
  Scratch::Frame frame(scratch);
  // The first key a query at `pos` sees.
  const auto first_key = [&](int64_t pos) { return opt.first_key(pos); };

  // Work items: (sequence, kv head, block of rows, key chunk), every chunk some row of the block sees.
  std::size_t total_rows = 0, max_chunks = 0;
  for (const AttentionSeq& s : seqs) {
    total_rows = std::max(total_rows, s.row0 + s.rows);
    max_chunks = std::max<std::size_t>(max_chunks, std::size_t((s.pos0 + int64_t(s.rows) - 1) / kKeyChunk + 1));
  }
  // The AMX kernel makes its own items; it knows no window or chunk.
  const bool amx = !opt.limited() && attention_amx_fits(isa, l, layer);
  std::vector<Item> items;
  for (std::size_t si = 0; si < seqs.size() && !amx; ++si) {
    const AttentionSeq& s = seqs[si];
    for (std::size_t r0 = 0; r0 < s.rows; r0 += kRowBlock) {
      const std::size_t rows = std::min(kRowBlock, s.rows - r0);
      const int64_t last = s.pos0 + int64_t(r0 + rows) - 1;
      for (int64_t c = first_key(s.pos0 + int64_t(r0)) / kKeyChunk; c <= last / kKeyChunk; ++c)
        for (std::size_t h = 0; h < KV; ++h)
          for (std::size_t g0 = 0; g0 < G; g0 += kMaxGroup) items.push_back({si, h, g0, std::min(G, g0 + kMaxGroup), r0, rows, c});
    }
  }
  // Per (row, head, chunk): the chunk's unnormalised output and its softmax state.
  float* part_out = scratch.floats(total_rows * heads * max_chunks * D);
  Partial* part = scratch.take<Partial>(total_rows * heads * max_chunks);
  const auto at = [&](std::size_t row, std::size_t head, int64_t chunk) {
    return (row * heads + head) * max_chunks + std::size_t(chunk);
  };
  if (amx) attention_amx_partials(l, layer, q, heads, scale, seqs, part_out, part, max_chunks, bf16_x);

  tbb::parallel_for(std::size_t(0), items.size(), [&](std::size_t i) {
    const Item& it = items[i];
    const AttentionSeq& s = seqs[it.seq];
    const std::size_t n_g = it.g1 - it.g0;
    const int64_t chunk_begin = it.chunk * kKeyChunk;
    const int64_t chunk_end = std::min(chunk_begin + kKeyChunk, s.pos0 + int64_t(it.row0 + it.rows));
    float scores[kMaxGroup * 64];
    float corr[kMaxGroup];
    const float* qg[kMaxGroup];
    float* og[kMaxGroup];
    Partial* pg[kMaxGroup];
    // Row r's queries, chunk outputs and softmax states of the item's heads.
    const auto bind = [&](std::size_t r) {
      const std::size_t row = s.row0 + r;
      for (std::size_t g = 0; g < n_g; ++g) {
        const std::size_t head = it.kv_head * G + it.g0 + g;
        qg[g] = q + (row * heads + head) * D;
        og[g] = part_out + at(row, head, it.chunk) * D;
        pg[g] = part + at(row, head, it.chunk);
      }
    };
    for (std::size_t r = it.row0; r < it.row0 + it.rows; ++r) {
      if (s.pos0 + int64_t(r) < chunk_begin) continue;  // a chunk beyond what the row sees
      bind(r);
      for (std::size_t g = 0; g < n_g; ++g) {
        std::fill(og[g], og[g] + D, 0.0f);
        *pg[g] = Partial{-std::numeric_limits<float>::infinity(), 0.0f};
      }
    }
    // Page by page (each row still meets its pages in order).
    for (int64_t p0 = chunk_begin; p0 < chunk_end; p0 += int64_t(P)) {
      const std::size_t n_page = std::size_t(std::min<int64_t>(int64_t(P), chunk_end - p0));
      const std::byte* page = s.pages[p0 / int64_t(P)];
      const auto* kp = reinterpret_cast<const bf16_t*>(page + l.k_offset(layer, int64_t(it.kv_head)));
      const auto* vt = reinterpret_cast<const bf16_t*>(page + l.v_offset(layer, int64_t(it.kv_head)));
      if (const int64_t next = p0 + int64_t(P); next < chunk_end) {
        // The next page's K and V blocks on their way while this one is read: pages lie anywhere in
        // the pool, so each is a new stream the hardware prefetchers would find only after its first misses.
        const std::byte* np = s.pages[next / int64_t(P)];
        const std::size_t n_next = std::size_t(std::min<int64_t>(int64_t(P), chunk_end - next));
        prefetch(np + l.k_offset(layer, int64_t(it.kv_head)), n_next * D * sizeof(bf16_t));
        prefetch(np + l.v_offset(layer, int64_t(it.kv_head)), D * P * sizeof(bf16_t));
      }
      for (std::size_t r = it.row0; r < it.row0 + it.rows; ++r) {
        const int64_t pos = s.pos0 + int64_t(r);
        if (pos < p0) continue;  // the row's keys end before this page
        const int64_t lo = first_key(pos);
        if (lo >= p0 + int64_t(n_page)) continue;  // ... or begin after it (a sliding window)
        const std::size_t skip = std::size_t(std::max<int64_t>(0, lo - p0));
        const std::size_t n = std::size_t(std::min<int64_t>(int64_t(n_page), pos + 1 - p0)) - skip;
        bind(r);
        kern.scores(qg, n_g, kp + skip * D, n, D, scale, scores);
        for (std::size_t g = 0; g < n_g; ++g) corr[g] = kern.softmax(scores + g * 64, n, pg[g]->max, pg[g]->sum);
        kern.accum(og, corr, n_g, scores, vt + skip, P, n, D);
      }
    }
  });

  // Merge each (row, head)'s chunks in chunk order (and its sink), then normalise.
  tbb::parallel_for(std::size_t(0), seqs.size() * heads, [&](std::size_t i) {
    const AttentionSeq& s = seqs[i / heads];
    const std::size_t head = i % heads;
    for (std::size_t r = 0; r < s.rows; ++r) {
      const std::size_t row = s.row0 + r;
      const int64_t pos = s.pos0 + int64_t(r), c0 = first_key(pos) / kKeyChunk, chunks = pos / kKeyChunk + 1;
      float m = opt.sinks ? opt.sinks[head] : -std::numeric_limits<float>::infinity();
      for (int64_t c = c0; c < chunks; ++c) m = std::max(m, part[at(row, head, c)].max);
      float* o = out + (row * heads + head) * D;
      std::fill(o, o + D, 0.0f);
      float sum = opt.sinks ? std::exp(opt.sinks[head] - m) : 0.0f;
      for (int64_t c = c0; c < chunks; ++c) {
        const Partial& pc = part[at(row, head, c)];
        const float w = std::exp(pc.max - m);
        sum += pc.sum * w;
        const float* oc = part_out + at(row, head, c) * D;
        for (std::size_t d = 0; d < D; ++d) o[d] += oc[d] * w;
      }
      const float inv = 1.0f / sum;
      for (std::size_t d = 0; d < D; ++d) o[d] *= inv;
    }
  });
}

}  // namespace ft::engine::cpu
