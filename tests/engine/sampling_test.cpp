// Sampling: greedy, masks (top-k, top-p, min-p) on hand-made logits, seed reproducibility.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "ft/engine/sampling.h"

namespace ft::engine {
namespace {

// Logits whose softmax is exactly the given probabilities.
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(float(std::log(p)));
  return l;
}

TEST(Sampling, GreedyIsArgmaxWithLowestIndexOnTies) {
  const std::vector<float> l = {1, 5, 5, 2};
  EXPECT_EQ(argmax(l), 1);
  Sampler s({.greedy = true});
  EXPECT_EQ(s.sample(l), 1);
  Sampler zero_temp({.temperature = 0.0f});
  EXPECT_EQ(zero_temp.sample(l), 1);
}

TEST(Sampling, TopKKeepsTheKLargest) {
  const auto l = logits_of({0.1, 0.4, 0.2, 0.3});
  const auto p = sampling_distribution(l, {.top_k = 2});
  EXPECT_FLOAT_EQ(p[0], 0);
  EXPECT_FLOAT_EQ(p[2], 0);
  EXPECT_NEAR(p[1], 0.4 / 0.7, 1e-6);
  EXPECT_NEAR(p[3], 0.3 / 0.7, 1e-6);
}

TEST(Sampling, TopPKeepsTheSmallestSetReachingP) {
  const auto l = logits_of({0.1, 0.4, 0.2, 0.3});
  // 0.4 < 0.6, 0.4 + 0.3 = 0.7 >= 0.6: keep {1, 3}.
  auto p = sampling_distribution(l, {.top_p = 0.6f});
  EXPECT_FLOAT_EQ(p[0], 0);
  EXPECT_FLOAT_EQ(p[2], 0);
  EXPECT_NEAR(p[1], 0.4 / 0.7, 1e-6);
  // A tiny top_p still keeps the most likely token.
  p = sampling_distribution(l, {.top_p = 0.01f});
  EXPECT_FLOAT_EQ(p[1], 1);
}

TEST(Sampling, MinPDropsTokensBelowAFractionOfTheTop) {
  const auto l = logits_of({0.1, 0.4, 0.2, 0.3});
  const auto p = sampling_distribution(l, {.min_p = 0.4f});  // threshold 0.16: 0.1 dropped
  EXPECT_FLOAT_EQ(p[0], 0);
  EXPECT_NEAR(p[2], 0.2 / 0.9, 1e-6);
}

TEST(Sampling, TemperatureSharpens) {
  const auto l = logits_of({0.25, 0.75});
  const auto p = sampling_distribution(l, {.temperature = 0.5f});  // squares then renormalises
  EXPECT_NEAR(p[1], 0.5625 / 0.625, 1e-6);
}

TEST(Sampling, SameSeedSameTokensDifferentSeedDifferentTokens) {
  const auto l = logits_of({0.2, 0.2, 0.2, 0.2, 0.2});
  auto draw = [&](uint64_t seed) {
    Sampler s({.seed = seed});
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(l));
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(Sampling, FrequenciesFollowTheDistribution) {
  const auto l = logits_of({0.1, 0.6, 0.3});
  Sampler s({.seed = 7});
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[s.sample(l)];
  EXPECT_NEAR(counts[0] / double(n), 0.1, 0.015);
  EXPECT_NEAR(counts[1] / double(n), 0.6, 0.015);
  EXPECT_NEAR(counts[2] / double(n), 0.3, 0.015);
}

TEST(Sampling, MaskedTokensAreNeverDrawn) {
  const auto l = logits_of({0.05, 0.5, 0.05, 0.4});
  Sampler s({.top_k = 2, .seed = 3});
  for (int i = 0; i < 2000; ++i) {
    const int32_t t = s.sample(l);
    ASSERT_TRUE(t == 1 || t == 3) << t;
  }
}

TEST(Sampling, StopTokens) {
  const std::vector<int32_t> stops = {151645, 151643};
  EXPECT_TRUE(is_stop_token(151643, stops));
  EXPECT_FALSE(is_stop_token(7, stops));
}

}  // namespace
}  // namespace ft::engine

namespace ft::engine {
namespace {

// The distribution from a selection of the top tokens equals the full-sort definition bit for bit,
// over random vocabularies with many ties (logits rounded to a coarse grid), every warper and
// their combinations, including top_p values only a long tail reaches.
TEST(Sampling, SelectionEqualsTheFullSortDefinition) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 3.f);
  for (int round = 0; round < 40; ++round) {
    const std::size_t n = round % 2 ? 4000 : 151936 / 16;
    std::vector<float> logits(n);
    for (float& l : logits) l = round % 3 == 0 ? std::round(nd(rng) * 4.f) / 4.f : nd(rng);
    for (const SamplingParams& p :
         {SamplingParams{.temperature = 0.7f, .top_k = 40},
          SamplingParams{.temperature = 1.0f, .top_p = 0.95f},
          SamplingParams{.temperature = 1.3f, .top_p = 0.999f},  // a long tail: more than 256 tokens
          SamplingParams{.temperature = 0.6f, .top_k = 20, .top_p = 0.8f, .min_p = 0.05f},
          SamplingParams{.temperature = 1.0f, .min_p = 0.1f},
          SamplingParams{.temperature = 2.0f, .top_k = int(n) - 1, .top_p = 0.5f}}) {
      ASSERT_EQ(sampling_distribution(logits, p), sampling_distribution_reference(logits, p))
          << "round " << round << " top_k " << p.top_k << " top_p " << p.top_p << " min_p " << p.min_p;
    }
  }
}

}  // namespace
}  // namespace ft::engine
