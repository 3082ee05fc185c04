// Softmax self-attention with RoPE, GQA, an optional q/k RMSNorm (per head, or over all heads at
// once; before RoPE, or after it as Hunyuan's) and an optional output gate: the full-attention token
// mixer of every family — Qwen3-MoE (per-head norm), Qwen3-Next / Qwen3.5 (gated query), Mixtral and
// Qwen2-MoE (no norm), OLMoE (whole-width norm), Hunyuan (per-head norm of the rotated q and k),
// AFMoE (per-head norm, an output gate of its own projection), Llama 4 (unweighted norms of the
// rotated q and k, chunked layers, a temperature on the others' queries), Gemma 4 (per-head
// norms of q, k and v, unscaled scores, keys that are also the values on its full layers). Its
// K and V go to layer `kv_layer` of each sequence's KV pages.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "blocks/weights.h"
#include "ft/engine/ops_attention.h"

namespace ft::engine::blocks {

struct AttentionSpec {
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  bool qkv_bias = false;               // q/k/v carry biases (attention_bias, Qwen2's qkv_bias)
  bool o_bias = false;                 // o_proj carries one (attention_bias)
  bool gated = false;                  // q_proj also writes a sigmoid output gate per head
  bool gate_proj = false;              // the output gate has its own projection, gate_proj (AFMoE)
  bool qk_norm = true;                 // q_norm / k_norm
  // true: over each head's head_dim (Qwen3); false: over the whole projection, heads * head_dim
  // for q and kv_heads * head_dim for k (OLMoE).
  bool qk_norm_per_head = true;
  bool zero_centered_qk_norm = false;  // those norms use (1 + w)
  // The norms take the rotated q and k (HunYuanMoEV1Attention's query_layernorm / key_layernorm);
  // per head only.
  bool qk_norm_after_rope = false;
  std::string q_norm_name = "q_norm.weight", k_norm_name = "k_norm.weight";
  float eps = 1e-6f;
  ref::RopeSpec rope;
  int64_t window = 0;  // > 0: sliding-window attention (HF sliding_window on a sliding_attention layer)
  int64_t chunk = 0;   // > 0: chunked attention (Llama 4's chunked_attention layers)
  bool sinks = false;  // a learned sink logit per head, `sinks` [heads] (gpt-oss)
  // The q/k norms have no weight (Llama 4's L2Norm: x * rsqrt(mean(x^2) + eps)); with
  // qk_norm_after_rope.
  bool qk_norm_unweighted = false;
  // Llama 4's attention temperature on layers without RoPE: each query row times
  // ref::attention_temperature_at(position, floor_scale, attn_scale). floor_scale 0: off.
  float temperature_floor_scale = 0, temperature_attn_scale = 0;
  float scale = 0;      // the scores' scale; 0: 1 / sqrt(head_dim) (Gemma 4: 1)
  bool v_norm = false;  // V is RMS-normed per head without a weight (Gemma 4's v_norm)
  // No v_proj: the values are k_proj's output before its norm and RoPE (Gemma 4's
  // attention_k_eq_v on full-attention layers).
  bool k_eq_v = false;
};

class AttentionBlock {
 public:
  // prefix: e.g. "layers.3.self_attn." (relative to the loader's prefix).
  static Result<AttentionBlock> load(const WeightLoader& w, const std::string& prefix, const AttentionSpec& spec);

  // x [T, hidden] (already normed), rows grouped by sequence as `seqs` says; row t sits at
  // positions[t]. Writes each sequence's K/V into its pages and out [T, hidden].
  void forward(Backend& be, const KvLayout& kv, const float* x, std::size_t T, std::span<const AttentionSeq> seqs,
               const int64_t* positions, float* out) const;

  const AttentionSpec& spec() const { return spec_; }
  int64_t kv_layer() const { return kv_layer_; }
  void set_kv_layer(int64_t layer) { kv_layer_ = layer; }

 private:
  AttentionSpec spec_;
  int64_t kv_layer_ = 0;
  Linear q_proj_, k_proj_, v_proj_, o_proj_, gate_proj_;
  Vector q_norm_, k_norm_, v_norm_;
  Vector sinks_;
  Vector inv_freq_;
};

}  // namespace ft::engine::blocks
