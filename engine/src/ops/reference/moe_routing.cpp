#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ft/engine/ops_dense.h"
#include "ft/engine/ops_moe.h"

namespace ft::engine::ref {
namespace {

// The indices of the k largest of v[0, n) (ties to the lower index) in order[0, k). A NaN ranks
// below everything (as -inf): a broken router row is chosen last, and the order stays a strict
// weak one (a NaN compared as itself would make partial_sort's result undefined).
void top_indices(const float* v, std::size_t n, std::size_t k, std::vector<int32_t>& order) {
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  const auto key = [&](int32_t i) { return std::isnan(v[i]) ? -INFINITY : v[i]; };
  std::partial_sort(order.begin(), order.begin() + std::ptrdiff_t(k), order.end(), [&](int32_t a, int32_t b) {
    const float ka = key(a), kb = key(b);
    return ka != kb ? ka > kb : a < b;
  });
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

namespace {

// Token t's scores: softmax, sigmoid or sqrt-softplus of its logits.
void token_scores(const float* l, const RouterSpec& spec, std::vector<float>& scores) {
  const std::size_t E = spec.num_experts;
  if (spec.scoring == RouterScoring::kSoftmax) {
    const float m = *std::max_element(l, l + E);
    float sum = 0.0f;
    for (std::size_t e = 0; e < E; ++e) sum += scores[e] = std::exp(l[e] - m);
    for (std::size_t e = 0; e < E; ++e) scores[e] /= sum;
  } else if (spec.scoring == RouterScoring::kSqrtSoftplus) {
    for (std::size_t e = 0; e < E; ++e) scores[e] = sqrt_softplus(l[e]);
  } else {
    for (std::size_t e = 0; e < E; ++e) scores[e] = sigmoid(l[e]);
  }
}

// The K chosen experts' weights from their scores. HF adds 1e-20 to the sum where it renormalises
// (DeepSeek-V3, V4): nothing in fp32 next to a sum of sigmoid or sqrt-softplus scores, so left out.
void chosen_weights(const std::vector<float>& scores, const RouterSpec& spec, const int32_t* chosen, float* weights) {
  const std::size_t K = spec.top_k;
  float total = 0.0f;
  for (std::size_t i = 0; i < K; ++i) total += scores[std::size_t(chosen[i])];
  for (std::size_t i = 0; i < K; ++i) {
    float w = scores[std::size_t(chosen[i])];
    if (spec.renormalize) w /= total;
    weights[i] = w * spec.scaling;
    if (spec.per_expert_scale) weights[i] *= spec.per_expert_scale[chosen[i]];
  }
}

}  // namespace

void route_top_k(const float* logits, std::size_t T, const RouterSpec& spec, int32_t* experts, float* weights) {
  const std::size_t E = spec.num_experts, K = spec.top_k;
  std::vector<float> scores(E), choice, group_scores;
  std::vector<int32_t> order, group_order;
  for (std::size_t t = 0; t < T; ++t) {
    token_scores(logits + t * E, spec, scores);
    if (spec.grouped()) {
      grouped_choice(scores.data(), spec, choice, group_scores, group_order);
      top_indices(choice.data(), E, K, order);
    } else {
      top_indices(scores.data(), E, K, order);
    }
    std::copy(order.begin(), order.begin() + std::ptrdiff_t(K), experts + t * K);
    chosen_weights(scores, spec, experts + t * K, weights + t * K);
  }
}

void route_weights_for(const float* logits, std::size_t T, const RouterSpec& spec, const int32_t* experts,
                       float* weights) {
  const std::size_t E = spec.num_experts, K = spec.top_k;
  std::vector<float> scores(E);
  for (std::size_t t = 0; t < T; ++t) {
    token_scores(logits + t * E, spec, scores);
    chosen_weights(scores, spec, experts + t * K, weights + t * K);
  }
}

}  // namespace ft::engine::ref
