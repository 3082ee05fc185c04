#include "ops/cpu/dsa.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ft/engine/bf16.h"

namespace ft::engine::cpu {
namespace {

// Element `at` of a K or V block as fp32 (the pages are bf16 on this backend; fp32 pages too, for
// tests against the reference on the same bytes).
inline float kv_at(const KvLayout& l, const std::byte* block, std::size_t at) {
  if (l.dtype == KvDType::kF32) {
    float v;
    std::memcpy(&v, block + at * 4, 4);
    return v;
  }
  bf16_t b;
  std::memcpy(&b, block + at * 2, 2);
  return bf16_to_f32(b);
}

// Eight partial sums in a fixed order, added pairwise at the end: the same bits for a row wherever
// it runs, and a loop the compiler vectorises.
inline float dot(const float* a, const float* b, std::size_t n) {
  float acc[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  for (; i < n; ++i) acc[i % 8] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

void index_select(Scratch& scratch, const KvLayout& layout, int64_t layer, const float* q, const float* w,
                  const IndexerSpec& spec, std::span<const AttentionSeq> seqs, int32_t* selected) {
  const std::size_t D = std::size_t(layout.head_dim_at(layer)), P = std::size_t(layout.page_tokens);
  const std::size_t Hi = spec.heads, Di = spec.head_dim, K = spec.top_k;
  for (const AttentionSeq& s : seqs) {
    Scratch::Frame frame(scratch);
    const std::size_t n = std::size_t(s.pos0) + s.rows;
    // The sequence's index keys as fp32 [n, Di], read once for all its rows. A key wider than a
    // slot continues in the next slot's K block.
    float* keys = scratch.floats(n * Di);
    tbb::parallel_for(std::size_t(0), (n + P - 1) / P, [&](std::size_t page) {
      for (std::size_t d0 = 0; d0 < Di; d0 += D) {
        const std::byte* block = s.pages[page] + layout.k_offset(layer, spec.kv_slot + int64_t(d0 / D));
        for (std::size_t j = page * P; j < std::min(n, (page + 1) * P); ++j)
          for (std::size_t d = d0; d < std::min(Di, d0 + D); ++d)
            keys[j * Di + d] = kv_at(layout, block, (j % P) * D + d - d0);
      }
    });
    tbb::parallel_for(std::size_t(0), s.rows, [&](std::size_t r) {
      const std::size_t row = s.row0 + r, count = std::size_t(s.pos0) + r + 1;  // causal
      const float* qr = q + row * Hi * Di;
      thread_local std::vector<float> scores, weights;
      scores.resize(count);
      weights.resize(Hi);
      for (std::size_t h = 0; h < Hi; ++h) weights[h] = w[row * Hi + h] * spec.weight_scale;
      for (std::size_t j = 0; j < count; ++j) {
        float sum = 0.0f;
        for (std::size_t h = 0; h < Hi; ++h)
          sum += weights[h] * std::max(dot(qr + h * Di, keys + j * Di, Di) * spec.scale, 0.0f);
        scores[j] = sum;
      }
      ref::top_k_positions(scores.data(), count, n, K, selected + row * K);
    });
  }
}

void sparse_attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                      std::span<const AttentionSeq> seqs, const int32_t* selected, std::size_t top_k, float* out) {
  const std::size_t D = std::size_t(layout.head_dim_at(layer)), P = std::size_t(layout.page_tokens);
  for (const AttentionSeq& s : seqs) {
    tbb::parallel_for(std::size_t(0), s.rows * heads, [&](std::size_t rh) {
      const std::size_t row = s.row0 + rh / heads, h = rh % heads;
      const int32_t* sel = selected + row * top_k;
      const float* qh = q + (row * heads + h) * D;
      thread_local std::vector<float> k, p;
      k.resize(D);
      p.resize(top_k);
      float max_score = -std::numeric_limits<float>::infinity();
      for (std::size_t i = 0; i < top_k; ++i) {
        if (sel[i] < 0) continue;
        const std::size_t pos = std::size_t(sel[i]);
        const std::byte* block = s.pages[pos / P] + layout.k_offset(layer, int64_t(h));
        for (std::size_t d = 0; d < D; ++d) k[d] = kv_at(layout, block, (pos % P) * D + d);
        p[i] = dot(qh, k.data(), D) * scale;
        max_score = std::max(max_score, p[i]);
      }
      float sum = 0.0f;
      for (std::size_t i = 0; i < top_k; ++i) {
        if (sel[i] < 0) continue;
        p[i] = std::exp(p[i] - max_score);
        sum += p[i];
      }
      const float inv = 1.0f / sum;
      float* o = out + (row * heads + h) * D;
      std::fill(o, o + D, 0.0f);
      for (std::size_t i = 0; i < top_k; ++i) {
        if (sel[i] < 0) continue;
        const std::size_t pos = std::size_t(sel[i]);
        const std::byte* block = s.pages[pos / P] + layout.v_offset(layer, int64_t(h));  // V blocks are [D][P]
        const float pi = p[i] * inv;
        for (std::size_t d = 0; d < D; ++d) o[d] += pi * kv_at(layout, block, d * P + pos % P);
      }
    });
  }
}

}  // namespace ft::engine::cpu
