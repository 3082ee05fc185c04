#include "blocks/mla_attention_block.h"

#include <algorithm>

namespace ft::engine::blocks {
namespace {

// HF builds q_a_layernorm and kv_a_layernorm as DeepseekV3RMSNorm(dim): eps 1e-6 whatever the
// config's rms_norm_eps says.
constexpr float kLatentNormEps = 1e-6f;

}  // namespace

Result<MlaAttentionBlock> MlaAttentionBlock::load(const WeightLoader& w, const std::string& prefix,
                                                  const MlaSpec& spec) {
  MlaAttentionBlock b;
  b.spec_ = spec;
  const int64_t H = spec.heads, hidden = spec.hidden, C = spec.kv_lora_rank, R = spec.qk_rope_head_dim;
  const int64_t q_out = H * spec.qk_head_dim();
  if (spec.q_lora_rank > 0) {
    FT_ASSIGN_OR_RETURN(b.q_a_proj_, w.linear(prefix + "q_a_proj", spec.q_lora_rank, hidden, spec.bias));
    FT_ASSIGN_OR_RETURN(b.q_a_norm_, w.rms_norm(prefix + "q_a_layernorm.weight", spec.q_lora_rank, kLatentNormEps,
                                                /*zero_centered=*/false));
    FT_ASSIGN_OR_RETURN(b.q_b_proj_, w.linear(prefix + "q_b_proj", q_out, spec.q_lora_rank));
  } else {
    FT_ASSIGN_OR_RETURN(b.q_proj_, w.linear(prefix + "q_proj", q_out, hidden));
  }
  FT_ASSIGN_OR_RETURN(b.kv_a_proj_, w.linear(prefix + "kv_a_proj_with_mqa", C + R, hidden, spec.bias));
  FT_ASSIGN_OR_RETURN(b.kv_a_norm_, w.rms_norm(prefix + "kv_a_layernorm.weight", C, kLatentNormEps, false));
  FT_ASSIGN_OR_RETURN(b.kv_b_proj_, w.linear(prefix + "kv_b_proj", H * (spec.qk_nope_head_dim + spec.v_head_dim), C));
  FT_ASSIGN_OR_RETURN(b.o_proj_, w.linear(prefix + "o_proj", hidden, H * spec.v_head_dim, spec.bias));
  FT_ASSIGN_OR_RETURN(b.inv_freq_, w.place(ref::rope_inv_freq(spec.rope)));
  int64_t pad = std::max(spec.width() - spec.qk_head_dim(), spec.width() - spec.v_head_dim);
  if (spec.indexer) {
    if (spec.q_lora_rank <= 0) return invalid_argument("the DSA indexer needs the attention's q LoRA (q_lora_rank)");
    FT_ASSIGN_OR_RETURN(b.indexer_, DsaIndexer::load(w, prefix + "indexer.", *spec.indexer));
    pad = std::max(pad, b.indexer_->kv_slots(spec.width()) * spec.width());  // the index slots' zeros
  }
  FT_ASSIGN_OR_RETURN(b.zeros_, w.place(std::vector<float>(std::size_t(std::max<int64_t>(pad, 1)), 0.0f)));
  return b;
}

void MlaAttentionBlock::forward(Backend& be, const KvLayout& kv, const float* x, std::size_t T,
                                std::span<const AttentionSeq> seqs, const int64_t* positions, float* out) const {
  const std::size_t H = std::size_t(spec_.heads), D = std::size_t(spec_.width()), C = std::size_t(spec_.kv_lora_rank);
  const std::size_t N = std::size_t(spec_.qk_nope_head_dim), R = std::size_t(spec_.qk_rope_head_dim);
  const std::size_t V = std::size_t(spec_.v_head_dim), Q = N + R, rows = T * H;
  Scratch& s = be.scratch();
  Scratch::Frame frame(s);

  // Projections of x: the query (or its low-rank half) and the compressed kv, in one pass.
  float* q = s.floats(T * H * Q);
  float* ckv = s.floats(T * (C + R));
  float* qa = nullptr;  // the q LoRA latent, normed (the indexer's input too)
  if (spec_.q_lora_rank > 0) {
    qa = s.floats(T * std::size_t(spec_.q_lora_rank));
    const Backend::LinearOut outs[] = {{&q_a_proj_.weight, q_a_proj_.bias_or_null(), qa},
                                       {&kv_a_proj_.weight, kv_a_proj_.bias_or_null(), ckv}};
    be.linears(x, T, outs);
    q_a_norm_.forward(be, qa, qa, T);
    q_b_proj_.forward(be, qa, q, T);
  } else {
    const Backend::LinearOut outs[] = {{&q_proj_.weight, nullptr, q},
                                       {&kv_a_proj_.weight, kv_a_proj_.bias_or_null(), ckv}};
    be.linears(x, T, outs);
  }
  // The latent, normed, to every head's nope key and value.
  float* latent = s.floats(T * C);
  be.copy_columns(ckv, C + R, 1, latent, C, T, C);
  kv_a_norm_.forward(be, latent, latent, T);
  float* kvb = s.floats(T * H * (N + V));
  kv_b_proj_.forward(be, latent, kvb, T);

  // Per head (rows t * H + h): q and k as [rope | nope | 0], v as [v | 0], D wide.
  float* qf = s.floats(rows * D);
  float* kf = s.floats(rows * D);
  float* vf = s.floats(rows * D);
  be.copy_columns(q + N, Q, 1, qf, D, rows, R);
  be.copy_columns(q, Q, 1, qf + R, D, rows, N);
  be.copy_columns(ckv + C, C + R, H, kf, D, rows, R);  // the one rope key of token t, for each head
  be.copy_columns(kvb, N + V, 1, kf + R, D, rows, N);
  be.copy_columns(kvb + N, N + V, 1, vf, D, rows, V);
  if (D > Q) {
    be.copy_columns(zeros_.data(), 0, rows, qf + Q, D, rows, D - Q);
    be.copy_columns(zeros_.data(), 0, rows, kf + Q, D, rows, D - Q);
  }
  if (D > V) be.copy_columns(zeros_.data(), 0, rows, vf + V, D, rows, D - V);

  float* attn = s.floats(rows * D);
  if (indexer_) {
    sparse_forward(be, kv, x, qa, T, seqs, positions, qf, kf, vf, attn);
  } else {
    // RoPE on the rope dims of q and k, K/V into the pages, attention over them.
    be.attention_inputs(kv, kv_layer_, qf, kf, vf, T, H, nullptr, spec_.rope, inv_freq_.data(), positions, seqs);
    be.attention(kv, kv_layer_, qf, H, spec_.scale, seqs, attn, AttentionOptions{});
  }
  float* heads_out = s.floats(rows * V);
  be.copy_columns(attn, D, 1, heads_out, V, rows, V);
  o_proj_.forward(be, heads_out, out, T);
}

void MlaAttentionBlock::sparse_forward(Backend& be, const KvLayout& kv, const float* x, const float* q_latent,
                                       std::size_t T, std::span<const AttentionSeq> seqs, const int64_t* positions,
                                       float* q, float* k, const float* v, float* attn) const {
  const std::size_t H = std::size_t(spec_.heads), D = std::size_t(spec_.width());
  const std::size_t slots = std::size_t(kv_heads()), extra = slots - H;
  const std::size_t Di = std::size_t(indexer_->spec().head_dim);
  Scratch& s = be.scratch();
  Scratch::Frame frame(s);
  be.rope(q, T, H, spec_.rope, inv_freq_.data(), positions);
  be.rope(k, T, H, spec_.rope, inv_freq_.data(), positions);
  // A token's K/V row in the pages: the heads' [H, D], then the index slots (the key, zeros after
  // it; zero values).
  float* k_all = s.floats(T * slots * D);
  float* v_all = s.floats(T * slots * D);
  be.copy_columns(k, H * D, 1, k_all, slots * D, T, H * D);
  be.copy_columns(v, H * D, 1, v_all, slots * D, T, H * D);
  be.copy_columns(zeros_.data(), 0, T, k_all + H * D, slots * D, T, extra * D);
  be.copy_columns(zeros_.data(), 0, T, v_all + H * D, slots * D, T, extra * D);
  float* index_keys = s.floats(T * Di);
  indexer_->keys(be, x, T, positions, index_keys);
  be.copy_columns(index_keys, Di, 1, k_all + H * D, slots * D, T, Di);
  be.kv_write(kv, kv_layer_, k_all, v_all, seqs);
  int32_t* selected = s.take<int32_t>(T * std::size_t(indexer_->top_k()));
  indexer_->select(be, kv, kv_layer_, int64_t(H), x, q_latent, T, seqs, positions, selected);
  be.sparse_attention(kv, kv_layer_, q, H, spec_.scale, seqs, selected, std::size_t(indexer_->top_k()), attn);
}

}  // namespace ft::engine::blocks
