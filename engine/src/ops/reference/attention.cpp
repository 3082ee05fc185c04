#include "ft/engine/ops_attention.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace ft::engine::ref {

void split_gated_query(const float* qg, std::size_t T, std::size_t heads, std::size_t head_dim, float* q,
                       float* gate) {
  for (std::size_t th = 0; th < T * heads; ++th) {
    const float* src = qg + th * 2 * head_dim;
    std::memcpy(q + th * head_dim, src, head_dim * sizeof(float));
    std::memcpy(gate + th * head_dim, src + head_dim, head_dim * sizeof(float));
  }
}

void causal_attention(const float* q, const float* k, const float* v, float* out, std::size_t T, std::size_t pos0,
                      std::size_t heads, std::size_t kv_heads, std::size_t head_dim, float scale,
                      const AttentionOptions& opt) {
  const std::size_t group = heads / kv_heads;
  tbb::parallel_for(std::size_t(0), T * heads, [&](std::size_t th) {
    const std::size_t t = th / heads, h = th % heads, kvh = h / group;
    const std::size_t n = pos0 + t + 1;  // causal: positions 0 .. pos0 + t
    const std::size_t first = std::size_t(opt.first_key(int64_t(n - 1)));
    const float* qv = q + th * head_dim;
    std::vector<float> scores(n, 0.0f);
    float max_score = opt.sinks ? opt.sinks[h] : -std::numeric_limits<float>::infinity();
    for (std::size_t j = first; j < n; ++j) {
      const float* kv = k + (j * kv_heads + kvh) * head_dim;
      float s = 0.0f;
      for (std::size_t d = 0; d < head_dim; ++d) s += qv[d] * kv[d];
      scores[j] = s * scale;
      max_score = std::max(max_score, scores[j]);
    }
    float sum = opt.sinks ? std::exp(opt.sinks[h] - max_score) : 0.0f;
    for (std::size_t j = first; j < n; ++j) {
      scores[j] = std::exp(scores[j] - max_score);
      sum += scores[j];
    }
    // HF normalises the probabilities first, then multiplies by V; do the same.
    const float inv = 1.0f / sum;
    float* o = out + th * head_dim;
    std::fill(o, o + head_dim, 0.0f);
    for (std::size_t j = first; j < n; ++j) {
      const float p = scores[j] * inv;
      const float* vv = v + (j * kv_heads + kvh) * head_dim;
      for (std::size_t d = 0; d < head_dim; ++d) o[d] += p * vv[d];
    }
  });
}

}  // namespace ft::engine::ref
