// The reference ops the DeepSeek-V3-style families added, against values computed by hand (plain
// Python for the YaRN table): grouped sigmoid routing with a correction bias, NaN logits in the
// top-k, YaRN frequencies and attention factors, the attention factor on cos/sin, and column-block
// copies.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ft/engine/ops_attention.h"
#include "ft/engine/ops_dense.h"
#include "ft/engine/ops_moe.h"

namespace ft::engine::ref {
namespace {

RouterSpec grouped(std::size_t E, std::size_t K, std::size_t groups, std::size_t topk_group, const float* bias) {
  RouterSpec r;
  r.num_experts = E;
  r.top_k = K;
  r.scoring = RouterScoring::kSigmoid;
  r.renormalize = true;
  r.scaling = 2.5f;
  r.n_group = groups;
  r.topk_group = topk_group;
  r.correction_bias = bias;
  return r;
}

// 8 experts in 4 groups of 2; the bias demotes expert 5 (the best plain score) and promotes 6 and
// 7. Choice scores c = sigmoid + bias: .881 .269 | .622 .599 | .119 .053 | 1.0 1.025; group scores
// (two best) 1.150, 1.221, 0.172, 2.025 -> groups 3 and 1; experts 7, 6, 2 by choice score,
// weighted by their plain scores .525 .5 .622, renormalised and times 2.5.
TEST(GroupedRouter, BiasChoosesGroupsAndExpertsWeightsStayPlainScores) {
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 0.4f, -2.0f, 3.0f, 0.0f, 0.1f};
  const std::vector<float> bias = {0, 0, 0, 0, 0, -0.9f, 0.5f, 0.5f};
  std::vector<int32_t> experts(3);
  std::vector<float> weights(3);
  route_top_k(logits.data(), 1, grouped(8, 3, 4, 2, bias.data()), experts.data(), weights.data());
  EXPECT_EQ(experts, (std::vector<int32_t>{7, 6, 2}));
  EXPECT_NEAR(weights[0], 0.7966597562307259, 1e-6);
  EXPECT_NEAR(weights[1], 0.7587536565558464, 1e-6);
  EXPECT_NEAR(weights[2], 0.9445865872134278, 1e-6);

  // Without bias and groups the same scores pick the plain top 3: 5, 0, 2.
  RouterSpec plain = grouped(8, 3, 1, 1, nullptr);
  route_top_k(logits.data(), 1, plain, experts.data(), weights.data());
  EXPECT_EQ(experts, (std::vector<int32_t>{5, 0, 2}));
}

// HF masks the unselected groups with 0.0, not -inf: an expert of a selected group whose biased
// score is negative loses to the masked ones (lowest index first).
TEST(GroupedRouter, MaskedExpertsCompeteWithScoreZero) {
  const std::vector<float> logits = {0, 0, 0, 0};                // every plain score 0.5
  const std::vector<float> bias = {-0.2f, -0.7f, -0.9f, -0.8f};  // c = .3 -.2 | -.4 -.3
  std::vector<int32_t> experts(3);
  std::vector<float> weights(3);
  route_top_k(logits.data(), 1, grouped(4, 3, 2, 1, bias.data()), experts.data(), weights.data());
  EXPECT_EQ(experts, (std::vector<int32_t>{0, 2, 3}));
  for (float w : weights) EXPECT_NEAR(w, 2.5 / 3, 1e-6);
}

TEST(GroupedRouter, EveryTokenRoutesOnItsOwn) {
  const std::vector<float> bias = {0, 0, 0, 0, 0, -0.9f, 0.5f, 0.5f};
  const std::vector<float> one = {2.0f, -1.0f, 0.5f, 0.4f, -2.0f, 3.0f, 0.0f, 0.1f};
  std::vector<float> two(one.rbegin(), one.rend());
  two.insert(two.begin(), one.begin(), one.end());  // token 0 as above, token 1 reversed
  std::vector<int32_t> experts(6), alone(3);
  std::vector<float> weights(6), w_alone(3);
  const RouterSpec spec = grouped(8, 3, 4, 2, bias.data());
  route_top_k(two.data(), 2, spec, experts.data(), weights.data());
  route_top_k(two.data() + 8, 1, spec, alone.data(), w_alone.data());
  EXPECT_EQ(std::vector<int32_t>(experts.begin() + 3, experts.end()), alone);
  EXPECT_EQ(std::vector<float>(weights.begin() + 3, weights.end()), w_alone);
}

// A NaN logit (a broken router row, an overflowed activation) ranks below every other: sigmoid
// routing chooses the finite experts as it would without it; softmax routing still names K
// distinct, valid experts (every score is NaN there: the softmax's sum is); a token whose logits
// are all NaN gets the lowest indices. Never an index past the experts for a kernel to read.
TEST(Router, NanLogitsAreChosenLast) {
  const float nan = std::nanf("");
  std::vector<int32_t> experts(3);
  std::vector<float> weights(3);
  const std::vector<float> logits = {2.0f, nan, 0.5f, 0.4f, nan, 3.0f, 0.0f, 0.1f};
  route_top_k(logits.data(), 1, grouped(8, 3, 1, 1, nullptr), experts.data(), weights.data());
  EXPECT_EQ(experts, (std::vector<int32_t>{5, 0, 2}));
  for (float w : weights) EXPECT_TRUE(std::isfinite(w));
  const std::vector<float> bias = {0, 0, 0, 0, 0, -0.9f, 0.5f, 0.5f};  // grouped: the first test's choice
  route_top_k(logits.data(), 1, grouped(8, 3, 4, 2, bias.data()), experts.data(), weights.data());
  EXPECT_EQ(experts, (std::vector<int32_t>{7, 6, 2}));

  RouterSpec softmax;
  softmax.num_experts = 8;
  softmax.top_k = 3;
  softmax.scoring = RouterScoring::kSoftmax;
  softmax.renormalize = true;
  route_top_k(logits.data(), 1, softmax, experts.data(), weights.data());
  for (int32_t e : experts) EXPECT_TRUE(e >= 0 && e < 8) << e;
  EXPECT_TRUE(experts[0] != experts[1] && experts[1] != experts[2] && experts[0] != experts[2]);

  const std::vector<float> all_nan(8, nan);
  for (const RouterSpec& spec : {grouped(8, 3, 1, 1, nullptr), softmax}) {
    route_top_k(all_nan.data(), 1, spec, experts.data(), weights.data());
    EXPECT_EQ(experts, (std::vector<int32_t>{0, 1, 2}));
  }
}

RopeSpec yarn_spec(bool truncate) {
  RopeSpec r;
  r.head_dim = 16;
  r.rotary_dim = 16;
  r.theta = 10000.0;
  r.yarn.factor = 4.0;
  r.yarn.original_max_position_embeddings = 64;
  r.yarn.truncate = truncate;
  return r;
}

// Python, HF's formulas in doubles: ramp [0, 3] truncated, [0, 2.016] not.
TEST(Yarn, FrequenciesBlendExtrapolationAndInterpolation) {
  const std::vector<double> truncated = {1.0,    0.23717082451262847,   0.05,    0.007905694150420948,
                                         0.0025, 0.0007905694150420947, 0.00025, 7.905694150420948e-05};
  const std::vector<double> smooth = {
      1.0,     0.19858352015369318,  0.02559524589192421, 0.007905694150420948, 0.0025, 0.0007905694150420947,
      0.00025, 7.905694150420948e-05};
  for (bool truncate : {true, false}) {
    const std::vector<float> got = rope_inv_freq(yarn_spec(truncate));
    const std::vector<double>& want = truncate ? truncated : smooth;
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6 * want[i]) << i;
  }
  RopeSpec plain = yarn_spec(true);
  plain.yarn.factor = 0;  // off: the plain frequencies
  EXPECT_FLOAT_EQ(rope_inv_freq(plain)[1], 1.0f / std::pow(10000.0f, 2.0f / 16));
}

TEST(Yarn, MscaleAndAttentionFactor) {
  EXPECT_DOUBLE_EQ(yarn_mscale(1.0, 1.0), 1.0);
  EXPECT_NEAR(yarn_mscale(40.0, 1.0), 1.3688879454113936, 1e-12);  // DeepSeek-V3's factor
  EXPECT_NEAR(yarn_mscale(4.0, 0.707), 1.0980110113311763, 1e-12);
  EXPECT_DOUBLE_EQ(yarn_attention_factor(40.0, 1.0, 1.0), 1.0);  // DeepSeek-V3: mscale == mscale_all_dim
  EXPECT_NEAR(yarn_attention_factor(4.0, 1.0, 0.707), 1.036992729910394, 1e-12);
  EXPECT_NEAR(yarn_attention_factor(4.0, 0, 0), yarn_mscale(4.0), 1e-12);  // either unset: mscale(factor)
}

TEST(Rope, AttentionFactorScalesTheRotatedDimsOnly) {
  RopeSpec spec{4, 2, 10000.0, RopeLayout::kNeox};
  spec.attention_factor = 1.5f;
  const auto inv = rope_inv_freq(spec);
  std::vector<float> x = {1, 2, 3, 4};
  apply_rope(x.data(), 1, 1, spec, inv, 2);
  const float c = std::cos(2.f) * 1.5f, s = std::sin(2.f) * 1.5f;
  EXPECT_NEAR(x[0], 1 * c - 2 * s, 1e-6);
  EXPECT_NEAR(x[1], 2 * c + 1 * s, 1e-6);
  EXPECT_EQ(x[2], 3);
  EXPECT_EQ(x[3], 4);
}

TEST(CopyColumns, MovesBlocksRepeatsRowsAndFills) {
  const std::vector<float> src = {0, 1, 2, 3, 10, 11, 12, 13};  // [2, 4]
  std::vector<float> dst(4 * 3, -1);                            // [4, 3]
  copy_columns(src.data() + 1, 4, 2, dst.data(), 3, 4, 2);      // columns 1..2, each row twice
  EXPECT_EQ(dst, (std::vector<float>{1, 2, -1, 1, 2, -1, 11, 12, -1, 11, 12, -1}));
  const float zero = 0;
  copy_columns(&zero, 0, 4, dst.data() + 2, 3, 4, 1);  // the last column from one zero
  EXPECT_EQ(dst, (std::vector<float>{1, 2, 0, 1, 2, 0, 11, 12, 0, 11, 12, 0}));
}

}  // namespace
}  // namespace ft::engine::ref
