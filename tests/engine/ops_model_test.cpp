// The transformer reference ops against hand-computed values: linear, RoPE (both layouts, partial),
// the gated-query split, causal GQA attention, top-k routing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ft/engine/ops_attention.h"
#include "ft/engine/ops_dense.h"
#include "ft/engine/ops_moe.h"

namespace ft::engine::ref {
namespace {

TEST(Linear, MatchesHandComputedWithBias) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};       // [2, 3]
  const std::vector<float> w = {1, 0, -1, 0.5f, 0.5f, 0.5f};  // [2, 3]
  const std::vector<float> b = {10, 20};
  std::vector<float> y(4);
  linear(x.data(), w.data(), b.data(), y.data(), 2, 2, 3);
  EXPECT_FLOAT_EQ(y[0], 1 - 3 + 10);
  EXPECT_FLOAT_EQ(y[1], 3 + 20);
  EXPECT_FLOAT_EQ(y[2], 4 - 6 + 10);
  EXPECT_FLOAT_EQ(y[3], 7.5f + 20);
}

TEST(Linear, LongRowsUseEveryElement) {
  const std::size_t n = 1037;  // not a multiple of the 8-wide accumulator
  std::vector<float> x(n), w(n);
  double want = 0;
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = float(i % 7) - 3;
    w[i] = float(i % 5) * 0.25f;
    want += double(x[i]) * w[i];
  }
  float y = 0;
  linear(x.data(), w.data(), nullptr, &y, 1, 1, n);
  EXPECT_NEAR(y, want, 1e-3);
}

// gpt-oss's GLU against HF's _apply_gate by hand: gate clamped above at 7, up to [-7, 7], then
// (up + 1) * gate * sigmoid(1.702 * gate); the plain form is silu(gate) * up.
TEST(ExpertGlu, ClampsLikeGptOssAndOtherwiseIsSilu) {
  const ExpertGlu oss{true, 1.702f, 7.0f};
  const auto hf = [](float g, float u) {
    g = std::min(g, 7.0f);
    u = std::max(-7.0f, std::min(u, 7.0f));
    return (u + 1.0f) * g / (1.0f + std::exp(-1.702f * g));
  };
  for (const auto& [g, u] : {std::pair{0.5f, -0.25f}, {10.0f, 3.0f}, {-9.0f, 12.0f}, {2.0f, -30.0f}})
    EXPECT_FLOAT_EQ(expert_glu(oss, g, u), hf(g, u)) << g << ", " << u;
  EXPECT_FLOAT_EQ(expert_glu(oss, 10.0f, 3.0f), expert_glu(oss, 7.0f, 3.0f));  // clamped
  EXPECT_FLOAT_EQ(expert_glu(ExpertGlu{}, 10.0f, 3.0f), 10.0f / (1.0f + std::exp(-10.0f)) * 3.0f);
}

// Gemma's GeGLU against torch's gelu(approximate="tanh") by hand (values from its formula in
// doubles), as the dense product and as an expert's GLU; its softcap and scale.
TEST(GemmaOps, GeluTanhSoftcapAndScale) {
  const auto gelu = [](double x) {
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  };
  for (float x : {-5.0f, -1.0f, -0.25f, 0.0f, 0.5f, 2.0f, 7.5f}) EXPECT_NEAR(gelu_tanh(x), gelu(x), 1e-6) << x;
  EXPECT_NEAR(gelu_tanh(1.0f), 0.841192, 1e-6);  // torch.nn.functional.gelu(1.0, approximate="tanh")
  std::vector<float> g = {1.0f, -2.0f}, u = {3.0f, 0.5f}, out(2);
  gelu_tanh_mul(g.data(), u.data(), out.data(), 2);
  EXPECT_FLOAT_EQ(out[0], gelu_tanh(1.0f) * 3.0f);
  EXPECT_FLOAT_EQ(out[1], gelu_tanh(-2.0f) * 0.5f);
  ExpertGlu geglu;
  geglu.gelu_tanh = true;
  EXPECT_FLOAT_EQ(expert_glu(geglu, -2.0f, 0.5f), out[1]);
  std::vector<float> x = {100.0f, -3.0f, 0.0f};
  softcap(x.data(), 3, 30.0f);
  EXPECT_NEAR(x[0], 30.0 * std::tanh(100.0 / 30.0), 1e-5);
  EXPECT_NEAR(x[1], 30.0 * std::tanh(-0.1), 1e-6);
  EXPECT_EQ(x[2], 0.0f);
  scale(x.data(), 3, 2.0f);
  EXPECT_NEAR(x[1], 60.0 * std::tanh(-0.1), 1e-5);
}

// Gemma 4's router: softmax over all, top-k renormalised, then each weight times its expert's
// per_expert_scale (route_weights_for alike).
TEST(Routing, PerExpertScalesMultiplyTheRenormalisedWeights) {
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f, -1.0f};
  const std::vector<float> per_expert = {1.0f, 0.5f, 3.0f, 1.0f};
  RouterSpec spec;
  spec.num_experts = 4;
  spec.top_k = 2;
  spec.per_expert_scale = per_expert.data();
  int32_t chosen[2];
  float weights[2];
  route_top_k(logits.data(), 1, spec, chosen, weights);
  EXPECT_EQ(chosen[0], 1);
  EXPECT_EQ(chosen[1], 2);
  const double e2 = std::exp(2.0), e1 = std::exp(1.0);
  EXPECT_NEAR(weights[0], e2 / (e2 + e1) * 0.5, 1e-6);
  EXPECT_NEAR(weights[1], e1 / (e2 + e1) * 3.0, 1e-6);
  float again[2];
  route_weights_for(logits.data(), 1, spec, chosen, again);
  EXPECT_FLOAT_EQ(again[0], weights[0]);
  EXPECT_FLOAT_EQ(again[1], weights[1]);
}

// Proportional RoPE (Gemma 4's full layers): the whole head's pairs, the first angles at
// theta^(-2i / head_dim) and the rest 0, so those pairs pass through.
TEST(Rope, ProportionalTurnsOnlyTheFirstAngles) {
  RopeSpec spec{8, 8, 10000.0, RopeLayout::kNeox};
  spec.proportional_angles = 1;  // int(0.25 * 8 // 2)
  const auto inv = rope_inv_freq(spec);
  ASSERT_EQ(inv.size(), 4u);
  EXPECT_FLOAT_EQ(inv[0], 1.0f);
  for (std::size_t i = 1; i < 4; ++i) EXPECT_EQ(inv[i], 0.0f) << i;
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  apply_rope(x.data(), 1, 1, spec, inv, /*pos0=*/5);
  EXPECT_NEAR(x[0], 1 * std::cos(5.f) - 5 * std::sin(5.f), 1e-6);
  EXPECT_NEAR(x[4], 5 * std::cos(5.f) + 1 * std::sin(5.f), 1e-6);
  for (std::size_t i : {1, 2, 3, 5, 6, 7}) EXPECT_EQ(x[i], float(i + 1)) << i;
}

TEST(Rope, NeoxRotatesDimIWithDimIPlusHalf) {
  RopeSpec spec{4, 4, 10000.0, RopeLayout::kNeox};
  const auto inv = rope_inv_freq(spec);  // {1, 0.01}
  ASSERT_EQ(inv.size(), 2u);
  EXPECT_FLOAT_EQ(inv[1], 0.01f);
  std::vector<float> x = {1, 2, 3, 4};
  apply_rope(x.data(), 1, 1, spec, inv, /*pos0=*/3);
  const float c0 = std::cos(3.f), s0 = std::sin(3.f), c1 = std::cos(0.03f), s1 = std::sin(0.03f);
  EXPECT_NEAR(x[0], 1 * c0 - 3 * s0, 1e-6);
  EXPECT_NEAR(x[1], 2 * c1 - 4 * s1, 1e-6);
  EXPECT_NEAR(x[2], 3 * c0 + 1 * s0, 1e-6);
  EXPECT_NEAR(x[3], 4 * c1 + 2 * s1, 1e-6);
}

TEST(Rope, GptjRotatesAdjacentPairs) {
  RopeSpec spec{4, 4, 10000.0, RopeLayout::kGptj};
  const auto inv = rope_inv_freq(spec);
  std::vector<float> x = {1, 2, 3, 4};
  apply_rope(x.data(), 1, 1, spec, inv, 3);
  const float c0 = std::cos(3.f), s0 = std::sin(3.f), c1 = std::cos(0.03f), s1 = std::sin(0.03f);
  EXPECT_NEAR(x[0], 1 * c0 - 2 * s0, 1e-6);
  EXPECT_NEAR(x[1], 2 * c0 + 1 * s0, 1e-6);
  EXPECT_NEAR(x[2], 3 * c1 - 4 * s1, 1e-6);
  EXPECT_NEAR(x[3], 4 * c1 + 3 * s1, 1e-6);
}

TEST(Rope, PartialRotaryLeavesTheTailAndUsesRotaryDimForFrequencies) {
  RopeSpec spec{8, 4, 100.0, RopeLayout::kNeox};  // partial_rotary_factor 0.5
  const auto inv = rope_inv_freq(spec);
  EXPECT_FLOAT_EQ(inv[1], 0.1f);  // 100^(-2/4)
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  apply_rope(x.data(), 1, 1, spec, inv, 2);
  EXPECT_NEAR(x[0], 1 * std::cos(2.f) - 3 * std::sin(2.f), 1e-6);
  EXPECT_NEAR(x[3], 4 * std::cos(0.2f) + 2 * std::sin(0.2f), 1e-6);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(x[i], float(i + 1));
}

TEST(Rope, PositionZeroIsIdentity) {
  RopeSpec spec{4, 4, 10000.0, RopeLayout::kNeox};
  std::vector<float> x = {1, 2, 3, 4};
  apply_rope(x.data(), 1, 1, spec, rope_inv_freq(spec), 0);
  EXPECT_EQ(x, (std::vector<float>{1, 2, 3, 4}));
}

TEST(GatedQuery, SplitsEachHeadIntoQueryThenGate) {
  // 1 token, 2 heads, head_dim 2: per head [q0 q1 g0 g1].
  const std::vector<float> qg = {1, 2, 10, 20, 3, 4, 30, 40};
  std::vector<float> q(4), gate(4);
  split_gated_query(qg.data(), 1, 2, 2, q.data(), gate.data());
  EXPECT_EQ(q, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(gate, (std::vector<float>{10, 20, 30, 40}));
}

TEST(Attention, CausalGqaMatchesHandComputed) {
  // 2 query heads share 1 kv head; head_dim 1; 2 tokens.
  const std::vector<float> q = {1, 2, 1, 0};  // [T=2, H=2, D=1]
  const std::vector<float> k = {1, 2};        // [2, 1, 1]
  const std::vector<float> v = {10, 20};
  std::vector<float> out(4);
  causal_attention(q.data(), k.data(), v.data(), out.data(), 2, 0, 2, 1, 1, 1.0f);
  EXPECT_FLOAT_EQ(out[0], 10);  // token 0 sees only itself
  EXPECT_FLOAT_EQ(out[1], 10);
  const float p = std::exp(2.f) / (std::exp(1.f) + std::exp(2.f));  // token 1, head 0: scores 1, 2
  EXPECT_NEAR(out[2], 10 * (1 - p) + 20 * p, 1e-5);
  EXPECT_NEAR(out[3], 15, 1e-5);  // head 1: scores 0, 0
}

TEST(Attention, OffsetQueriesSeeTheCachePrefix) {
  const std::vector<float> k = {0, 0, 0}, v = {1, 2, 3};  // 3 cached positions, scores all 0
  const std::vector<float> q = {5};                        // one query at position 2
  float out = 0;
  causal_attention(q.data(), k.data(), v.data(), &out, 1, 2, 1, 1, 1, 1.0f);
  EXPECT_NEAR(out, 2.0f, 1e-6);
}

// Scores all 0, so each row averages the values it sees: chunks of 3 restart what a row sees
// (positions 0..2, then 3..5, ...); a window of 2 slides.
TEST(Attention, ChunksAndWindowsLimitTheKeysEachRowSees) {
  const std::vector<float> k(7, 0.0f), v = {1, 2, 3, 4, 5, 6, 7}, q(7, 1.0f);
  std::vector<float> out(7);
  causal_attention(q.data(), k.data(), v.data(), out.data(), 7, 0, 1, 1, 1, 1.0f, AttentionOptions{0, nullptr, 3});
  EXPECT_THAT(out, ::testing::Pointwise(::testing::FloatNear(1e-6f), std::vector<float>{1, 1.5, 2, 4, 4.5, 5, 7}));
  causal_attention(q.data(), k.data(), v.data(), out.data(), 7, 0, 1, 1, 1, 1.0f, AttentionOptions{2, nullptr});
  EXPECT_THAT(out,
              ::testing::Pointwise(::testing::FloatNear(1e-6f), std::vector<float>{1, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5}));
  // A query at position 4 after a 4-token cache: its chunk (3..4).
  float one = 0;
  causal_attention(q.data(), k.data(), v.data(), &one, 1, 4, 1, 1, 1, 1.0f, AttentionOptions{0, nullptr, 3});
  EXPECT_NEAR(one, 4.5f, 1e-6);
}

// Llama 4's row scalings: by the sigmoid of the row's top router logit, and by the temperature
// log1p(floor((p + 1) / floor_scale)) * attn_scale + 1 (1 below floor_scale - 1).
TEST(Llama4Ops, TopSigmoidAndTemperatureScaleEachRow) {
  const std::vector<float> x = {1, 2, 3, 4}, logits = {0.5f, -1, 2, 0, -3, 1};  // [2, 2], [2, 3]
  std::vector<float> out(4);
  scale_by_top_sigmoid(x.data(), logits.data(), 2, 2, 3, out.data());
  const float a = 1 / (1 + std::exp(-2.0f)), b = 1 / (1 + std::exp(-1.0f));
  EXPECT_THAT(out, ::testing::Pointwise(::testing::FloatNear(1e-6f), std::vector<float>{a, 2 * a, 3 * b, 4 * b}));
  EXPECT_FLOAT_EQ(attention_temperature_at(2, 4, 0.1f), 1.0f);
  EXPECT_FLOAT_EQ(attention_temperature_at(3, 4, 0.1f), 1.0f + 0.1f * std::log(2.0f));
  EXPECT_FLOAT_EQ(attention_temperature_at(8190, 8192, 0.1f), 1.0f);
  EXPECT_FLOAT_EQ(attention_temperature_at(8191, 8192, 0.1f), 1.0f + 0.1f * std::log(2.0f));
  std::vector<float> q = {1, 1, 1, 1};
  const int64_t pos[] = {0, 11};
  attention_temperature(q.data(), 2, 2, pos, 4, 0.5f);
  EXPECT_THAT(q, ::testing::Pointwise(::testing::FloatNear(1e-6f),
                                      std::vector<float>{1, 1, 1 + 0.5f * std::log(4.0f), 1 + 0.5f * std::log(4.0f)}));
}

// Llama 3 RoPE scaling (HF _compute_llama3_parameters): long wavelengths divided by the factor,
// short ones kept, the band between blended.
TEST(Rope, Llama3ScalingDividesLongWavelengths) {
  RopeSpec plain;
  plain.head_dim = plain.rotary_dim = 128;
  plain.theta = 500000.0;
  RopeSpec scaled = plain;
  scaled.llama3 = {8.0, 1.0, 4.0, 8192};
  const std::vector<float> f = rope_inv_freq(plain), g = rope_inv_freq(scaled);
  ASSERT_EQ(f.size(), g.size());
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double wavelen = 2 * M_PI / f[i];
    if (wavelen < 8192.0 / 4) {
      EXPECT_EQ(g[i], f[i]) << i;
    } else if (wavelen > 8192.0) {
      EXPECT_FLOAT_EQ(g[i], f[i] / 8) << i;
    } else {
      const double smooth = (8192.0 / wavelen - 1) / 3;
      EXPECT_NEAR(g[i], (1 - smooth) * f[i] / 8 + smooth * f[i], 1e-6 * f[i]) << i;
    }
  }
}

TEST(Router, SoftmaxTopKWithAndWithoutRenormalisation) {
  const std::vector<float> logits = {0.f, std::log(3.f), std::log(2.f), std::log(4.f)};  // probs .1 .3 .2 .4
  std::vector<int32_t> experts(2);
  std::vector<float> weights(2);
  RouterSpec spec{4, 2, RouterScoring::kSoftmax, false, 1.0f};
  route_top_k(logits.data(), 1, spec, experts.data(), weights.data());
  EXPECT_EQ(experts, (std::vector<int32_t>{3, 1}));
  EXPECT_NEAR(weights[0], 0.4, 1e-6);
  EXPECT_NEAR(weights[1], 0.3, 1e-6);
  spec.renormalize = true;
  spec.scaling = 2.0f;
  route_top_k(logits.data(), 1, spec, experts.data(), weights.data());
  EXPECT_NEAR(weights[0], 2 * 4.0 / 7, 1e-6);
  EXPECT_NEAR(weights[1], 2 * 3.0 / 7, 1e-6);
}

TEST(Router, SigmoidScoringAndTiesGoToTheLowerIndex) {
  const std::vector<float> logits = {1, 3, 3, -1};
  std::vector<int32_t> experts(2);
  std::vector<float> weights(2);
  route_top_k(logits.data(), 1, {4, 2, RouterScoring::kSigmoid, false, 1.0f}, experts.data(), weights.data());
  EXPECT_EQ(experts, (std::vector<int32_t>{1, 2}));
  EXPECT_NEAR(weights[0], 1 / (1 + std::exp(-3.0)), 1e-6);
}

TEST(Activations, SiluMulAndSigmoidGate) {
  std::vector<float> g = {0, 1}, u = {2, 3}, o(2);
  silu_mul(g.data(), u.data(), o.data(), 2);
  EXPECT_FLOAT_EQ(o[0], 0);
  EXPECT_NEAR(o[1], 3 * (1 / (1 + std::exp(-1.0))), 1e-6);
  std::vector<float> x = {2, 2}, gate = {0, 100};
  mul_sigmoid(x.data(), gate.data(), 2);
  EXPECT_FLOAT_EQ(x[0], 1);
  EXPECT_FLOAT_EQ(x[1], 2);
}

}  // namespace
}  // namespace ft::engine::ref
