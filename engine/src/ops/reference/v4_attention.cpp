#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "ft/engine/ops_attention.h"
#include "ft/engine/ops_compressor.h"
#include "ft/engine/ops_v4_attention.h"
#include "ops/reference/dot.h"

namespace ft::engine::ref {

void v4_attention_row(const float* q, const V4RowKeys& keys, const float* sinks, const float* inv_freq, int64_t pos,
                      const V4AttentionSpec& spec, float* out) {
  const std::size_t d = spec.head_dim;
  // The row's keys in HF's order (the sliding part, then the entries), -1 picks dropped: HF masks
  // them to -inf, which adds nothing to the softmax.
  std::vector<const float*> k;
  k.reserve(keys.window_rows + keys.n_visible);
  for (std::size_t j = 0; j < keys.window_rows; ++j) k.push_back(keys.window + j * d);
  for (std::size_t i = 0; i < keys.n_visible; ++i) {
    const int32_t w = keys.visible[i];
    if (w < 0) continue;
    assert(std::size_t(w) < keys.n_entries);
    k.push_back(keys.entries + std::size_t(w) * d);
  }

  std::vector<float> p(k.size());
  for (std::size_t h = 0; h < spec.heads; ++h) {
    const float* qh = q + h * d;
    // HF concatenates the sink to the logits and subtracts the max over both before the softmax.
    float max_score = sinks ? sinks[h] : -std::numeric_limits<float>::infinity();
    for (std::size_t j = 0; j < k.size(); ++j) {
      float s = 0.0f;
      for (std::size_t c = 0; c < d; ++c) s += qh[c] * k[j][c];
      p[j] = s * spec.scale;
      max_score = std::max(max_score, p[j]);
    }
    float sum = sinks ? std::exp(sinks[h] - max_score) : 0.0f;
    for (std::size_t j = 0; j < k.size(); ++j) {
      p[j] = std::exp(p[j] - max_score);
      sum += p[j];
    }
    // Probabilities normalised before V, as HF's softmax then matmul; V = K.
    const float inv = 1.0f / sum;
    float* o = out + h * d;
    std::fill(o, o + d, 0.0f);
    for (std::size_t j = 0; j < k.size(); ++j) {
      const float pj = p[j] * inv;
      for (std::size_t c = 0; c < d; ++c) o[c] += pj * k[j][c];
    }
  }
  // V carried the keys' rope on its tail; turning the output back at the query position leaves
  // each key's contribution a function of its distance to the query (§2.6, HF's cos, -sin).
  rope_tail(out, spec.heads, d, spec.rope_dims, inv_freq, pos, /*inverse=*/true);
}

void v4_attention(const float* q, const float* kv, std::size_t T, int64_t pos0, const float* entries,
                  std::size_t n_entries, const int32_t* picks, std::size_t top_k, const float* sinks,
                  const float* inv_freq, const V4AttentionSpec& spec, float* out) {
  const std::size_t d = spec.head_dim, row = spec.heads * d;
  std::vector<int32_t> all(n_entries);  // HCA: entries 0 .. visible - 1 of each row
  std::iota(all.begin(), all.end(), 0);
  AttentionOptions window;
  window.window = spec.window;
  for (std::size_t t = 0; t < T; ++t) {
    const int64_t pos = pos0 + int64_t(t);
    // HF's sliding mask, kv_idx > q_idx - W and causal: AttentionOptions' window.
    const int64_t first = window.first_key(pos);
    V4RowKeys keys;
    keys.window = kv + std::size_t(first) * d;
    keys.window_rows = std::size_t(pos - first + 1);
    keys.entries = entries;
    keys.n_entries = n_entries;
    if (picks) {
      keys.visible = picks + t * top_k;
      keys.n_visible = top_k;
    } else if (spec.rate > 0) {
      // Entries close with their window's last token, so a pass holds every one its rows may see.
      const std::size_t visible = v4_causal_entries(pos, spec.rate);
      assert(visible <= n_entries);
      keys.visible = all.data();
      keys.n_visible = std::min(visible, n_entries);
    }
    v4_attention_row(q + t * row, keys, sinks, inv_freq, pos, spec, out + t * row);
  }
}

void grouped_o_proj(const float* o, const float* weight, std::size_t T, std::size_t in, std::size_t groups,
                    std::size_t rank, float* out) {
  assert(groups > 0 && in % groups == 0);
  const std::size_t cols = in / groups;
  for (std::size_t t = 0; t < T; ++t) {
    for (std::size_t g = 0; g < groups; ++g) {
      const float* x = o + t * in + g * cols;
      // Each group's rows as ref::linear multiplies them (one group: exactly ref::linear).
      for (std::size_t r = 0; r < rank; ++r)
        out[t * groups * rank + g * rank + r] = dot8(x, weight + (g * rank + r) * cols, cols);
    }
  }
}

void v4_index_select(const float* qi, const float* w, const float* keys, std::size_t n_entries, int64_t pos,
                     std::size_t rate, const IndexerSpec& spec, int32_t* out) {
  // Only the causal entries are scored; top_k_positions treats the rest of the n_entries row as
  // HF's -inf and never returns one (HF's -1 for a masked pick).
  const std::size_t causal = std::min(v4_causal_entries(pos, rate), n_entries);
  std::vector<float> scores(causal);
  indexer_scores(qi, w, keys, spec.head_dim, causal, spec, scores.data());
  top_k_positions(scores.data(), causal, n_entries, spec.top_k, out);
}

}  // namespace ft::engine::ref
