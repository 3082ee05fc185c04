// DeepSeek-V4's router scores and expert GLU as the reference ops give them, against
// docs/deepseek-v4.md §2.9 written out here in double: sqrt(softplus(x)) with torch's threshold,
// the top-k chosen by score + correction bias with the weights from the scores (renormalised,
// scaled), and SwiGLU on clamped gate and up (no +1, no alpha: not gpt-oss's GLU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "ft/engine/ops_moe.h"

namespace ft::test {
namespace {

TEST(DeepseekV4Routing, SqrtSoftplusFollowsTorchsThreshold) {
  for (float x : {-40.0f, -5.0f, -0.5f, 0.0f, 0.7f, 5.0f, 19.9f, 20.0f, 20.1f, 60.0f}) {
    const double softplus = x > 20.0f ? double(x) : std::log1p(std::exp(double(x)));
    EXPECT_NEAR(engine::ref::sqrt_softplus(x), std::sqrt(softplus), 1e-6 * std::sqrt(softplus) + 1e-30) << x;
  }
  EXPECT_GT(engine::ref::sqrt_softplus(-40.0f), 0.0f);  // never 0: a far-negative logit still scores
}

TEST(DeepseekV4Routing, TopKChoosesByScorePlusBiasAndWeighsByTheScores) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const std::size_t E = 16, K = 4, T = 5;
  std::vector<float> logits(T * E), bias(E);
  for (float& v : logits) v = 2.0f * nd(rng);
  for (float& v : bias) v = 0.5f * nd(rng);
  engine::ref::RouterSpec spec;
  spec.num_experts = E;
  spec.top_k = K;
  spec.scoring = engine::ref::RouterScoring::kSqrtSoftplus;
  spec.renormalize = true;
  spec.scaling = 1.5f;
  spec.correction_bias = bias.data();
  std::vector<int32_t> experts(T * K);
  std::vector<float> weights(T * K);
  engine::ref::route_top_k(logits.data(), T, spec, experts.data(), weights.data());
  for (std::size_t t = 0; t < T; ++t) {
    std::vector<double> score(E), choice(E);
    for (std::size_t e = 0; e < E; ++e) {
      const double x = logits[t * E + e];
      score[e] = std::sqrt(x > 20.0 ? x : std::log1p(std::exp(x)));
      choice[e] = score[e] + bias[e];
    }
    std::vector<int32_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return choice[a] > choice[b]; });
    double total = 0;
    for (std::size_t i = 0; i < K; ++i) total += score[std::size_t(order[i])];
    for (std::size_t i = 0; i < K; ++i) {
      ASSERT_EQ(experts[t * K + i], order[i]) << "token " << t << " choice " << i;
      EXPECT_NEAR(weights[t * K + i], score[std::size_t(order[i])] / total * 1.5, 1e-6) << "token " << t;
    }
  }
  // The bias moves the choice, not the weights: without it the choice differs somewhere.
  spec.correction_bias = nullptr;
  std::vector<int32_t> unbiased(T * K);
  engine::ref::route_top_k(logits.data(), T, spec, unbiased.data(), weights.data());
  EXPECT_NE(unbiased, experts);
}

TEST(DeepseekV4Routing, ClampedSwiGluHasNoOffsetAndNoAlpha) {
  engine::ref::ExpertGlu glu;
  glu.clamped = true;
  glu.alpha = 1.0f;
  glu.up_offset = 0.0f;
  glu.limit = 1.5f;
  for (float g : {-4.0f, -1.0f, 0.3f, 1.49f, 1.5f, 3.0f}) {
    for (float u : {-9.0f, -1.5f, -0.2f, 0.0f, 0.8f, 2.0f}) {
      const double gc = std::min(double(g), 1.5), uc = std::clamp(double(u), -1.5, 1.5);
      const double want = gc / (1.0 + std::exp(-gc)) * uc;
      EXPECT_NEAR(engine::ref::expert_glu(glu, g, u), want, 1e-6) << g << ", " << u;
    }
  }
  // gpt-oss's defaults are untouched: (u' + 1) * g' * sigmoid(1.702 g').
  engine::ref::ExpertGlu oss;
  oss.clamped = true;
  const double g = 2.0, u = 0.5;
  EXPECT_NEAR(engine::ref::expert_glu(oss, float(g), float(u)), (u + 1.0) * g / (1.0 + std::exp(-1.702 * g)), 1e-6);
}

}  // namespace
}  // namespace ft::test
