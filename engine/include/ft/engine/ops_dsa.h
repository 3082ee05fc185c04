// CPU reference ops of DeepSeek sparse attention (DSA: deepseek_v32, glm_moe_dsa; HF
// DeepseekV32Indexer / GlmMoeDsaIndexer): the indexer key's LayerNorm, the lightning indexer's
// scores and its top-k choice of key positions, and attention over only the chosen positions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ft::engine {

// One layer's lightning indexer, as its ops see it. A query row t has `heads` query vectors of
// head_dim and one weight per head; a key position j has one key of head_dim. The row's score of j
// is HF's index_scores[t, j]:
//   sum_h (w[t, h] * weight_scale) * relu((q[t, h] . k[j]) * scale)
// and the row selects the top_k positions <= its own with the highest scores (all of them when it
// has no more than top_k; ties as ref::top_k_positions says).
struct IndexerSpec {
  std::size_t heads = 0;     // index_n_heads
  std::size_t head_dim = 0;  // index_head_dim
  float scale = 0;           // HF softmax_scale: index_head_dim^-0.5
  float weight_scale = 0;    // index_n_heads^-0.5, on weights_proj's output
  std::size_t top_k = 0;     // index_topk
  // The KV head slot of the layer whose K block holds the index keys (their first head_dim dims, or
  // the slot's whole width and the rest in the next slots' K blocks when head_dim is wider):
  // the keys are sequence state like K and V, so they live in the layer's KV pages
  // (mla_attention_block.h says where).
  int64_t kv_slot = 0;
};

}  // namespace ft::engine

namespace ft::engine::ref {

// nn.LayerNorm over rows of dim with weight and bias: (x - mean) / sqrt(var + eps) * w + b, the
// biased variance, statistics in double (out may alias x).
void layer_norm(const float* x, const float* weight, const float* bias, float* out, std::size_t rows, std::size_t dim,
                float eps);

// scores[j] for keys k[j * key_stride ..] (head_dim each), j < n, of one query row: q [heads,
// head_dim], w [heads] (IndexerSpec's formula). In fp32 as HF: each head's dot product, scaled,
// ReLU'd, then the weighted sum over heads in head order.
void indexer_scores(const float* q, const float* w, const float* k, std::size_t key_stride, std::size_t n,
                    const IndexerSpec& spec, float* scores);

// A query's choice among the scores[0, n) of its causal keys, as HF makes it: torch.topk over the
// whole row of the pass's `row_length` >= n keys, the ones after the query masked to -inf, taking
// min(top_k, row_length). Positions of the chosen causal keys into out[0, top_k) in ascending
// order, -1 after them. Exactly equal scores (ReLU makes zeros common) are broken as torch does on
// the CPU: std::nth_element (std::partial_sort when k * 64 <= row_length) over (score, position)
// pairs comparing scores only, so which of them wins depends on the row's length: a query's choice
// is the same in any pass only where no tie straddles its k-th score.
void top_k_positions(const float* scores, std::size_t n, std::size_t row_length, std::size_t top_k, int32_t* out);

// One query row's attention over the selected positions only: for each head h, q [heads, head_dim]
// against k, v [.., kv_heads, head_dim] (the gathered cache; query head h reads kv head h) at the
// positions selected[0, top_k) (-1: none), softmax(q . k * scale) in fp32 normalised before V as
// HF's eager attention does; out [heads, head_dim].
void sparse_attention_row(const float* q, const float* k, const float* v, std::size_t heads, std::size_t kv_heads,
                          std::size_t head_dim, const int32_t* selected, std::size_t top_k, float scale, float* out);

}  // namespace ft::engine::ref
