#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ft/engine/ops_dense.h"
#include "ft/engine/ops_moe.h"

namespace ft::engine::ref {
namespace {

// The indices of the k largest of v[0, n) (ties to the lower index) in order[0, k).
void top_indices(const float* v, std::size_t n, std::size_t k, std::vector<int32_t>& order) {
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(k), order.end(),
                    [&](int32_t a, int32_t b) { return v[a] != v[b] ? v[a] > v[b] : a < b; });
}

// HF DeepseekV3MoE.route_tokens_to_experts: the choice score is score + bias; a group's score is
// the sum of its two best choice scores; experts outside the topk_group best groups get choice
// score 0. `choice` receives the masked choice scores.
void grouped_choice(const float* scores, const RouterSpec& spec, std::vector<float>& choice,
                    std::vector<float>& group_scores, std::vector<int32_t>& order) {
  const std::size_t E = spec.num_experts, G = spec.n_group, per = E / G;
  choice.resize(E);
  for (std::size_t e = 0; e < E; ++e) choice[e] = scores[e] + (spec.correction_bias ? spec.correction_bias[e] : 0.0f);
  group_scores.resize(G);
  for (std::size_t g = 0; g < G; ++g) {
    top_indices(choice.data() + g * per, per, std::min<std::size_t>(2, per), order);
    float sum = 0.0f;
    for (std::size_t i = 0; i < std::min<std::size_t>(2, per); ++i) sum += choice[g * per + std::size_t(order[i])];
    group_scores[g] = sum;
  }
  top_indices(group_scores.data(), G, spec.topk_group, order);
  std::vector<bool> keep(G, false);
  for (std::size_t i = 0; i < spec.topk_group; ++i) keep[std::size_t(order[i])] = true;
  for (std::size_t e = 0; e < E; ++e)
    if (!keep[e / per]) choice[e] = 0.0f;
}

}  // namespace

void route_top_k(const float* logits, std::size_t T, const RouterSpec& spec, int32_t* experts, float* weights) {
  const std::size_t E = spec.num_experts, K = spec.top_k;
  std::vector<float> scores(E), choice, group_scores;
  std::vector<int32_t> order, group_order;
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
    if (spec.grouped()) {
      grouped_choice(scores.data(), spec, choice, group_scores, group_order);
      top_indices(choice.data(), E, K, order);
    } else {
      top_indices(scores.data(), E, K, order);
    }
    // HF adds 1e-20 to the sum where it renormalises (DeepSeek-V3): nothing in fp32 next to a sum
    // of sigmoid scores, so left out.
    float total = 0.0f;
    for (std::size_t i = 0; i < K; ++i) total += scores[std::size_t(order[i])];
    for (std::size_t i = 0; i < K; ++i) {
      float w = scores[std::size_t(order[i])];
      if (spec.renormalize) w /= total;
      experts[t * K + i] = order[i];
      weights[t * K + i] = w * spec.scaling;
    }
  }
}

}  // namespace ft::engine::ref
