// CPU reference ops for softmax attention: rotary position embedding (NeoX and GPT-J layouts, full
// or partial), the gated-query split of Qwen3-Next/3.5, and causal GQA attention over a KV cache.
// Layouts are token-major like the projections write them: x[t, head, dim].
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ft/engine/kv_pool.h"

namespace ft::engine::ref {

enum class RopeLayout {
  kNeox,  // HF rotate_half: dim i pairs with i + rotary_dim/2 (Llama, Qwen, most HF models)
  kGptj,  // interleaved: dim 2i pairs with 2i+1 (GPT-J, GLM, DeepSeek's "interleave" checkpoints)
};

// YaRN (rope_type "yarn", HF _compute_yarn_parameters): each frequency is blended between the
// plain one (extrapolation) and the one divided by `factor` (interpolation) by a linear ramp over
// the frequency pairs whose wavelengths lie between beta_fast and beta_slow rotations of the
// original context. factor 0: off (plain RoPE).
struct YarnSpec {
  double factor = 0;                             // rope "factor"
  double beta_fast = 32, beta_slow = 1;          // rotations at the ramp's ends (HF defaults)
  int64_t original_max_position_embeddings = 0;  // the pre-training context, in tokens
  bool truncate = true;                          // round the ramp's ends outwards (HF "truncate")
};

// Llama 3's frequency scaling (rope_type "llama3", HF _compute_llama3_parameters; Llama 4 Scout):
// wavelengths longer than original / low_freq_factor are divided by factor, shorter than original /
// high_freq_factor kept, the ones between blended. factor 0: off.
struct Llama3RopeSpec {
  double factor = 0;
  double low_freq_factor = 1, high_freq_factor = 4;
  int64_t original_max_position_embeddings = 8192;
};

struct RopeSpec {
  std::size_t head_dim = 0;
  std::size_t rotary_dim = 0;  // int(head_dim * partial_rotary_factor); the rest passes through
  double theta = 10000.0;      // rope_theta
  RopeLayout layout = RopeLayout::kNeox;
  YarnSpec yarn = {};
  Llama3RopeSpec llama3 = {};
  // > 0: proportional RoPE (Gemma 4's full-attention layers): rotary_dim is the whole head, and
  // only the first proportional_angles frequencies are 1 / theta^(2i / rotary_dim), the others 0
  // (their pairs pass through unrotated).
  std::size_t proportional_angles = 0;
  // cos and sin are multiplied by it (HF attention_scaling: YaRN's attention factor; 1 otherwise).
  float attention_factor = 1.0f;
};

// inv_freq[i] = 1 / theta^(2i / rotary_dim), i < rotary_dim/2, computed in fp32 as HF does; with
// spec.yarn.factor > 0 the YaRN blend of it (rope_yarn.cpp); 0 from proportional_angles on.
std::vector<float> rope_inv_freq(const RopeSpec& spec);
// YaRN's frequencies alone (what rope_inv_freq returns when spec.yarn.factor > 0).
std::vector<float> yarn_inv_freq(const RopeSpec& spec);
// HF's yarn_get_mscale: 0.1 * mscale * ln(scale) + 1 for scale > 1, else 1.
double yarn_mscale(double scale, double mscale = 1.0);
// HF's default YaRN attention factor when the config gives none: mscale(factor, mscale) /
// mscale(factor, mscale_all_dim) when both are set (non-zero), else mscale(factor).
double yarn_attention_factor(double factor, double mscale, double mscale_all_dim);

// Rotates the first rotary_dim dims of one head vector v in place by the angles whose cos and sin
// are given (rotary_dim / 2 of each): the rotation every RoPE path applies.
void rope_rotate(float* v, const float* cos, const float* sin, const RopeSpec& spec);

// Rotates the first rotary_dim dims of each head of x [T, heads, head_dim] in place; token t sits
// at position pos0 + t. inv_freq from rope_inv_freq(spec).
void apply_rope(float* x, std::size_t T, std::size_t heads, const RopeSpec& spec,
                const std::vector<float>& inv_freq, int64_t pos0);

// Qwen3-Next / Qwen3.5 full attention: q_proj writes, per head, [query (head_dim) | gate (head_dim)]
// (HF: q_proj(x).view(T, heads, 2*head_dim).chunk(2, dim=-1)). Splits qg [T, heads, 2*head_dim]
// into q [T, heads, head_dim] and gate [T, heads*head_dim].
void split_gated_query(const float* qg, std::size_t T, std::size_t heads, std::size_t head_dim,
                       float* q, float* gate);

}  // namespace ft::engine::ref

namespace ft::engine {

// What a layer's attention sees besides the causal mask:
//   window  > 0: sliding-window attention; the query at position p sees keys p - window + 1 .. p
//           (HF's sliding_window: kv_idx > q_idx - sliding_window). 0: every earlier key.
//   sinks   per query head, a logit that joins each row's softmax and takes its share of the
//           probability, but no value (gpt-oss: HF concatenates it to the scores, softmaxes and drops
//           it): out = sum_j e^(s_j - m) v_j / (sum_j e^(s_j - m) + e^(sink - m)). Backend memory;
//           null: none.
//   chunk   > 0: chunked attention (Llama 4's chunked_attention layers); the query at position p
//           sees keys p - p % chunk .. p, those of its own chunk (HF: q_idx // chunk == kv_idx // chunk).
// Each limit makes the first key a query sees a non-decreasing function of its position.
struct AttentionOptions {
  int64_t window = 0;
  const float* sinks = nullptr;
  int64_t chunk = 0;

  int64_t first_key(int64_t pos) const {
    if (window > 0) return pos - window + 1 > 0 ? pos - window + 1 : 0;
    if (chunk > 0) return pos - pos % chunk;
    return 0;
  }
  bool limited() const { return window > 0 || chunk > 0; }
};

}  // namespace ft::engine

namespace ft::engine::ref {

// Causal grouped-query attention of T new queries against a KV cache.
//   q   [T, heads, head_dim]; query t sits at position pos0 + t and sees cache positions <= its own
//       (and, with a window, > its own - window)
//   k,v [pos0 + T, kv_heads, head_dim] (the cache, new tokens already appended)
//   out [T, heads, head_dim]
// Query head h reads kv head h / (heads / kv_heads) (HF repeat_kv). softmax(q.k * scale) in fp32,
// with the head's sink where opt has sinks.
void causal_attention(const float* q, const float* k, const float* v, float* out, std::size_t T, std::size_t pos0,
                      std::size_t heads, std::size_t kv_heads, std::size_t head_dim, float scale,
                      const AttentionOptions& opt = {});

// ---- Paged KV (kv_pool.h) ----------------------------------------------------------------------

// Writes k, v [rows, kv_heads, head_dim] (fp32) for positions pos0 .. pos0 + rows - 1 into layer
// `layer` of `pages`, converting to the layout's dtype (bf16: round to nearest even).
void kv_write(const KvLayout& layout, int64_t layer, const float* k, const float* v, std::size_t rows, int64_t pos0,
              std::byte* const* pages);
// Reads positions [0, tokens) of layer `layer` back as fp32 k, v [tokens, kv_heads, head_dim]
// (the layout causal_attention takes).
void kv_gather(const KvLayout& layout, int64_t layer, int64_t tokens, std::byte* const* pages, float* k, float* v);

}  // namespace ft::engine::ref
