// DeepSeek sparse attention's lightning indexer (HF DeepseekV32Indexer, GlmMoeDsaIndexer): an
// option of the latent attention block (mla_attention_block.h) that picks, for each query, the
// index_topk earlier positions its attention sees. Its query is wq_b of the attention's q LoRA
// latent (q_a_layernorm(q_a_proj(x))), index_n_heads heads of index_head_dim; its key, one per
// token, is k_norm(wk(x)) with k_norm a LayerNorm (weight and bias, eps 1e-6); both take RoPE on
// their first qk_rope_head_dim dims with the attention's frequencies, NeoX halves in DeepSeek-V3.2
// (unlike its attention) and interleaved pairs in GLM-5. A query's score of a key is
// sum_h weights_proj(x)_h * n_heads^-0.5 * relu(q_h . k * index_head_dim^-0.5), in fp32; the top
// index_topk scores among the positions <= its own win (ties to the lower position).
//
// The keys are sequence state: they go to the layer's KV pages, in the K blocks of the slots after
// the attention's heads (kv_slots() of them, head_dim() wide, zeros after), written with the
// attention's K and V, so checkpoints, restores and shared prefixes carry them as they carry KV.
#pragma once

#include <span>
#include <string>

#include "blocks/weights.h"
#include "ft/engine/model_config.h"
#include "ft/engine/ops_attention.h"

namespace ft::engine::blocks {

struct DsaIndexerSpec {
  int64_t hidden = 0;
  int64_t q_lora_rank = 0;
  int64_t heads = 0;     // index_n_heads
  int64_t head_dim = 0;  // index_head_dim
  int64_t top_k = 0;     // index_topk
  ref::RopeSpec rope;    // head_dim wide, rotary_dim qk_rope_head_dim
};

// The indexer of `cfg` (deepseek_v32, glm_moe_dsa).
DsaIndexerSpec dsa_indexer_spec(const ModelConfig& cfg);

class DsaIndexer {
 public:
  // prefix: e.g. "layers.3.self_attn.indexer.". kUnsupported on a backend without its ops.
  static Result<DsaIndexer> load(const WeightLoader& w, const std::string& prefix, const DsaIndexerSpec& spec);

  // The KV slots its key takes in pages of `width` floats a slot.
  int64_t kv_slots(int64_t width) const { return (spec_.head_dim + width - 1) / width; }
  int64_t top_k() const { return spec_.top_k; }
  const DsaIndexerSpec& spec() const { return spec_; }
  // The index key of each row of x [T, hidden] (the attention's normed input), rotated to its
  // position: k [T, head_dim].
  void keys(Backend& be, const float* x, std::size_t T, const int64_t* positions, float* k) const;
  // Each row's chosen positions, selected [T, top_k()], against the keys already in K slot
  // `kv_slot` of layer `kv_layer` (this pass's rows included). q_latent [T, q_lora_rank].
  void select(Backend& be, const KvLayout& kv, int64_t kv_layer, int64_t kv_slot, const float* x, const float* q_latent,
              std::size_t T, std::span<const AttentionSeq> seqs, const int64_t* positions, int32_t* selected) const;

 private:
  DsaIndexerSpec spec_;
  Linear wq_b_, wk_, weights_proj_;
  Vector k_norm_weight_, k_norm_bias_;
  Vector inv_freq_;
};

}  // namespace ft::engine::blocks
