// Paged causal attention on AMX tiles (see attention.h for the chunking it shares with the AVX-512
// kernel). A work item is one kv head, up to 16 query columns (a column is one query row and one
// query head of the kv head's group: a decode step fills 8 columns of a GQA group with one tile)
// and one key chunk. Per page:
//   S[keys][cols] = K[keys][d] . Q^T     A = the page's K block as stored, B = the columns' queries
//   online softmax down each column       (16 columns per vector: max, exp, sums)
//   O^T[d][cols] += V^T[d][keys] . P      A = the page's V block as stored ([d][keys]), B = P
// Queries and P are bf16x2 (high and low halves, both products into the same C), so q.k and p.v
// carry fp32-like precision (as the GPU's prefill attention has); or, where the backend is asked
// for bf16 activations, bf16 (half the tile products). A column's arithmetic depends on nothing
// else in its tile: keys past its position are masked to exactly zero weight, and a page with none
// of its keys leaves its state unchanged, so any batch or split gives it the same bits.
#include "ops/cpu/attention_amx.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/cpu/amx.h"
#include "ops/cpu/simd.h"

namespace ft::engine::cpu {

#if FT_X86
namespace {

constexpr std::size_t kCols = 16;
constexpr std::size_t kMaxDim = 256;

struct Item {
  std::size_t seq, kv_head;
  std::size_t col0, cols;  // columns [col0, col0 + cols) of the sequence's (row, head-in-group) list
  int64_t chunk;
};

FT_SIMD_BEGIN

// Two rows of 16 values (rows 2i and 2i + 1 of a [keys][cols] or [d][cols] matrix) as one B-tile
// row: for each column, the pair (even, odd). hi/lo: the bf16x2 halves, interleaved from
// bf16x2_split32's [even's 16 | odd's 16]; without Lo, bf16 (hi) alone.
template <bool Lo>
FT_TARGET_AMX inline void pair_row(__m512 even, __m512 odd, int* hi_row, int* lo_row) {
  const __m512i pairs = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                         5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  if constexpr (Lo) {
    __m512i hi, lo;
    bf16x2_split32(even, odd, hi, lo);
    _mm512_store_si512(hi_row, _mm512_permutexvar_epi16(pairs, hi));
    _mm512_store_si512(lo_row, _mm512_permutexvar_epi16(pairs, lo));
  } else {
    const auto hi = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(odd, even));
    _mm512_store_si512(hi_row, _mm512_permutexvar_epi16(pairs, hi));
  }
}

// Lo: queries and P as bf16x2, else bf16.
template <bool Lo>
FT_TARGET_AMX void run_item(const KvLayout& l, int64_t layer, const float* q, std::size_t heads, float scale,
                            const AttentionSeq& s, const Item& it, const std::size_t* col_row,
                            const std::size_t* col_head, float* part_out, AttentionPartial* part,
                            std::size_t max_chunks) {
  const std::size_t D = std::size_t(l.head_dim_at(layer)), P = std::size_t(l.page_tokens);
  alignas(64) int q_hi[kMaxDim / 2 * kCols], q_lo[kMaxDim / 2 * kCols];  // B tiles of Q, [d/2][cols] pairs
  alignas(64) int p_hi[32 * kCols / 2 * 2], p_lo[32 * kCols / 2 * 2];    // B tiles of P, 32 keys
  alignas(64) float S[64 * kCols];                                       // [keys][cols]
  alignas(64) float O[kMaxDim * kCols];                                  // O^T [d][cols]
  alignas(64) bf16_t v_tail[kMaxDim * 32];  // V of a page's last 32 keys when some hold no row
  alignas(64) int32_t pos[kCols];

  // Q of the item's columns as B tiles (missing columns zero), turned [d][cols] 16 dims at a time
  // by a register transpose (element by element it was a tenth of this kernel's time).
  alignas(64) float qt[kMaxDim * kCols];  // [d][cols]
  const float* qv[kCols] = {};
  int64_t last = 0;
  for (std::size_t c = 0; c < kCols; ++c) {
    pos[c] = -1;
    if (c >= it.cols) continue;
    const std::size_t row = col_row[it.col0 + c],
                      head = it.kv_head * (heads / std::size_t(l.kv_heads_at(layer))) + col_head[it.col0 + c];
    qv[c] = q + ((s.row0 + row) * heads + head) * D;
    pos[c] = int32_t(s.pos0 + int64_t(row));
    last = std::max<int64_t>(last, pos[c]);
  }
  for (std::size_t d0 = 0; d0 < D; d0 += 16) {
    __m512i r[16];
    for (std::size_t c = 0; c < kCols; ++c)
      r[c] = qv[c] ? _mm512_castps_si512(_mm512_loadu_ps(qv[c] + d0)) : _mm512_setzero_si512();
    transpose16x16(r);
    for (std::size_t i = 0; i < 16; ++i) _mm512_store_si512(qt + (d0 + i) * kCols, r[i]);
  }
  for (std::size_t d = 0; d < D; d += 2)
    pair_row<Lo>(_mm512_load_ps(qt + d * kCols), _mm512_load_ps(qt + (d + 1) * kCols), q_hi + (d / 2) * kCols,
                 q_lo + (d / 2) * kCols);
  std::memset(O, 0, sizeof(float) * D * kCols);
  __m512 run_max = _mm512_set1_ps(-std::numeric_limits<float>::infinity()), run_sum = _mm512_setzero_ps();
  const __m512i posv = _mm512_load_si512(pos);
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity()), sc = _mm512_set1_ps(scale);

  const int64_t begin = it.chunk * kKeyChunk, end = std::min(begin + kKeyChunk, last + 1);
  for (int64_t p0 = begin; p0 < end; p0 += int64_t(P)) {
    const std::byte* page = s.pages[p0 / int64_t(P)];
    const auto* kb = reinterpret_cast<const bf16_t*>(page + l.k_offset(layer, int64_t(it.kv_head)));
    const auto* vb = reinterpret_cast<const bf16_t*>(page + l.v_offset(layer, int64_t(it.kv_head)));
    const std::size_t n = std::size_t(std::min<int64_t>(int64_t(P), end - p0));
    const std::size_t n32 = (n + 31) / 32 * 32;  // keys the tiles cover (the rest masked)
    // S = K . Q^T, 16 keys a tile.
    for (std::size_t k0 = 0; k0 < n32; k0 += 16) {
      _tile_zero(0);
      for (std::size_t d = 0; d < D; d += 32) {
        _tile_loadd(2, kb + k0 * D + d, D * sizeof(bf16_t));
        _tile_loadd(4, q_hi + (d / 2) * kCols, 64);
        _tile_dpbf16ps(0, 2, 4);
        if constexpr (Lo) {
          _tile_loadd(5, q_lo + (d / 2) * kCols, 64);
          _tile_dpbf16ps(0, 2, 5);
        }
      }
      _tile_stored(0, S + k0 * kCols, 64);
    }
    // Mask keys past each column's position (and past the page's valid keys), softmax down columns.
    __m512 m = run_max;
    for (std::size_t k = 0; k < n32; ++k) {
      const __mmask16 past = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(int32_t(p0 + int64_t(k))), posv);
      __m512 v = _mm512_mul_ps(_mm512_load_ps(S + k * kCols), sc);
      v = _mm512_mask_blend_ps(k < n ? past : __mmask16(0xffff), v, ninf);
      _mm512_store_ps(S + k * kCols, v);
      m = _mm512_max_ps(m, v);
    }
    // A column that has seen no key yet keeps max -inf: its correction and weights must be 0, not NaN.
    const __mmask16 live = _mm512_cmp_ps_mask(m, ninf, _CMP_NEQ_OQ);
    const __m512 corr = _mm512_maskz_mov_ps(live, exp512(_mm512_sub_ps(run_max, m)));
    __m512 sum = _mm512_setzero_ps();
    for (std::size_t k = 0; k < n32; ++k) {
      const __m512 e = _mm512_maskz_mov_ps(live, exp512(_mm512_sub_ps(_mm512_load_ps(S + k * kCols), m)));
      _mm512_store_ps(S + k * kCols, e);
      sum = _mm512_add_ps(sum, e);
    }
    run_sum = _mm512_add_ps(_mm512_mul_ps(run_sum, _mm512_mask_blend_ps(live, _mm512_set1_ps(1.0f), corr)), sum);
    run_max = m;
    for (std::size_t d = 0; d < D; ++d) _mm512_store_ps(O + d * kCols, _mm512_mul_ps(_mm512_load_ps(O + d * kCols), corr));
    // O^T += V^T . P, 32 keys a step, 16 dimensions a tile.
    for (std::size_t k0 = 0; k0 < n32; k0 += 32) {
      // Keys past the page's valid ones hold no row (a recycled page's bytes, NaN included): their
      // weight is 0, but 0 x NaN is NaN, so their V columns enter as zeros.
      const bf16_t* v_step = vb + k0;
      std::size_t v_ld = P;
      if (k0 + 32 > n) {
        const __mmask32 valid = (__mmask32(1) << (n - k0)) - 1;  // n - k0 < 32
        for (std::size_t d = 0; d < D; ++d)
          _mm512_store_si512(v_tail + d * 32, _mm512_maskz_loadu_epi16(valid, vb + d * P + k0));
        v_step = v_tail;
        v_ld = 32;
      }
      for (std::size_t k = 0; k < 32; k += 2)
        pair_row<Lo>(_mm512_load_ps(S + (k0 + k) * kCols), _mm512_load_ps(S + (k0 + k + 1) * kCols),
                     p_hi + (k / 2) * kCols, p_lo + (k / 2) * kCols);
      _tile_loadd(4, p_hi, 64);
      if constexpr (Lo) _tile_loadd(5, p_lo, 64);
      // Two O tiles a step, so two load -> product -> store chains overlap (D is a multiple of 32).
      for (std::size_t d = 0; d < D; d += 32) {
        _tile_loadd(0, O + d * kCols, 64);
        _tile_loadd(1, O + (d + 16) * kCols, 64);
        _tile_loadd(2, v_step + d * v_ld, v_ld * sizeof(bf16_t));
        _tile_loadd(3, v_step + (d + 16) * v_ld, v_ld * sizeof(bf16_t));
        _tile_dpbf16ps(0, 2, 4);
        _tile_dpbf16ps(1, 3, 4);
        if constexpr (Lo) {
          _tile_dpbf16ps(0, 2, 5);
          _tile_dpbf16ps(1, 3, 5);
        }
        _tile_stored(0, O + d * kCols, 64);
        _tile_stored(1, O + (d + 16) * kCols, 64);
      }
    }
  }
  alignas(64) float mx[kCols], sm[kCols];
  _mm512_store_ps(mx, run_max);
  _mm512_store_ps(sm, run_sum);
  for (std::size_t c = 0; c < it.cols; ++c) {
    const std::size_t row = s.row0 + col_row[it.col0 + c];
    const std::size_t head = it.kv_head * (heads / std::size_t(l.kv_heads_at(layer))) + col_head[it.col0 + c];
    const std::size_t at = (row * heads + head) * max_chunks + std::size_t(it.chunk);
    part[at] = {mx[c], sm[c]};
    float* o = part_out + at * D;
    for (std::size_t d = 0; d < D; ++d) o[d] = O[d * kCols + c];
  }
}
FT_SIMD_END

}  // namespace
#endif

bool attention_amx_fits(CpuIsa isa, const KvLayout& l, int64_t layer) {
  const int64_t D = l.head_dim_at(layer);
  return isa == CpuIsa::kAmxBf16 && amx_usable() && l.dtype == KvDType::kBf16 && D % 32 == 0 && D <= 256 &&
         l.page_tokens % 32 == 0 && l.page_tokens <= 64;
}

void attention_amx_partials(const KvLayout& l, int64_t layer, const float* q, std::size_t heads, float scale,
                            std::span<const AttentionSeq> seqs, float* part_out, AttentionPartial* part,
                            std::size_t max_chunks, bool bf16_x) {
#if FT_X86
  const std::size_t G = heads / std::size_t(l.kv_heads_at(layer));
  // Per sequence, its columns: (row, head in group), rows outer.
  std::vector<std::vector<std::size_t>> col_row(seqs.size()), col_head(seqs.size());
  std::vector<Item> items;
  for (std::size_t si = 0; si < seqs.size(); ++si) {
    const AttentionSeq& s = seqs[si];
    for (std::size_t r = 0; r < s.rows; ++r)
      for (std::size_t g = 0; g < G; ++g) {
        col_row[si].push_back(r);
        col_head[si].push_back(g);
      }
    // Items in the order (kv head, key chunk, columns): the workers take runs of consecutive items,
    // so a run reads one chunk of one head's K and V (512 KiB at 1,024 keys of 128 dims) for many
    // columns while it stays in L2. Columns outermost re-read every chunk from L3 or memory for each
    // 16 columns, which is what a prefill's attention waited on.
    const std::size_t cols = s.rows * G;
    const int64_t last_chunk = (s.pos0 + int64_t(s.rows) - 1) / kKeyChunk;
    for (std::size_t h = 0; h < std::size_t(l.kv_heads_at(layer)); ++h)
      for (int64_t c = 0; c <= last_chunk; ++c)
        for (std::size_t c0 = 0; c0 < cols; c0 += kCols) {
          const std::size_t nc = std::min(kCols, cols - c0);
          const int64_t last = s.pos0 + int64_t(col_row[si][c0 + nc - 1]);
          if (c <= last / kKeyChunk) items.push_back({si, h, c0, nc, c});
        }
  }
  tbb::parallel_for(std::size_t(0), items.size(), [&](std::size_t i) {
    amx_load_tile_config();
    const Item& it = items[i];
    const auto run = bf16_x ? run_item<false> : run_item<true>;
    run(l, layer, q, heads, scale, seqs[it.seq], it, col_row[it.seq].data(), col_head[it.seq].data(), part_out, part,
        max_chunks);
  });
#else
  (void)l, (void)layer, (void)q, (void)heads, (void)scale, (void)seqs, (void)part_out, (void)part, (void)max_chunks,
      (void)bf16_x;
#endif
}

}  // namespace ft::engine::cpu
