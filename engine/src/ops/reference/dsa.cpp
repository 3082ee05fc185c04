#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "ft/engine/ops_dsa.h"

namespace ft::engine::ref {

void layer_norm(const float* x, const float* weight, const float* bias, float* out, std::size_t rows, std::size_t dim,
                float eps) {
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    double sum = 0.0;
    for (std::size_t i = 0; i < dim; ++i) sum += xr[i];
    const float mean = float(sum / double(dim));
    double sum_sq = 0.0;
    for (std::size_t i = 0; i < dim; ++i) sum_sq += double(xr[i] - mean) * double(xr[i] - mean);
    const float inv = 1.0f / std::sqrt(float(sum_sq / double(dim)) + eps);
    for (std::size_t i = 0; i < dim; ++i) o[i] = (xr[i] - mean) * inv * weight[i] + bias[i];
  }
}

void indexer_scores(const float* q, const float* w, const float* k, std::size_t key_stride, std::size_t n,
                    const IndexerSpec& spec, float* scores) {
  const std::size_t H = spec.heads, D = spec.head_dim;
  for (std::size_t j = 0; j < n; ++j) {
    const float* kj = k + j * key_stride;
    float s = 0.0f;
    for (std::size_t h = 0; h < H; ++h) {
      float dot = 0.0f;
      for (std::size_t d = 0; d < D; ++d) dot += q[h * D + d] * kj[d];
      s += (w[h] * spec.weight_scale) * std::max(dot * spec.scale, 0.0f);
    }
    scores[j] = s;
  }
}

void top_k_positions(const float* scores, std::size_t n, std::size_t row_length, std::size_t top_k, int32_t* out) {
  // torch's CPU topk (aten TopKImpl.h, topk_impl_loop): (value, index) pairs in a double and an
  // int64, NaN first, then the k largest by value alone.
  using Elem = std::pair<double, int64_t>;
  const auto greater = [](const Elem& x, const Elem& y) {
    return (std::isnan(x.first) && !std::isnan(y.first)) || x.first > y.first;
  };
  const std::size_t k = std::min(top_k, row_length);
  std::fill(out, out + top_k, -1);
  if (k == 0) return;
  thread_local std::vector<Elem> queue;
  queue.resize(row_length);
  for (std::size_t j = 0; j < row_length; ++j)
    queue[j] = {j < n ? double(scores[j]) : -std::numeric_limits<double>::infinity(), int64_t(j)};
  if (k * 64 <= row_length) {
    std::partial_sort(queue.begin(), queue.begin() + std::ptrdiff_t(k), queue.end(), greater);
  } else {
    std::nth_element(queue.begin(), queue.begin() + std::ptrdiff_t(k - 1), queue.end(), greater);
  }
  std::size_t m = 0;
  for (std::size_t i = 0; i < k; ++i)
    if (std::size_t(queue[i].second) < n) out[m++] = int32_t(queue[i].second);  // a masked one sees nothing
  std::sort(out, out + m);
}

void sparse_attention_row(const float* q, const float* k, const float* v, std::size_t heads, std::size_t kv_heads,
                          std::size_t head_dim, const int32_t* selected, std::size_t top_k, float scale, float* out) {
  std::vector<float> p(top_k);
  for (std::size_t h = 0; h < heads; ++h) {
    const float* qh = q + h * head_dim;
    float max_score = -std::numeric_limits<float>::infinity();
    for (std::size_t i = 0; i < top_k; ++i) {
      if (selected[i] < 0) continue;
      const float* kj = k + (std::size_t(selected[i]) * kv_heads + h) * head_dim;
      float s = 0.0f;
      for (std::size_t d = 0; d < head_dim; ++d) s += qh[d] * kj[d];
      p[i] = s * scale;
      max_score = std::max(max_score, p[i]);
    }
    float sum = 0.0f;
    for (std::size_t i = 0; i < top_k; ++i) {
      if (selected[i] < 0) continue;
      p[i] = std::exp(p[i] - max_score);
      sum += p[i];
    }
    const float inv = 1.0f / sum;
    float* o = out + h * head_dim;
    std::fill(o, o + head_dim, 0.0f);
    for (std::size_t i = 0; i < top_k; ++i) {
      if (selected[i] < 0) continue;
      const float pi = p[i] * inv;
      const float* vj = v + (std::size_t(selected[i]) * kv_heads + h) * head_dim;
      for (std::size_t d = 0; d < head_dim; ++d) o[d] += pi * vj[d];
    }
  }
}

}  // namespace ft::engine::ref
