// Gated DeltaNet CPU reference: hand-computed gate/rule/norm values, chunked == recurrent, split
// invariance of the conv and of the whole layer, and the qwen3_next fused projection layout.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "ft/engine/ops_deltanet.h"

namespace ft::engine {
namespace {

using ref::DeltaNetDims;
using ref::DeltaNetProjLayout;
using ref::DeltaNetState;
using ref::DeltaNetWeights;
using ref::DeltaRuleInput;
using ref::DeltaRuleMode;

std::vector<float> random_vec(std::size_t n, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// ---- Gates and norm ----------------------------------------------------------------------------

TEST(DeltaNetGates, SoftplusMatchesTorch) {
  EXPECT_NEAR(ref::softplus(0.f), 0.69314718f, 1e-7);    // ln 2
  EXPECT_NEAR(ref::softplus(1.f), 1.31326169f, 1e-6);    // ln(1 + e)
  EXPECT_NEAR(ref::softplus(-2.f), 0.12692801f, 1e-7);   // ln(1 + e^-2)
  EXPECT_FLOAT_EQ(ref::softplus(25.f), 25.f);            // torch threshold 20: identity above
  EXPECT_NEAR(ref::softplus(-30.f), 9.3576230e-14f, 1e-19);  // no underflow to 0 via log1p
}

TEST(DeltaNetGates, DecayAndBetaHandComputed) {
  // Head 0: A = exp(A_log) = 2, a + dt_bias = 1 -> g = -2 * ln(1 + e) = -2.62652338
  // Head 1: A = 0.5, a + dt_bias = 0 -> g = -0.5 * ln 2 = -0.34657359
  const std::vector<float> A_log = {std::log(2.f), std::log(0.5f)}, dt_bias = {0.5f, -1.f};
  const std::vector<float> a = {0.5f, 1.f}, b = {0.f, 2.f};
  std::vector<float> g(2), beta(2);
  ref::deltanet_gates(a.data(), b.data(), A_log.data(), dt_bias.data(), 1, 2, g.data(), beta.data());
  EXPECT_NEAR(g[0], -2.62652338f, 1e-6);
  EXPECT_NEAR(g[1], -0.34657359f, 1e-7);
  EXPECT_FLOAT_EQ(beta[0], 0.5f);
  EXPECT_NEAR(beta[1], 0.88079708f, 1e-7);  // sigmoid(2)
  // exp(g) is the per-token state decay: e^{-2.62652338} = 1 / (1 + e)^2
  EXPECT_NEAR(std::exp(g[0]), 1.0 / ((1.0 + std::numbers::e) * (1.0 + std::numbers::e)), 1e-7);
}

TEST(DeltaNetGates, GatedRmsNormHandComputed) {
  // x = [3, 4]: mean(x^2) = 12.5; z = [0, 1]: silu(0) = 0, silu(1) = 0.73105858; plain weight.
  const std::vector<float> x = {3.f, 4.f}, z = {0.f, 1.f}, w = {1.f, 2.f};
  std::vector<float> out(2);
  ref::rms_norm_gated(x.data(), z.data(), w.data(), out.data(), 1, 2, 0.f);
  EXPECT_FLOAT_EQ(out[0], 0.f);
  EXPECT_NEAR(out[1], 4.f / std::sqrt(12.5f) * 2.f * 0.73105858f, 1e-6);
}

// ---- Gated delta rule --------------------------------------------------------------------------

TEST(DeltaNetRule, TwoTokensHandComputed) {
  // One head, dk = 2, dv = 1. Token 0: k = (3,4) -> (0.6,0.8), v = 2, beta = 0.5, no decay:
  //   S = k * (2 - 0) * 0.5 = (0.6, 0.8); q = (1,0) -> out = 0.6 / sqrt(2).
  // Token 1: decay 0.5 -> S = (0.3, 0.4); k = (0,1): kv_mem = 0.4, delta = (1 - 0.4) * 1 = 0.6,
  //   S = (0.3, 1.0); q = (0,2) -> (0,1) -> out = 1.0 / sqrt(2).
  DeltaNetDims d;
  d.num_k_heads = d.num_v_heads = 1;
  d.head_k_dim = 2;
  d.head_v_dim = 1;
  const std::vector<float> q = {1, 0, 0, 2}, k = {3, 4, 0, 1}, v = {2, 1};
  const std::vector<float> g = {0.f, std::log(0.5f)}, beta = {0.5f, 1.f};
  DeltaRuleInput in{q.data(), k.data(), v.data(), 2, 1, g.data(), beta.data()};
  for (int chunked = 0; chunked < 2; ++chunked) {
    std::vector<float> S(2, 0.f), out(2);
    if (chunked) ref::gated_delta_rule_chunked(d, in, 2, S.data(), out.data());
    else ref::gated_delta_rule_recurrent(d, in, 2, S.data(), out.data());
    EXPECT_NEAR(out[0], 0.6 / std::sqrt(2.0), 1e-6) << chunked;
    EXPECT_NEAR(out[1], 1.0 / std::sqrt(2.0), 1e-6) << chunked;
    EXPECT_NEAR(S[0], 0.3, 1e-6) << chunked;
    EXPECT_NEAR(S[1], 1.0, 1e-6) << chunked;
  }
}

struct RuleCase {
  DeltaNetDims d;
  std::vector<float> q, k, v, g, beta, state;
  DeltaRuleInput input() const {
    return {q.data(), k.data(), v.data(), d.key_dim(), d.value_dim(), g.data(), beta.data()};
  }
};

RuleCase make_rule_case(std::size_t T, std::size_t nk, std::size_t nv, std::size_t dk,
                        std::size_t dv, float g_lo, std::uint32_t seed) {
  std::mt19937 rng(seed);
  RuleCase c;
  c.d.num_k_heads = nk;
  c.d.num_v_heads = nv;
  c.d.head_k_dim = dk;
  c.d.head_v_dim = dv;
  c.q = random_vec(T * nk * dk, rng);
  c.k = random_vec(T * nk * dk, rng);
  c.v = random_vec(T * nv * dv, rng);
  c.g = random_vec(T * nv, rng, g_lo, 0.f);
  c.beta = random_vec(T * nv, rng, 0.05f, 0.95f);
  c.state = random_vec(nv * dk * dv, rng, -0.5f, 0.5f);
  return c;
}

TEST(DeltaNetRule, ChunkedMatchesRecurrent) {
  for (float g_lo : {-0.3f, -6.f}) {  // mild decay, and decay strong enough to underflow e^{cumsum}
    for (std::size_t T : {1, 5, 63, 64, 65, 130}) {
      const RuleCase c = make_rule_case(T, 2, 4, 16, 12, g_lo, 1000 + std::uint32_t(T));
      const std::size_t out_n = T * c.d.value_dim();
      std::vector<float> s_rec = c.state, s_chk = c.state, o_rec(out_n), o_chk(out_n);
      ref::gated_delta_rule_recurrent(c.d, c.input(), T, s_rec.data(), o_rec.data());
      ref::gated_delta_rule_chunked(c.d, c.input(), T, s_chk.data(), o_chk.data());
      EXPECT_LT(rel_l2(o_chk, o_rec), 1e-5) << "T=" << T << " g_lo=" << g_lo;
      EXPECT_LT(rel_l2(s_chk, s_rec), 1e-5) << "T=" << T << " g_lo=" << g_lo;
    }
  }
}

TEST(DeltaNetRule, ValueHeadReadsItsKeyHeadGroupedOrTiled) {
  // nv = 4, nk = 2. Grouped (HF repeat_interleave): value heads 0,1 read key head 0 and 2,3 key
  // head 1. Tiled (llama.cpp's Qwen3.5 GGUF order): heads 0,2 read key head 0 and 1,3 key head 1.
  const std::size_t T = 70, nk = 2, nv = 4, dk = 8, dv = 5;
  for (const bool tiled : {false, true}) {
    for (const bool chunked : {false, true}) {
      RuleCase c = make_rule_case(T, nk, nv, dk, dv, -0.5f, 7);
      c.d.v_heads_tiled = tiled;
      std::vector<float> S = c.state, out(T * nv * dv);
      if (chunked)
        ref::gated_delta_rule_chunked(c.d, c.input(), T, S.data(), out.data());
      else
        ref::gated_delta_rule_recurrent(c.d, c.input(), T, S.data(), out.data());

      DeltaNetDims one = c.d;
      one.num_k_heads = one.num_v_heads = 1;
      one.v_heads_tiled = false;
      for (std::size_t h = 0; h < nv; ++h) {
        const std::size_t kh = tiled ? h % nk : h / (nv / nk);
        EXPECT_EQ(kh, c.d.k_head(h));
        std::vector<float> g1(T), b1(T), s1(c.state.begin() + h * dk * dv, c.state.begin() + (h + 1) * dk * dv);
        for (std::size_t t = 0; t < T; ++t) g1[t] = c.g[t * nv + h], b1[t] = c.beta[t * nv + h];
        DeltaRuleInput in1{
            c.q.data() + kh * dk, c.k.data() + kh * dk, c.v.data() + h * dv, nk * dk, nv * dv, g1.data(), b1.data()};
        std::vector<float> o1(T * dv);
        ref::gated_delta_rule_recurrent(one, in1, T, s1.data(), o1.data());
        std::vector<float> oh(T * dv);
        for (std::size_t t = 0; t < T; ++t)
          for (std::size_t j = 0; j < dv; ++j) oh[t * dv + j] = out[t * nv * dv + h * dv + j];
        EXPECT_LT(rel_l2(oh, o1), 1e-5) << "value head " << h << (tiled ? " tiled" : " grouped")
                                        << (chunked ? " chunked" : " recurrent");
      }
    }
  }
}

// ---- Short convolution -------------------------------------------------------------------------

TEST(DeltaNetConv, MatchesZeroPaddedConvAndIsSplitInvariant) {
  const std::size_t T = 23, C = 5, K = 4;
  std::mt19937 rng(3);
  const auto x = random_vec(T * C, rng), w = random_vec(C * K, rng);

  std::vector<float> state(C * (K - 1), 0.f), whole(T * C);
  ref::causal_conv1d_silu(x.data(), T, C, w.data(), K, state.data(), whole.data());
  // HF prefill: F.conv1d(x, w, padding=K-1)[:T] then SiLU, i.e. taps over x[t-K+1 .. t], zeros before 0.
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t c = 0; c < C; ++c) {
      double acc = 0;
      for (std::size_t j = 0; j < K; ++j) {
        const long src = long(t) - long(K - 1) + long(j);
        if (src >= 0) acc += double(w[c * K + j]) * x[std::size_t(src) * C + c];
      }
      EXPECT_NEAR(whole[t * C + c], acc / (1 + std::exp(-acc)), 1e-6);
    }
  // The state is the last K-1 inputs, oldest first.
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t i = 0; i < K - 1; ++i) EXPECT_EQ(state[c * (K - 1) + i], x[(T - (K - 1) + i) * C + c]);
  const std::vector<float> whole_state = state;

  // Any split point, including ones shorter than the state (s, T - s < K - 1): bit-identical.
  for (std::size_t s = 0; s <= T; ++s) {
    std::vector<float> st(C * (K - 1), 0.f), out(T * C);
    ref::causal_conv1d_silu(x.data(), s, C, w.data(), K, st.data(), out.data());
    ref::causal_conv1d_silu(x.data() + s * C, T - s, C, w.data(), K, st.data(), out.data() + s * C);
    EXPECT_EQ(out, whole) << "split " << s;
    EXPECT_EQ(st, whole_state) << "split " << s;
  }
  // Token by token with the decode form: bit-identical too.
  std::vector<float> st(C * (K - 1), 0.f), out(T * C);
  for (std::size_t t = 0; t < T; ++t)
    ref::causal_conv1d_silu_step(x.data() + t * C, C, w.data(), K, st.data(), out.data() + t * C);
  EXPECT_EQ(out, whole);
  EXPECT_EQ(st, whole_state);
}

}  // namespace
}  // namespace ft::engine
