// deepseek_v3, glm4_moe, dots1, ernie4_5_moe, minimax_m2, glm4_moe_lite and hunyuan_v1_moe on the fp32
// reference backend against a second, deliberately naive implementation written line by line from
// HF's modeling code (transformers 5.x DeepseekV3Attention / Glm4MoeAttention / Qwen3Attention /
// Ernie4_5_MoeAttention / MiniMaxM2Attention / Glm4MoeLiteAttention / HunYuanMoEV1Attention,
// DeepseekV3MoE.route_tokens_to_experts, which Glm4MoeMoE, Dots1MoE and Glm4MoeLiteMoE share,
// Ernie4_5_MoeSparseMoeBlock, MiniMaxM2SparseMoeBlock, HunYuanMoEV1Moe), in doubles, on the same
// bf16 weights. It
// shares nothing with the engine but the checkpoint reader: HF's tensor layouts (q_pass before q_rot,
// the interleave permutations, kv_b_proj's nope-then-value rows, the fused expert halves), YaRN's
// frequencies and scales, the group mask's 0.0 and the expanded, padded KV of the engine's latent
// attention all have to agree. Until the HF goldens exist (scripts/goldens/make_model_goldens.py)
// this is what holds these families to HF's definition.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <numeric>

#include "ft/engine/checkpoint.h"
#include "ft/engine/model.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

using engine::ModelFamily;
using Vec = std::vector<double>;

// The checkpoint's tensors as doubles.
class Weights {
 public:
  explicit Weights(const engine::Checkpoint& c) : c_(c) {}
  bool has(const std::string& n) const { return c_.has(n); }
  const Vec& operator()(const std::string& n) const {
    auto it = cache_.find(n);
    if (it != cache_.end()) return it->second;
    auto view = c_.tensor(n);
    EXPECT_TRUE(view.is_ok()) << n;
    std::vector<float> f(view.is_ok() ? std::size_t(view->numel()) : 0);
    if (view.is_ok()) {
      EXPECT_TRUE(engine::to_f32(*view, f.data(), 0, f.size()).is_ok());
    }
    return cache_[n] = Vec(f.begin(), f.end());
  }

 private:
  const engine::Checkpoint& c_;
  mutable std::map<std::string, Vec> cache_;
};

// y [T, out] = x [T, in] W^T (+ b); W row-major [out, in] starting at row `row0` of `w`.
Vec linear(const Vec& x, std::size_t T, const Vec& w, std::size_t out, std::size_t in, const Vec* b = nullptr,
           std::size_t row0 = 0) {
  Vec y(T * out);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t o = 0; o < out; ++o) {
      double acc = b ? (*b)[o] : 0.0;
      for (std::size_t i = 0; i < in; ++i) acc += x[t * in + i] * w[(row0 + o) * in + i];
      y[t * out + o] = acc;
    }
  return y;
}

// HF RMSNorm over rows of `dim`.
Vec rms(const Vec& x, std::size_t dim, const Vec& w, double eps) {
  Vec y(x.size());
  for (std::size_t r = 0; r < x.size() / dim; ++r) {
    double ss = 0;
    for (std::size_t d = 0; d < dim; ++d) ss += x[r * dim + d] * x[r * dim + d];
    const double inv = 1.0 / std::sqrt(ss / double(dim) + eps);
    for (std::size_t d = 0; d < dim; ++d) y[r * dim + d] = w[d] * (x[r * dim + d] * inv);
  }
  return y;
}

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double mscale(double s, double m) { return s <= 1 ? 1.0 : 0.1 * m * std::log(s) + 1.0; }

// HF _compute_yarn_parameters (or the default frequencies) and the attention factor.
std::pair<Vec, double> rope_freqs(const engine::RandomCheckpointSpec& s, std::size_t dim) {
  Vec inv(dim / 2);
  for (std::size_t i = 0; i < dim / 2; ++i) inv[i] = 1.0 / std::pow(s.rope_theta, double(2 * i) / double(dim));
  if (s.yarn_factor <= 0) return {inv, 1.0};
  const double base = s.rope_theta, orig = double(s.yarn_original_max_position_embeddings), f = s.yarn_factor;
  auto corr = [&](double rot) {
    return double(dim) * std::log(orig / (rot * 2 * std::numbers::pi)) / (2 * std::log(base));
  };
  double lo = std::max(std::floor(corr(32)), 0.0), hi = std::min(std::ceil(corr(1)), double(dim - 1));
  if (lo == hi) hi += 0.001;
  for (std::size_t i = 0; i < dim / 2; ++i) {
    const double ramp = std::clamp((double(i) - lo) / (hi - lo), 0.0, 1.0), extra = 1 - ramp;
    inv[i] = inv[i] / f * (1 - extra) + inv[i] * extra;
  }
  const double af = s.yarn_mscale && s.yarn_mscale_all_dim ? mscale(f, s.yarn_mscale) / mscale(f, s.yarn_mscale_all_dim)
                                                           : mscale(f, 1.0);
  return {inv, af};
}

// HF rotate_half RoPE of v [dim] at `pos`: cos/sin = cat(freqs, freqs), times the attention factor.
void rope_neox(double* v, std::size_t dim, const Vec& inv, double af, double pos) {
  const std::size_t half = dim / 2;
  Vec out(dim);
  for (std::size_t i = 0; i < dim; ++i) {
    const double ang = inv[i % half] * pos, c = std::cos(ang) * af, sn = std::sin(ang) * af;
    const double rot = i < half ? -v[i + half] : v[i - half];
    out[i] = v[i] * c + rot * sn;
  }
  std::copy(out.begin(), out.end(), v);
}

// apply_rotary_pos_emb_interleave: view(d/2, 2).transpose -> evens then odds, then rotate_half.
void rope_interleave(double* v, std::size_t dim, const Vec& inv, double af, double pos) {
  Vec p(dim);
  for (std::size_t i = 0; i < dim / 2; ++i) p[i] = v[2 * i], p[dim / 2 + i] = v[2 * i + 1];
  rope_neox(p.data(), dim, inv, af, pos);
  std::copy(p.begin(), p.end(), v);
}

// Ernie 4.5's apply_rotary_pos_emb: cos/sin[..., :d/2].repeat_interleave(2) with GLM's
// rotate_half (x[0::2], x[1::2] -> stack(-x2, x1).flatten).
void rope_ernie(double* v, std::size_t dim, const Vec& inv, double pos) {
  Vec out(dim);
  for (std::size_t i = 0; i < dim; ++i) {
    const double ang = inv[i / 2] * pos;
    const double rot = i % 2 == 0 ? -v[i + 1] : v[i - 1];
    out[i] = v[i] * std::cos(ang) + rot * std::sin(ang);
  }
  std::copy(out.begin(), out.end(), v);
}

// eager_attention_forward, causal: q [T, H, dq], k [T, H, dq], v [T, H, dv] -> [T, H * dv].
Vec attend(const Vec& q, const Vec& k, const Vec& v, std::size_t T, std::size_t H, std::size_t dq, std::size_t dv,
           double scale) {
  Vec out(T * H * dv, 0.0);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t h = 0; h < H; ++h) {
      Vec p(t + 1);
      double mx = -1e300, sum = 0;
      for (std::size_t j = 0; j <= t; ++j) {
        double d = 0;
        for (std::size_t e = 0; e < dq; ++e) d += q[(t * H + h) * dq + e] * k[(j * H + h) * dq + e];
        mx = std::max(mx, p[j] = d * scale);
      }
      for (double& x : p) sum += x = std::exp(x - mx);
      for (std::size_t j = 0; j <= t; ++j)
        for (std::size_t e = 0; e < dv; ++e) out[(t * H + h) * dv + e] += p[j] / sum * v[(j * H + h) * dv + e];
    }
  return out;
}

Vec deepseek_attention(const Weights& w, const engine::RandomCheckpointSpec& s, const std::string& a, const Vec& x,
                       std::size_t T) {
  const std::size_t Hd = std::size_t(s.hidden_size), H = std::size_t(s.num_heads), N = std::size_t(s.qk_nope_head_dim);
  const std::size_t R = std::size_t(s.qk_rope_head_dim), V = std::size_t(s.v_head_dim), C = std::size_t(s.kv_lora_rank);
  const std::size_t Q = N + R;
  const Vec* no = nullptr;
  Vec q;
  if (s.q_lora_rank > 0) {
    const std::size_t L = std::size_t(s.q_lora_rank);
    const Vec qa = linear(x, T, w(a + "q_a_proj.weight"), L, Hd, s.attention_bias ? &w(a + "q_a_proj.bias") : no);
    q = linear(rms(qa, L, w(a + "q_a_layernorm.weight"), 1e-6), T, w(a + "q_b_proj.weight"), H * Q, L);
  } else {
    q = linear(x, T, w(a + "q_proj.weight"), H * Q, Hd);
  }
  const Vec ckv = linear(x, T, w(a + "kv_a_proj_with_mqa.weight"), C + R, Hd,
                         s.attention_bias ? &w(a + "kv_a_proj_with_mqa.bias") : no);
  Vec latent(T * C), k_rot(T * R);
  for (std::size_t t = 0; t < T; ++t) {
    std::copy_n(&ckv[t * (C + R)], C, &latent[t * C]);
    std::copy_n(&ckv[t * (C + R) + C], R, &k_rot[t * R]);
  }
  const Vec kvb =
      linear(rms(latent, C, w(a + "kv_a_layernorm.weight"), 1e-6), T, w(a + "kv_b_proj.weight"), H * (N + V), C);
  const auto [inv, af] = rope_freqs(s, R);
  Vec query(T * H * Q), key(T * H * Q), value(T * H * V);
  for (std::size_t t = 0; t < T; ++t) {
    double* kr = &k_rot[t * R];
    s.rope_interleave ? rope_interleave(kr, R, inv, af, double(t)) : rope_neox(kr, R, inv, af, double(t));
    for (std::size_t h = 0; h < H; ++h) {
      double* qh = &query[(t * H + h) * Q];
      std::copy_n(&q[(t * H + h) * Q], Q, qh);  // [q_pass | q_rot]
      s.rope_interleave ? rope_interleave(qh + N, R, inv, af, double(t)) : rope_neox(qh + N, R, inv, af, double(t));
      std::copy_n(&kvb[(t * H + h) * (N + V)], N, &key[(t * H + h) * Q]);
      std::copy_n(kr, R, &key[(t * H + h) * Q + N]);
      std::copy_n(&kvb[(t * H + h) * (N + V) + N], V, &value[(t * H + h) * V]);
    }
  }
  double scale = 1.0 / std::sqrt(double(Q));
  if (s.yarn_factor > 0 && s.yarn_mscale_all_dim) scale *= std::pow(mscale(s.yarn_factor, s.yarn_mscale_all_dim), 2);
  const Vec o = attend(query, key, value, T, H, Q, V, scale);
  return linear(o, T, w(a + "o_proj.weight"), Hd, H * V, s.attention_bias ? &w(a + "o_proj.bias") : no);
}

// Glm4MoeAttention (partial RoPE, q/k norms when use_qk_norm, no o_proj bias), Dots1Attention
// (Qwen3Attention: full RoPE, q/k norms always, every projection biased per attention_bias),
// Ernie4_5_MoeAttention (Llama's, interleaved RoPE, no biases: use_bias false) or MiniMaxM2Attention
// (OLMo 2's: q_norm / k_norm over the whole projections, partial RoPE, no biases) or
// HunYuanMoEV1Attention (RoPE, then query_layernorm / key_layernorm per head; biases on all four).
Vec gqa_attention(const Weights& w, const engine::RandomCheckpointSpec& s, const std::string& a, const Vec& x,
                  std::size_t T) {
  const bool glm = s.family == ModelFamily::kGlm4Moe, ernie = s.family == ModelFamily::kErnie4_5Moe;
  const bool minimax = s.family == ModelFamily::kMinimaxM2, hunyuan = s.family == ModelFamily::kHunyuanV1Moe;
  const std::size_t Hd = std::size_t(s.hidden_size), H = std::size_t(s.num_heads), KV = std::size_t(s.num_kv_heads);
  const std::size_t D = std::size_t(s.head_dim);
  const std::size_t rot = glm || minimax ? std::size_t(double(D) * s.partial_rotary_factor) : D;
  const Vec* no = nullptr;
  const bool b = s.attention_bias;
  const double eps = glm || hunyuan ? 1e-5 : 1e-6;
  Vec q = linear(x, T, w(a + "q_proj.weight"), H * D, Hd, b ? &w(a + "q_proj.bias") : no);
  Vec k = linear(x, T, w(a + "k_proj.weight"), KV * D, Hd, b ? &w(a + "k_proj.bias") : no);
  const Vec v = linear(x, T, w(a + "v_proj.weight"), KV * D, Hd, b ? &w(a + "v_proj.bias") : no);
  if (minimax) {  // q_norm(q_proj(x)) before the heads are split
    q = rms(q, H * D, w(a + "q_norm.weight"), eps);
    k = rms(k, KV * D, w(a + "k_norm.weight"), eps);
  } else if (s.use_qk_norm || (!glm && !ernie && !hunyuan)) {
    q = rms(q, D, w(a + "q_norm.weight"), eps);
    k = rms(k, D, w(a + "k_norm.weight"), eps);
  }
  const auto [inv, af] = rope_freqs(s, rot);
  // repeat_kv: query head h reads kv head h / (H / KV).
  Vec kx(T * H * D), vx(T * H * D);
  for (std::size_t t = 0; t < T; ++t) {
    const auto rope = [&](double* v) {
      ernie ? rope_ernie(v, rot, inv, double(t)) : rope_neox(v, rot, inv, af, double(t));
    };
    for (std::size_t h = 0; h < KV; ++h) rope(&k[(t * KV + h) * D]);
    for (std::size_t h = 0; h < H; ++h) {
      rope(&q[(t * H + h) * D]);
      std::copy_n(&k[(t * KV + h / (H / KV)) * D], D, &kx[(t * H + h) * D]);
      std::copy_n(&v[(t * KV + h / (H / KV)) * D], D, &vx[(t * H + h) * D]);
    }
  }
  if (hunyuan) {  // the rotated q and k, normed (the keys as the cache holds them)
    q = rms(q, D, w(a + "query_layernorm.weight"), eps);
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t h = 0; h < KV; ++h) {
        const Vec kh(&k[(t * KV + h) * D], &k[(t * KV + h) * D] + D);
        const Vec n = rms(kh, D, w(a + "key_layernorm.weight"), eps);
        for (std::size_t j = 0; j < H / KV; ++j) std::copy_n(n.begin(), D, &kx[(t * H + h * (H / KV) + j) * D]);
      }
  }
  const Vec o = attend(q, kx, vx, T, H, D, D, 1.0 / std::sqrt(double(D)));
  return linear(o, T, w(a + "o_proj.weight"), Hd, H * D, !glm && !ernie && !minimax && b ? &w(a + "o_proj.bias") : no);
}

// down(silu(gate x) * up x) for one token; gate/up rows from `gu` at row0 (fused halves) or apart.
Vec swiglu(const Vec& x, const Vec& gate, const Vec& up, const Vec& down, std::size_t Hd, std::size_t I,
           std::size_t gate_row0 = 0, std::size_t up_row0 = 0, std::size_t down_row0 = 0) {
  const Vec g = linear(x, 1, gate, I, Hd, nullptr, gate_row0), u = linear(x, 1, up, I, Hd, nullptr, up_row0);
  Vec hmid(I);
  for (std::size_t i = 0; i < I; ++i) hmid[i] = g[i] * sigmoid(g[i]) * u[i];
  return linear(hmid, 1, down, Hd, I, nullptr, down_row0);
}

// DeepseekV3MoE / Glm4MoeMoE.forward for T tokens.
Vec moe(const Weights& w, const engine::RandomCheckpointSpec& s, const std::string& m, const Vec& x, std::size_t T) {
  const std::size_t Hd = std::size_t(s.hidden_size), E = std::size_t(s.num_experts), K = std::size_t(s.top_k);
  const std::size_t I = std::size_t(s.moe_intermediate_size), G = std::size_t(s.n_group), per = E / G;
  const Vec logits = linear(x, T, w(m + "gate.weight"), E, Hd);
  const Vec& bias = w(m + "gate.e_score_correction_bias");
  Vec out(T * Hd, 0.0);
  for (std::size_t t = 0; t < T; ++t) {
    Vec sc(E), ch(E), gs(G);
    for (std::size_t e = 0; e < E; ++e) ch[e] = (sc[e] = sigmoid(logits[t * E + e])) + bias[e];
    for (std::size_t g = 0; g < G; ++g) {
      Vec grp(ch.begin() + long(g * per), ch.begin() + long((g + 1) * per));
      std::sort(grp.rbegin(), grp.rend());
      gs[g] = grp[0] + grp[1];
    }
    std::vector<std::size_t> order(G);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return gs[a] > gs[b]; });
    std::vector<bool> keep(G, false);
    for (std::size_t i = 0; i < std::size_t(s.topk_group); ++i) keep[order[i]] = true;
    for (std::size_t e = 0; e < E; ++e)
      if (!keep[e / per]) ch[e] = 0.0;  // masked_fill(~mask, 0.0)
    std::vector<std::size_t> top(E);
    std::iota(top.begin(), top.end(), 0);
    std::stable_sort(top.begin(), top.end(), [&](std::size_t a, std::size_t b) { return ch[a] > ch[b]; });
    double denom = 1e-20;
    for (std::size_t k = 0; k < K; ++k) denom += sc[top[k]];
    const Vec xt(x.begin() + long(t * Hd), x.begin() + long((t + 1) * Hd));
    for (std::size_t k = 0; k < K; ++k) {
      const std::size_t e = top[k];
      const double wk = (s.norm_topk_prob ? sc[e] / denom : sc[e]) * s.routed_scaling_factor;
      Vec y;
      if (w.has(m + "experts.gate_up_proj")) {
        const Vec& gu = w(m + "experts.gate_up_proj");
        y = swiglu(xt, gu, gu, w(m + "experts.down_proj"), Hd, I, e * 2 * I, e * 2 * I + I, e * Hd);
      } else {
        const std::string p = m + "experts." + std::to_string(e) + ".";
        y = swiglu(xt, w(p + "gate_proj.weight"), w(p + "up_proj.weight"), w(p + "down_proj.weight"), Hd, I);
      }
      for (std::size_t d = 0; d < Hd; ++d) out[t * Hd + d] += wk * y[d];
    }
    const std::size_t S = std::size_t(s.n_shared_experts) * I;
    const std::string p = m + "shared_experts.";
    const Vec y = swiglu(xt, w(p + "gate_proj.weight"), w(p + "up_proj.weight"), w(p + "down_proj.weight"), Hd, S);
    for (std::size_t d = 0; d < Hd; ++d) out[t * Hd + d] += y[d];
  }
  return out;
}

// Ernie4_5_MoeSparseMoeBlock: softmax scores, the choice by score + moe_statics' bias, the chosen
// scores over their sum (clamped at moe_norm_min), plus the shared experts.
Vec ernie_moe(const Weights& w, const engine::RandomCheckpointSpec& s, const std::string& m, const Vec& x,
              std::size_t T) {
  const std::size_t Hd = std::size_t(s.hidden_size), E = std::size_t(s.num_experts), K = std::size_t(s.top_k);
  const std::size_t I = std::size_t(s.moe_intermediate_size);
  const Vec logits = linear(x, T, w(m + "gate.weight"), E, Hd);
  const Vec& bias = w(m + "moe_statics.e_score_correction_bias");  // [1, E]
  Vec out(T * Hd, 0.0);
  for (std::size_t t = 0; t < T; ++t) {
    Vec sc(E), ch(E);
    double mx = -1e300, sum = 0;
    for (std::size_t e = 0; e < E; ++e) mx = std::max(mx, logits[t * E + e]);
    for (std::size_t e = 0; e < E; ++e) sum += sc[e] = std::exp(logits[t * E + e] - mx);
    for (std::size_t e = 0; e < E; ++e) ch[e] = (sc[e] /= sum) + bias[e];
    std::vector<std::size_t> top(E);
    std::iota(top.begin(), top.end(), 0);
    std::stable_sort(top.begin(), top.end(), [&](std::size_t a, std::size_t b) { return ch[a] > ch[b]; });
    double picked = 0;
    for (std::size_t k = 0; k < K; ++k) picked += sc[top[k]];
    picked = std::max(picked, 1e-12);
    const Vec xt(x.begin() + long(t * Hd), x.begin() + long((t + 1) * Hd));
    for (std::size_t k = 0; k < K; ++k) {
      const std::size_t e = top[k];
      Vec y;
      if (w.has(m + "experts.gate_up_proj")) {
        const Vec& gu = w(m + "experts.gate_up_proj");
        y = swiglu(xt, gu, gu, w(m + "experts.down_proj"), Hd, I, e * 2 * I, e * 2 * I + I, e * Hd);
      } else {
        const std::string p = m + "experts." + std::to_string(e) + ".";
        y = swiglu(xt, w(p + "gate_proj.weight"), w(p + "up_proj.weight"), w(p + "down_proj.weight"), Hd, I);
      }
      for (std::size_t d = 0; d < Hd; ++d) out[t * Hd + d] += sc[e] / picked * y[d];
    }
    const std::string p = m + "shared_experts.";
    const Vec y = swiglu(xt, w(p + "gate_proj.weight"), w(p + "up_proj.weight"), w(p + "down_proj.weight"), Hd,
                         std::size_t(s.n_shared_experts) * I);
    for (std::size_t d = 0; d < Hd; ++d) out[t * Hd + d] += y[d];
  }
  return out;
}

// Per-expert tensor names of a routed expert (gate, up, down) under experts.N.
struct ExpertNames {
  const char* gate;
  const char* up;
  const char* down;
};

// The K experts with the highest `choice` (ties to the lower index) on one token xt, each output
// weighted by its score over the chosen scores' sum, added into out_t; the experts per expert under
// `names` or HF 5.x's fused tensors.
void add_top_k_experts(const Weights& w, const std::string& m, const ExpertNames& names, const Vec& xt,
                       const Vec& score, const Vec& choice, std::size_t K, std::size_t I, double* out_t) {
  const std::size_t E = score.size(), Hd = xt.size();
  std::vector<std::size_t> top(E);
  std::iota(top.begin(), top.end(), 0);
  std::stable_sort(top.begin(), top.end(), [&](std::size_t a, std::size_t b) { return choice[a] > choice[b]; });
  double picked = 0;
  for (std::size_t k = 0; k < K; ++k) picked += score[top[k]];
  for (std::size_t k = 0; k < K; ++k) {
    const std::size_t e = top[k];
    Vec y;
    if (w.has(m + "experts.gate_up_proj")) {
      const Vec& gu = w(m + "experts.gate_up_proj");
      y = swiglu(xt, gu, gu, w(m + "experts.down_proj"), Hd, I, e * 2 * I, e * 2 * I + I, e * Hd);
    } else {
      const std::string p = m + "experts." + std::to_string(e) + ".";
      y = swiglu(xt, w(p + names.gate), w(p + names.up), w(p + names.down), Hd, I);
    }
    for (std::size_t d = 0; d < Hd; ++d) out_t[d] += score[e] / picked * y[d];
  }
}

// MiniMaxM2SparseMoeBlock: sigmoid scores, the choice by score + e_score_correction_bias, the chosen
// scores over their sum; Mixtral's experts (w1 gate, w3 up, w2 down) or HF 5.x's fused ones.
Vec minimax_moe(const Weights& w, const engine::RandomCheckpointSpec& s, const std::string& layer, const Vec& x,
                std::size_t T) {
  const std::size_t Hd = std::size_t(s.hidden_size), E = std::size_t(s.num_experts), K = std::size_t(s.top_k);
  const std::size_t I = std::size_t(s.moe_intermediate_size);
  const std::string m = layer + (w.has(layer + "block_sparse_moe.gate.weight") ? "block_sparse_moe." : "mlp.");
  const Vec logits = linear(x, T, w(m + "gate.weight"), E, Hd);
  const Vec& bias = w(m + "e_score_correction_bias");
  Vec out(T * Hd, 0.0);
  for (std::size_t t = 0; t < T; ++t) {
    Vec sc(E), ch(E);
    for (std::size_t e = 0; e < E; ++e) ch[e] = (sc[e] = sigmoid(logits[t * E + e])) + bias[e];
    const Vec xt(x.begin() + long(t * Hd), x.begin() + long((t + 1) * Hd));
    add_top_k_experts(w, m, {"w1.weight", "w3.weight", "w2.weight"}, xt, sc, ch, K, I, &out[t * Hd]);
  }
  return out;
}

// HunYuanMoEV1Moe: softmax over every expert, the top-k over their sum, plus the shared MLP (as wide
// as the experts) added as it is; the router is gate.wg.
Vec hunyuan_moe(const Weights& w, const engine::RandomCheckpointSpec& s, const std::string& m, const Vec& x,
                std::size_t T) {
  const std::size_t Hd = std::size_t(s.hidden_size), E = std::size_t(s.num_experts), K = std::size_t(s.top_k);
  const std::size_t I = std::size_t(s.moe_intermediate_size);
  const Vec logits = linear(x, T, w(m + "gate.wg.weight"), E, Hd);
  Vec out(T * Hd, 0.0);
  for (std::size_t t = 0; t < T; ++t) {
    Vec sc(E);
    double mx = -1e300, sum = 0;
    for (std::size_t e = 0; e < E; ++e) mx = std::max(mx, logits[t * E + e]);
    for (std::size_t e = 0; e < E; ++e) sum += sc[e] = std::exp(logits[t * E + e] - mx);
    for (double& v : sc) v /= sum;
    const Vec xt(x.begin() + long(t * Hd), x.begin() + long((t + 1) * Hd));
    add_top_k_experts(w, m, {"gate_proj.weight", "up_proj.weight", "down_proj.weight"}, xt, sc, sc, K, I, &out[t * Hd]);
    const std::string p = m + "shared_mlp.";
    const Vec y = swiglu(xt, w(p + "gate_proj.weight"), w(p + "up_proj.weight"), w(p + "down_proj.weight"), Hd, I);
    for (std::size_t d = 0; d < Hd; ++d) out[t * Hd + d] += y[d];
  }
  return out;
}

// Which layers are MoE: Ernie4_5_MoeDecoderLayer's interval and [start, end], else first_k_dense_replace.
bool moe_layer(const engine::RandomCheckpointSpec& s, int64_t i) {
  if (s.family == ModelFamily::kMinimaxM2 || s.family == ModelFamily::kHunyuanV1Moe) return true;
  if (s.family != ModelFamily::kErnie4_5Moe) return i >= s.first_k_dense_replace;
  const int64_t end = s.moe_layer_end_index < 0 ? s.num_layers - 1 : s.moe_layer_end_index;
  return (i + 1) % s.decoder_sparse_step == 0 && i >= s.first_k_dense_replace && i <= end;
}

// The whole causal LM: logits [T, vocab].
Vec naive_forward(const engine::Checkpoint& c, const engine::RandomCheckpointSpec& s, const std::vector<int32_t>& ids) {
  Weights w(c);
  const std::size_t T = ids.size(), Hd = std::size_t(s.hidden_size), Vv = std::size_t(s.vocab_size);
  const bool ernie = s.family == ModelFamily::kErnie4_5Moe;
  const bool mla = s.family == ModelFamily::kDeepseekV3 || s.family == ModelFamily::kGlm4MoeLite;
  const double eps = s.family == ModelFamily::kGlm4Moe || s.family == ModelFamily::kGlm4MoeLite ||
                             s.family == ModelFamily::kHunyuanV1Moe || ernie
                         ? 1e-5
                         : 1e-6;
  const Vec& emb = w("model.embed_tokens.weight");
  Vec h(T * Hd);
  for (std::size_t t = 0; t < T; ++t) std::copy_n(&emb[std::size_t(ids[t]) * Hd], Hd, &h[t * Hd]);
  for (int64_t i = 0; i < s.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const Vec x = rms(h, Hd, w(p + "input_layernorm.weight"), eps);
    const Vec a = mla ? deepseek_attention(w, s, p + "self_attn.", x, T) : gqa_attention(w, s, p + "self_attn.", x, T);
    for (std::size_t j = 0; j < h.size(); ++j) h[j] += a[j];
    const Vec y = rms(h, Hd, w(p + "post_attention_layernorm.weight"), eps);
    Vec f;
    if (!moe_layer(s, i)) {
      const std::size_t I = std::size_t(s.intermediate_size);
      for (std::size_t t = 0; t < T; ++t) {
        const Vec yt(y.begin() + long(t * Hd), y.begin() + long((t + 1) * Hd));
        const Vec o = swiglu(yt, w(p + "mlp.gate_proj.weight"), w(p + "mlp.up_proj.weight"),
                             w(p + "mlp.down_proj.weight"), Hd, I);
        f.insert(f.end(), o.begin(), o.end());
      }
    } else {
      f = ernie                                    ? ernie_moe(w, s, p + "mlp.", y, T)
          : s.family == ModelFamily::kMinimaxM2    ? minimax_moe(w, s, p, y, T)
          : s.family == ModelFamily::kHunyuanV1Moe ? hunyuan_moe(w, s, p + "mlp.", y, T)
                                                   : moe(w, s, p + "mlp.", y, T);
    }
    for (std::size_t j = 0; j < h.size(); ++j) h[j] += f[j];
  }
  const Vec& head = s.tie_word_embeddings ? emb : w("lm_head.weight");
  return linear(rms(h, Hd, w("model.norm.weight"), eps), T, head, Vv, Hd);
}

struct Case {
  ModelFamily family;
  bool variant;  // tiny_spec's fused flag: deepseek_v3 without the q LoRA, glm4_moe without q/k norms,
                 // dots1 without biases, ernie4_5_moe untied, glm4_moe_lite with q_proj, NeoX rope
                 // dims and biases, hunyuan_v1_moe without biases; fused expert tensors
};

class SigmoidMoeFamilies : public ::testing::TestWithParam<Case> {};

TEST_P(SigmoidMoeFamilies, ReferenceBackendMatchesALineByLineTranscriptionOfHf) {
  TempDir dir;
  const engine::RandomCheckpointSpec spec = tiny_spec(GetParam().family, GetParam().variant);
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), spec).is_ok());
  engine::LoadOptions o;
  o.backend = engine::BackendKind::kReference;
  auto model = engine::load_model(dir.path(), o);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  // Past YaRN's original context (32) in deepseek_v3's spec.
  const std::vector<int32_t> ids = test_tokens(40, spec.vocab_size, 3);
  const std::size_t V = std::size_t(spec.vocab_size);
  std::vector<float> got(ids.size() * V);
  engine::SequenceState state = (*model)->new_state();
  ASSERT_TRUE((*model)->forward(state, ids, got.data(), engine::LogitsMode::kAll).is_ok());
  auto ckpt = engine::Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.is_ok());
  const Vec want = naive_forward(*ckpt, spec, ids);
  double worst = 0;
  for (std::size_t t = 0; t < ids.size(); ++t) {
    double num = 0, den = 0;
    for (std::size_t v = 0; v < V; ++v) {
      const double d = double(got[t * V + v]) - want[t * V + v];
      num += d * d;
      den += want[t * V + v] * want[t * V + v];
    }
    const double err = std::sqrt(num / den);
    worst = std::max(worst, err);
    EXPECT_LT(err, 1e-4) << "position " << t;
  }
  std::printf("[ %s%s ] worst logits rel L2 vs the transcription %.3g\n", engine::model_family_name(GetParam().family),
              GetParam().variant ? " (variant)" : "", worst);
}

INSTANTIATE_TEST_SUITE_P(Families, SigmoidMoeFamilies,
                         ::testing::Values(Case{ModelFamily::kDeepseekV3, false}, Case{ModelFamily::kDeepseekV3, true},
                                           Case{ModelFamily::kGlm4Moe, false}, Case{ModelFamily::kGlm4Moe, true},
                                           Case{ModelFamily::kDots1, false}, Case{ModelFamily::kDots1, true},
                                           Case{ModelFamily::kErnie4_5Moe, false},
                                           Case{ModelFamily::kErnie4_5Moe, true}, Case{ModelFamily::kMinimaxM2, false},
                                           Case{ModelFamily::kMinimaxM2, true}, Case{ModelFamily::kGlm4MoeLite, false},
                                           Case{ModelFamily::kGlm4MoeLite, true},
                                           Case{ModelFamily::kHunyuanV1Moe, false},
                                           Case{ModelFamily::kHunyuanV1Moe, true}),
                         [](const auto& info) {
                           return std::string(engine::model_family_name(info.param.family)) +
                                  (info.param.variant ? "_variant" : "");
                         });

}  // namespace
}  // namespace ft::test
