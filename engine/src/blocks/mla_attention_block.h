// Multi-head latent attention (DeepSeek-V3, Kimi K2; HF DeepseekV3Attention). The query comes from
// q_proj, or from the low-rank pair q_a_proj -> q_a_layernorm -> q_b_proj when q_lora_rank is set;
// kv_a_proj_with_mqa writes a latent (kv_lora_rank) and one rope key shared by every head
// (qk_rope_head_dim); the latent, normed by kv_a_layernorm, goes through kv_b_proj to each head's
// nope key (qk_nope_head_dim) and value (v_head_dim). RoPE (interleaved pairs when rope_interleave,
// YaRN when configured) touches the rope parts only; softmax scale 1/sqrt(qk_head_dim), times
// mscale^2 under YaRN with mscale_all_dim.
//
// What the KV pages hold: the expanded per-head keys and values, not the latent. The paged KV,
// its attention kernels (reference, CPU, GPU) and the checkpoint format take one key and one value
// of one width per kv head, so every head's key is stored as [rope (rotated) | nope | zeros] and its
// value as [value | zeros], both max(qk_nope + qk_rope, v_head_dim) wide: the dot product is the
// one HF computes (the same dims in another order) and the zero dims add nothing. A restore then
// needs nothing but the pages, as for every other attention layer; restore + suffix runs the same
// ops on the same stored bytes as one long prefill. The cost is memory: DeepSeek-V3 stores
// 128 heads x 192 x 2 per token and layer (~98 KB in bf16) where the latent would be 576 values; a
// latent cache needs an attention kernel of its own (the absorbed form), left for later.
//
// With a DSA indexer (deepseek_v32, glm_moe_dsa; dsa_indexer.h) the layer's KV pages have
// kv_heads() slots, the heads' then the indexer's: its key sits in the K block of slot `heads`
// (and the next, should it be wider than a head), the V blocks of those slots are zeros. Each
// query's attention then sees only the positions the indexer chose (Backend::sparse_attention).
#pragma once

#include <algorithm>
#include <optional>
#include <span>
#include <string>

#include "blocks/dsa_indexer.h"
#include "blocks/weights.h"
#include "ft/engine/model_config.h"
#include "ft/engine/ops_attention.h"

namespace ft::engine::blocks {

struct MlaSpec {
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t q_lora_rank = 0;  // 0: q_proj
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool bias = false;   // attention_bias: on q_a_proj, kv_a_proj_with_mqa and o_proj
  float scale = 0;     // the softmax scale
  ref::RopeSpec rope;  // over the first qk_rope_head_dim dims of a width()-wide head
  std::optional<DsaIndexerSpec> indexer;  // DeepSeek sparse attention: its "indexer." tensors

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // A head's key and value in the KV pages (ModelConfig::head_dim).
  int64_t width() const { return mla_head_width(qk_head_dim(), v_head_dim); }
};

class MlaAttentionBlock {
 public:
  // prefix: e.g. "layers.3.self_attn." (relative to the loader's prefix).
  static Result<MlaAttentionBlock> load(const WeightLoader& w, const std::string& prefix, const MlaSpec& spec);

  // As AttentionBlock::forward: x [T, hidden] (normed) -> out [T, hidden], K/V into the pages.
  void forward(Backend& be, const KvLayout& kv, const float* x, std::size_t T, std::span<const AttentionSeq> seqs,
               const int64_t* positions, float* out) const;

  const MlaSpec& spec() const { return spec_; }
  // KV slots per token in the layer's pages: the heads', and the indexer's after them.
  int64_t kv_heads() const { return spec_.heads + (indexer_ ? indexer_->kv_slots(spec_.width()) : 0); }
  int64_t kv_layer() const { return kv_layer_; }
  void set_kv_layer(int64_t layer) { kv_layer_ = layer; }

 private:
  MlaSpec spec_;
  int64_t kv_layer_ = 0;
  Linear q_proj_, q_a_proj_, q_b_proj_, kv_a_proj_, kv_b_proj_, o_proj_;
  RmsNorm q_a_norm_, kv_a_norm_;
  Vector inv_freq_;
  Vector zeros_;  // the padding's source (copy_columns reads one zero row for every row)
  std::optional<DsaIndexer> indexer_;

  // With the indexer: q, k, v [T * heads, width()] as forward builds them; rotates q and k, writes
  // K/V and the index keys to the pages, and attends over the chosen positions into attn.
  void sparse_forward(Backend& be, const KvLayout& kv, const float* x, const float* q_latent, std::size_t T,
                      std::span<const AttentionSeq> seqs, const int64_t* positions, float* q, float* k, const float* v,
                      float* attn) const;
};

}  // namespace ft::engine::blocks
