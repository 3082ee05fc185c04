// The CPU backend's DeepSeek-V4 ops (the references are ops_hyper.h and ops_v4_attention.h): the
// hyper-connections token by token, and the attention and the CSA indexer over the rows they read
// from the KV pages. Tokens and query rows run in parallel; each is computed by the reference's own
// row arithmetic, so a row's result never depends on the batch or on how its sequence was split
// (backend.h's determinism).
#pragma once

#include <span>

#include "ft/engine/backend.h"

namespace ft::engine::cpu {

void hc_pre(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
            const HyperSpec& spec, float* x, float* post, float* comb);
void hc_post(const float* h, const float* out, const float* post, const float* comb, std::size_t T,
             const HyperSpec& spec, float* h_new);
void hc_head(const float* h, const float* fn, const float* base, const float* scale, std::size_t T,
             const HyperSpec& spec, float* y);

void v4_index_select(Scratch& scratch, const KvLayout& layout, int64_t layer, const float* q, const float* w,
                     const IndexerSpec& spec, std::size_t rate, std::span<const AttentionSeq> seqs, int32_t* picks);

void v4_attention(Scratch& scratch, const KvLayout& layout, int64_t layer, const float* q, const V4AttentionSpec& spec,
                  const float* sinks, const float* inv_freq, std::span<const AttentionSeq> seqs, const int32_t* picks,
                  std::size_t top_k, float* out);

}  // namespace ft::engine::cpu
