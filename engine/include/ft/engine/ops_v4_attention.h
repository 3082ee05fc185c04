// CPU reference ops of DeepSeek-V4's attention (HF DeepseekV4Attention, docs/deepseek-v4.md §2.6)
// and of its CSA lightning indexer's choice of entries (HF DeepseekV4Indexer, §2.8): one softmax
// with a per-head sink over two key sets that share one K = V head, the sliding window of the
// sequence's own kv rows and the visible compressed entries (ops_compressor.h makes them); the
// output's roped tail turned back at the query position; the grouped output projection; and the
// indexer's top-k of the entries a query may see.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ft/engine/ops_dsa.h"

namespace ft::engine {

// One V4 attention layer's dims, as its ops see them.
struct V4AttentionSpec {
  std::size_t heads = 0;      // H: query heads; all of them read the one K = V head
  std::size_t head_dim = 0;   // d: of a query head, a kv row and a compressed entry
  std::size_t rope_dims = 0;  // r: each head's last r dims are roped (ops_compressor.h rope_tail)
  float scale = 0;            // float(d^-0.5): HF's scaling, no YaRN mscale (§1: attention_factor 1)
  int64_t window = 0;         // W: sliding_window; the query at p sees kv rows p - W + 1 .. p
  std::size_t rate = 0;       // m: the layer's compress rate; 0 on a sliding_attention layer
};

// The keys one query row reads besides its own query (all rows of head_dim):
//   window   the kv rows of positions pos - window_rows + 1 .. pos, oldest first (the caller cuts
//            the window: window_rows = min(pos + 1, W)).
//   entries  the sequence's compressed entries [n_entries, d], entry w at row w.
//   visible  the entries the row attends, as indices into entries; -1 = none (the indexer's
//            padding). Must be distinct: HF marks them in a mask over all entries, so a repeat would
//            still count once there, but its top-k cannot repeat one, and neither does HCA's list.
struct V4RowKeys {
  const float* window = nullptr;
  std::size_t window_rows = 0;
  const float* entries = nullptr;
  std::size_t n_entries = 0;
  const int32_t* visible = nullptr;
  std::size_t n_visible = 0;
};

// The entries a query at absolute position pos may see: w < (pos + 1) / m, i.e. the windows that
// closed at or before pos (§2.7 causality; the same threshold HF applies in HCA's mask and in the
// indexer). rate 0: none.
inline std::size_t v4_causal_entries(int64_t pos, std::size_t rate) {
  return rate == 0 ? 0 : std::size_t((pos + 1) / int64_t(rate));
}

// The indexer's IndexerSpec (ops_dsa.h) for index_n_heads, index_head_dim, index_topk: scores
// sum_h (w[h] * Hi^-0.5) * relu(q[h] . k * Di^-0.5), the constants rounded to fp32 as torch does
// when it multiplies an fp32 tensor by a Python float.
inline IndexerSpec v4_indexer_spec(std::size_t heads, std::size_t head_dim, std::size_t top_k) {
  IndexerSpec s;
  s.heads = heads;
  s.head_dim = head_dim;
  s.scale = float(std::pow(double(head_dim), -0.5));
  s.weight_scale = float(std::pow(double(heads), -0.5));
  s.top_k = top_k;
  return s;
}

}  // namespace ft::engine

namespace ft::engine::ref {

// One query row at absolute position pos: q [H, d] (q_b_norm'd and roped) against keys (see
// V4RowKeys), for each head h in fp32 as HF's eager attention with sinks:
//   s_j   = (q[h] . k_j) * scale       over the window rows, then the visible entries
//   m     = max(s_j, sinks[h])
//   o[h]  = sum_j e^(s_j - m) / (sum_j e^(s_j - m) + e^(sinks[h] - m)) * k_j     (V = K)
// sinks [H] or null (no sink term). Then o's last r dims of every head are turned back at pos
// (rope_tail inverse, inv_freq [r / 2] of the layer's rope: "main" on sliding layers, "compress"
// on CSA/HCA). out [H, d].
void v4_attention_row(const float* q, const V4RowKeys& keys, const float* sinks, const float* inv_freq, int64_t pos,
                      const V4AttentionSpec& spec, float* out);

// T query rows of one pass at positions pos0 .. pos0 + T - 1: q [T, H, d]; kv [pos0 + T, d] the
// sequence's roped kv rows from position 0 (this pass's appended); entries [n_entries, d]. What a
// row sees of the entries:
//   picks null, spec.rate > 0 (HCA): every entry w < v4_causal_entries(p, m), in order;
//   picks [T, top_k] (CSA): the indexer's picks of that row (v4_index_select), -1 = none;
//   spec.rate 0 and no picks (sliding layer): none.
// Each row is v4_attention_row with the window cut at spec.window. out [T, H, d].
void v4_attention(const float* q, const float* kv, std::size_t T, int64_t pos0, const float* entries,
                  std::size_t n_entries, const int32_t* picks, std::size_t top_k, const float* sinks,
                  const float* inv_freq, const V4AttentionSpec& spec, float* out);

// o_a_proj, the grouped (block-diagonal) first half of the output projection: o [T, in] with
// in = H * d is cut into `groups` contiguous slices of in / groups (group i = heads i*H/g ..
// (i+1)*H/g - 1 when g divides H), and slice i goes through rows i*rank .. (i+1)*rank - 1 of
// weight [groups * rank, in / groups] (row-major, HF's o_a_proj.weight):
//   out[t, i*rank + r] = sum_c o[t, i*in/g + c] * weight[i*rank + r, c]       out [T, groups * rank]
// fp32 accumulation in c order. o_b_proj is a plain linear on out.
void grouped_o_proj(const float* o, const float* weight, std::size_t T, std::size_t in, std::size_t groups,
                    std::size_t rank, float* out);

// The CSA indexer's choice for one query at absolute position pos (§2.8): qi [Hi, Di] (index
// query, roped at pos with the compress rope), w [Hi] (weights_proj's raw output, unscaled),
// keys [n_entries, Di] (the indexer compressor's entries, all the sequence holds after this pass).
// Scores are ref::indexer_scores over the causal entries w < v4_causal_entries(pos, m); the others
// are masked, and the top min(spec.top_k, n_entries) are taken as ref::top_k_positions does over a
// row of n_entries (HF's topk over all the cached entries, so ties break by that row length).
// out [spec.top_k]: the chosen causal entries in ascending order, then -1.
void v4_index_select(const float* qi, const float* w, const float* keys, std::size_t n_entries, int64_t pos,
                     std::size_t rate, const IndexerSpec& spec, int32_t* out);

}  // namespace ft::engine::ref
