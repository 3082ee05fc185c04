#include "ft/engine/ops_moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ft/engine/ops_dense.h"

namespace ft::engine::ref {

void route_top_k(const float* logits, std::size_t T, const RouterSpec& spec, int32_t* experts, float* weights) {
  const std::size_t E = spec.num_experts, K = spec.top_k;
  std::vector<float> scores(E);
  std::vector<int32_t> order(E);
  for (std::size_t t = 0; t < T; ++t) {
    const float* l = logits + t * E;
    if (spec.scoring == RouterScoring::kSoftmax) {
      const float m = *std::max_element(l, l + E);
      float sum = 0.0f;
      for (std::size_t e = 0; e < E; ++e) sum += scores[e] = std::exp(l[e] - m);
      for (std::size_t e = 0; e < E; ++e) scores[e] /= sum;
    } else {
      for (std::size_t e = 0; e < E; ++e) scores[e] = sigmoid(l[e]);
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int32_t a, int32_t b) {
      return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
    });
    float total = 0.0f;
    for (std::size_t i = 0; i < K; ++i) total += scores[order[i]];
    for (std::size_t i = 0; i < K; ++i) {
      float w = scores[order[i]];
      if (spec.renormalize) w /= total;
      experts[t * K + i] = order[i];
      weights[t * K + i] = w * spec.scaling;
    }
  }
}

}  // namespace ft::engine::ref
