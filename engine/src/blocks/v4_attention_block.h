// DeepSeek-V4's attention (HF DeepseekV4Attention, docs/deepseek-v4.md §2.6-§2.8): a q LoRA
// (wq_a -> q_norm -> wq_b, each head then RMS-normed without a weight), one K = V head (wkv ->
// kv_norm) shared by every query head, RoPE on the last qk_rope_head_dim dims of a head (the
// "main" rope on sliding_attention layers, the "compress" one elsewhere), a learnt sink logit per
// head, the output's roped tail turned back at the query position, and the grouped output
// projection (wo_a's o_groups blocks, then wo_b). Every layer attends the sliding window of the
// sequence's own kv rows; a compressed layer also its compressor's entries, one per rate tokens
// (all that are visible on HCA layers, those its lightning indexer picks on CSA layers).
//
// What the KV pages hold, per position p of the layer (every slot head_dim wide): slot 0's K block
// the kv row of p, its V block the compressor's entry whose window p closes (zeros where p closes
// none, and on sliding layers); on CSA layers the indexer's entry likewise in the K blocks of the
// slots after it (their V blocks zeros). The raw kv and gate rows of the open windows, which the
// next entries pool, are the sequence's fixed-size state (a LinearState: conv the kv rows, recurrent
// the gate rows, ref::compress_rows' rings; on CSA layers each ring row holds the attention
// compressor's row, then the indexer's). So checkpoints and restores carry everything a later pass
// reads, and restore + suffix equals the whole sequence.
//
// Tensor names (relative to the layer's "attn."): wq_a, q_norm, wq_b, wkv, kv_norm (HF 5.17's
// save_pretrained writes it "norm"), wo_a, wo_b, attn_sink; compressor.{wkv, wgate, ape, norm};
// indexer.{wq_b, weights_proj} and indexer.compressor.{wkv, wgate, ape, norm}.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "blocks/weights.h"
#include "ft/engine/model_config.h"
#include "ft/engine/ops_compressor.h"
#include "ft/engine/ops_v4_attention.h"
#include "ft/engine/sequence_state.h"

namespace ft::engine::blocks {

struct V4AttentionBlockSpec {
  int64_t hidden = 0;
  int64_t q_lora_rank = 0;
  V4AttentionSpec attention;  // heads, head_dim, rope_dims, scale, window, rate (0: a sliding layer)
  ref::RopeSpec rope;         // the layer's rope over the r roped dims (deepseek_v4_specs.h)
  int64_t o_groups = 0;
  int64_t o_lora_rank = 0;
  float eps = 1e-6f;                // rms_norm_eps: q_norm, the per-head q norm, kv_norm
  CompressorSpec compressor;        // rate 0: none
  CompressorSpec index_compressor;  // rate 0: no indexer (sliding and HCA layers)
  IndexerSpec indexer;              // kv_slot: the first slot of the index keys
};

// Layer `layer` of a deepseek_v4 config.
V4AttentionBlockSpec v4_attention_block_spec(const ModelConfig& cfg, int64_t layer);

class V4AttentionBlock {
 public:
  // prefix: e.g. "layers.3.attn." (relative to the loader's prefix). kUnsupported on a backend
  // without the V4 ops.
  static Result<V4AttentionBlock> load(const WeightLoader& w, const std::string& prefix,
                                       const V4AttentionBlockSpec& spec);

  // x [T, hidden] (normed) -> out [T, hidden]; kv rows and entries into the pages, the open windows
  // into `states` (per sequence, this layer's; unused without a compressor).
  void forward(Backend& be, const KvLayout& kv, const float* x, std::size_t T, std::span<const AttentionSeq> seqs,
               std::span<const DeltaNetSeq> states, const int64_t* positions, float* out) const;

  const V4AttentionBlockSpec& spec() const { return spec_; }
  int64_t head_dim() const { return int64_t(spec_.attention.head_dim); }
  // KV slots per position: the kv row's (and the entries'), then the index keys'.
  int64_t kv_heads() const;
  int64_t kv_layer() const { return kv_layer_; }
  void set_kv_layer(int64_t layer) { kv_layer_ = layer; }
  // Whether the layer keeps open windows in the sequence state, and that state, empty.
  bool has_state() const { return spec_.compressor.rate > 0; }
  LinearState empty_state(int64_t layer) const;

 private:
  struct Compressor {
    Linear wkv, wgate;
    Vector position_bias;
    Vector norm;
  };
  V4AttentionBlockSpec spec_;
  int64_t kv_layer_ = 0;
  Linear wq_a_, wq_b_, wkv_, wo_b_;
  std::vector<Matrix> wo_a_;  // one [o_lora_rank, heads * head_dim / o_groups] block per group
  RmsNorm q_norm_, kv_norm_;
  Vector ones_;  // the per-head q norm's weight: HF's is unweighted
  Vector sinks_, inv_freq_, zeros_;
  Compressor compressor_, index_compressor_;
  Linear index_wq_b_, index_weights_;

  // Rotates the last rope_dims dims of each width-wide head of x [T, heads, width].
  void rope_tail(Backend& be, float* x, std::size_t T, std::size_t heads, std::size_t width,
                 const int64_t* positions) const;
  // The entries [T, c.width] the rows of x close (zeros elsewhere); each sequence's open windows in
  // its ring rows at column `column`.
  void compress(Backend& be, const Compressor& c, const CompressorSpec& spec, const float* x, std::size_t T,
                std::span<const AttentionSeq> seqs, std::span<const DeltaNetSeq> states, std::size_t column,
                float* entries) const;
  // A ring row: the attention compressor's raw row, then the indexer's.
  std::size_t ring_ld() const {
    return spec_.compressor.row() + (spec_.index_compressor.rate ? spec_.index_compressor.row() : 0);
  }
};

}  // namespace ft::engine::blocks
