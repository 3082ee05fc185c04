// CPU reference ops for mixture-of-experts routing: router scores -> top-k experts and weights.
// The expert MLP itself is a SwiGLU made of ref::linear + ref::silu_mul (ops_dense.h); the bf16
// streaming kernels for it are in expert_kernels.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ft/engine/ops_dense.h"

namespace ft::engine::ref {

// How a routed expert's hidden activation h comes from its gate and up products g, u (their
// biases already added): silu(g) * u in every SwiGLU family; gelu_tanh(g) * u in Gemma 4's GeGLU
// experts; gpt-oss clamps both and gates with a scaled sigmoid: g' = min(g, limit), u' = clamp(u,
// -limit, limit), h = (u' + up_offset) * g' * sigmoid(alpha * g') (HF GptOssExperts._apply_gate:
// up_offset 1, alpha 1.702). DeepSeek-V4 clamps the same way around a plain SwiGLU: up_offset 0,
// alpha 1, so h = silu(g') * u' (swiglu_limit).
struct ExpertGlu {
  bool clamped = false;
  float alpha = 1.702f;
  float limit = 7.0f;
  float up_offset = 1.0f;
  bool gelu_tanh = false;  // GeGLU (not with clamped)
};
inline float expert_glu(const ExpertGlu& a, float g, float u) {
  if (a.gelu_tanh) return gelu_tanh(g) * u;
  if (!a.clamped) return g / (1.0f + std::exp(-g)) * u;
  g = std::min(g, a.limit);
  u = std::clamp(u, -a.limit, a.limit);
  return (u + a.up_offset) * (g / (1.0f + std::exp(-a.alpha * g)));
}

enum class RouterScoring {
  kSoftmax,       // Qwen, Mixtral: probabilities over all experts, then top-k
  kSigmoid,       // DeepSeek-V3 style: independent sigmoid scores, then top-k
  kSqrtSoftplus,  // DeepSeek-V4: independent sqrt(softplus(logit)) scores, then top-k
};

// DeepSeek-V4's router score: sqrt(softplus(x)) with torch's softplus (beta 1, threshold 20: x
// itself above 20, log1p(exp(x)) below).
inline float sqrt_softplus(float x) { return std::sqrt(x > 20.0f ? x : std::log1p(std::exp(x))); }

struct RouterSpec {
  std::size_t num_experts = 0;
  std::size_t top_k = 0;
  RouterScoring scoring = RouterScoring::kSoftmax;
  bool renormalize = true;     // divide the k selected scores by their sum (HF norm_topk_prob)
  float scaling = 1.0f;        // multiply the final weights (routed_scaling_factor)
  // DeepSeek-V3's selection (also GLM-4.5's): experts are chosen by score + correction_bias[e]
  // (e_score_correction_bias; null: + 0) among the topk_group best of n_group equal groups of
  // consecutive experts, a group scored by the sum of its two best; the weights stay the plain
  // scores. n_group 1 and no bias: the plain top-k.
  std::size_t n_group = 1;
  std::size_t topk_group = 1;
  const float* correction_bias = nullptr;  // [num_experts], in the backend's memory
  // Gemma 4: each chosen expert's final weight times its own learned scale (per_expert_scale).
  const float* per_expert_scale = nullptr;  // [num_experts], in the backend's memory; null: 1
  bool grouped() const { return n_group > 1 || correction_bias != nullptr; }
};

// logits [T, num_experts] -> experts [T, top_k] (by descending score; ties to the lower index, as
// torch.topk on CPU does) and weights [T, top_k]. With grouped(), HF's get_topk_indices: the
// experts of unselected groups compete with a choice score of 0 (HF masked_fill(0.0), not -inf).
void route_top_k(const float* logits, std::size_t T, const RouterSpec& spec, int32_t* experts,
                 float* weights);
// The weights route_top_k gives `experts` [T, top_k] when they are the choice, whether or not they
// are: how a pass routed as another one did (Backend::set_forced_routing) weighs its experts.
void route_weights_for(const float* logits, std::size_t T, const RouterSpec& spec, const int32_t* experts,
                       float* weights);

}  // namespace ft::engine::ref
