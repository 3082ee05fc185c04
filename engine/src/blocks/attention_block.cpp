#include "blocks/attention_block.h"

#include <cmath>

#include "ft/engine/ops.h"
#include "ft/engine/ops_dense.h"

namespace ft::engine::blocks {

Result<AttentionBlock> AttentionBlock::load(const WeightLoader& w, const std::string& prefix,
                                            const AttentionSpec& spec) {
  AttentionBlock b;
  b.spec_ = spec;
  const int64_t q_out = spec.heads * spec.head_dim * (spec.gated ? 2 : 1);
  const int64_t kv_out = spec.kv_heads * spec.head_dim;
  FT_ASSIGN_OR_RETURN(b.q_proj_, w.linear(prefix + "q_proj", q_out, spec.hidden, spec.bias));
  FT_ASSIGN_OR_RETURN(b.k_proj_, w.linear(prefix + "k_proj", kv_out, spec.hidden, spec.bias));
  FT_ASSIGN_OR_RETURN(b.v_proj_, w.linear(prefix + "v_proj", kv_out, spec.hidden, spec.bias));
  FT_ASSIGN_OR_RETURN(b.o_proj_, w.linear(prefix + "o_proj", spec.hidden, spec.heads * spec.head_dim, spec.bias));
  if (spec.qk_norm) {
    FT_ASSIGN_OR_RETURN(b.q_norm_, w.tensor(prefix + "q_norm.weight", {spec.head_dim}));
    FT_ASSIGN_OR_RETURN(b.k_norm_, w.tensor(prefix + "k_norm.weight", {spec.head_dim}));
  }
  b.inv_freq_ = ref::rope_inv_freq(spec.rope);
  return b;
}

void AttentionBlock::forward(const float* x, std::size_t T, KvCache& cache, float* out) const {
  const std::size_t H = std::size_t(spec_.heads), KV = std::size_t(spec_.kv_heads), D = std::size_t(spec_.head_dim);
  const std::size_t pos0 = std::size_t(cache.tokens());

  std::vector<float> q(T * H * D), gate, k(T * KV * D), v(T * KV * D);
  if (spec_.gated) {
    std::vector<float> qg(T * H * D * 2);
    q_proj_.forward(x, qg.data(), T);
    gate.resize(T * H * D);
    ref::split_gated_query(qg.data(), T, H, D, q.data(), gate.data());
  } else {
    q_proj_.forward(x, q.data(), T);
  }
  k_proj_.forward(x, k.data(), T);
  v_proj_.forward(x, v.data(), T);

  // Per-head RMSNorm on q and k (before RoPE, as HF does).
  if (spec_.qk_norm) {
    ref::rms_norm(q.data(), q_norm_.data(), q.data(), T * H, D, spec_.eps, spec_.zero_centered_qk_norm);
    ref::rms_norm(k.data(), k_norm_.data(), k.data(), T * KV, D, spec_.eps, spec_.zero_centered_qk_norm);
  }
  ref::apply_rope(q.data(), T, H, spec_.rope, inv_freq_, int64_t(pos0));
  ref::apply_rope(k.data(), T, KV, spec_.rope, inv_freq_, int64_t(pos0));

  cache.kv_heads = spec_.kv_heads;
  cache.head_dim = spec_.head_dim;
  cache.k.insert(cache.k.end(), k.begin(), k.end());
  cache.v.insert(cache.v.end(), v.begin(), v.end());

  std::vector<float> attn(T * H * D);
  const float scale = 1.0f / std::sqrt(float(D));
  ref::causal_attention(q.data(), cache.k.data(), cache.v.data(), attn.data(), T, pos0, H, KV, D, scale);
  if (spec_.gated) ref::mul_sigmoid(attn.data(), gate.data(), attn.size());
  o_proj_.forward(attn.data(), out, T);
}

}  // namespace ft::engine::blocks
