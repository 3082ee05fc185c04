#include "blocks/attention_block.h"

#include <cmath>

namespace ft::engine::blocks {

Result<AttentionBlock> AttentionBlock::load(const WeightLoader& w, const std::string& prefix,
                                            const AttentionSpec& spec) {
  AttentionBlock b;
  b.spec_ = spec;
  const int64_t q_out = spec.heads * spec.head_dim * (spec.gated ? 2 : 1);
  const int64_t kv_out = spec.kv_heads * spec.head_dim;
  FT_ASSIGN_OR_RETURN(b.q_proj_, w.linear(prefix + "q_proj", q_out, spec.hidden, spec.qkv_bias));
  FT_ASSIGN_OR_RETURN(b.k_proj_, w.linear(prefix + "k_proj", kv_out, spec.hidden, spec.qkv_bias));
  if (!spec.k_eq_v) {
    FT_ASSIGN_OR_RETURN(b.v_proj_, w.linear(prefix + "v_proj", kv_out, spec.hidden, spec.qkv_bias));
  }
  if (spec.v_norm) {
    FT_ASSIGN_OR_RETURN(b.v_norm_, w.place(std::vector<float>(std::size_t(spec.head_dim), 1.0f)));
  }
  FT_ASSIGN_OR_RETURN(b.o_proj_, w.linear(prefix + "o_proj", spec.hidden, spec.heads * spec.head_dim, spec.o_bias));
  if (spec.gated && spec.gate_proj)
    return invalid_argument("attention: an output gate from q_proj or gate_proj, not both");
  if (spec.k_eq_v && spec.gate_proj) return invalid_argument("attention: k_eq_v has no output gate projection");
  if (spec.gate_proj) {
    FT_ASSIGN_OR_RETURN(b.gate_proj_, w.linear(prefix + "gate_proj", spec.heads * spec.head_dim, spec.hidden, false));
  }
  if (spec.qk_norm && spec.qk_norm_unweighted) {
    if (!spec.qk_norm_per_head || !spec.qk_norm_after_rope) {
      return invalid_argument("attention: unweighted q/k norms are per head, after RoPE");
    }
    FT_ASSIGN_OR_RETURN(b.q_norm_, w.place(std::vector<float>(std::size_t(spec.head_dim), 1.0f)));
    FT_ASSIGN_OR_RETURN(b.k_norm_, w.place(std::vector<float>(std::size_t(spec.head_dim), 1.0f)));
  } else if (spec.qk_norm) {
    const int64_t q_width = spec.qk_norm_per_head ? spec.head_dim : spec.heads * spec.head_dim;
    const int64_t k_width = spec.qk_norm_per_head ? spec.head_dim : kv_out;
    FT_ASSIGN_OR_RETURN(b.q_norm_, w.vector(prefix + spec.q_norm_name, {q_width}));
    FT_ASSIGN_OR_RETURN(b.k_norm_, w.vector(prefix + spec.k_norm_name, {k_width}));
  }
  if (spec.sinks) {
    FT_ASSIGN_OR_RETURN(b.sinks_, w.vector(prefix + "sinks", {spec.heads}));
  }
  FT_ASSIGN_OR_RETURN(b.inv_freq_, w.place(ref::rope_inv_freq(spec.rope)));
  return b;
}

void AttentionBlock::forward(Backend& be, const KvLayout& kv, const float* x, std::size_t T,
                             std::span<const AttentionSeq> seqs, const int64_t* positions, float* out) const {
  const std::size_t H = std::size_t(spec_.heads), KV = std::size_t(spec_.kv_heads), D = std::size_t(spec_.head_dim);
  Scratch& s = be.scratch();
  Scratch::Frame frame(s);
  float* q = s.floats(T * H * D);
  float* k = s.floats(T * KV * D);
  float* v = s.floats(T * KV * D);
  float* gate = nullptr;
  float* qg = spec_.gated ? s.floats(T * H * D * 2) : q;
  if (spec_.gate_proj) gate = s.floats(T * H * D);
  const Backend::LinearOut qkv[] = {{&q_proj_.weight, q_proj_.bias_or_null(), qg},
                                    {&k_proj_.weight, k_proj_.bias_or_null(), k},
                                    {&v_proj_.weight, v_proj_.bias_or_null(), v},
                                    {&gate_proj_.weight, nullptr, gate}};
  if (spec_.k_eq_v) {
    be.linears(x, T, std::span(qkv, 2));
    be.copy_columns(k, KV * D, 1, v, KV * D, T, KV * D);
  } else {
    be.linears(x, T, std::span(qkv, spec_.gate_proj ? 4 : 3));
  }
  if (spec_.v_norm) be.rms_norm(v, v_norm_.data(), v, T * KV, D, spec_.eps, false);
  if (spec_.gated) {
    gate = s.floats(T * H * D);
    be.split_gated_query(qg, T, H, D, q, gate);
  }

  if (spec_.qk_norm && spec_.qk_norm_after_rope) {
    // RoPE, then each head's RMSNorm of the rotated q and k, and K/V into the pages (the ops
    // attention_inputs fuses, in the other order).
    be.rope(q, T, H, spec_.rope, inv_freq_.data(), positions);
    be.rope(k, T, KV, spec_.rope, inv_freq_.data(), positions);
    be.rms_norm(q, q_norm_.data(), q, T * H, D, spec_.eps, spec_.zero_centered_qk_norm);
    be.rms_norm(k, k_norm_.data(), k, T * KV, D, spec_.eps, spec_.zero_centered_qk_norm);
    be.kv_write(kv, kv_layer_, k, v, seqs);
  } else {
    // RMSNorm on q and k (before RoPE, as HF does), RoPE, and K/V into the pages.
    const Backend::QkNorm norm{q_norm_.data(), k_norm_.data(), spec_.eps, spec_.zero_centered_qk_norm,
                               spec_.qk_norm_per_head};
    be.attention_inputs(kv, kv_layer_, q, k, v, T, H, spec_.qk_norm ? &norm : nullptr, spec_.rope, inv_freq_.data(),
                        positions, seqs);
  }
  if (spec_.temperature_floor_scale > 0) {
    be.attention_temperature(q, T, H * D, positions, spec_.temperature_floor_scale, spec_.temperature_attn_scale);
  }
  float* attn = s.floats(T * H * D);
  be.attention(kv, kv_layer_, q, H, spec_.scale > 0 ? spec_.scale : 1.0f / std::sqrt(float(D)), seqs, attn,
               AttentionOptions{spec_.window, spec_.sinks ? sinks_.data() : nullptr, spec_.chunk});
  if (gate) be.mul_sigmoid(attn, gate, T * H * D);
  o_proj_.forward(be, attn, out, T);
}

}  // namespace ft::engine::blocks
