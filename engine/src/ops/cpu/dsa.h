// The CPU backend's DeepSeek sparse attention (ops_dsa.h has the reference): the lightning
// indexer's top-k over the index keys in the KV pages, and attention over the chosen positions.
// Rows run in parallel; each row's result is computed by the same instructions whatever the batch
// (backend.h's determinism): its scores in a fixed order of fixed-width partial sums, its choice by
// ref::top_k_positions.
#pragma once

#include <span>

#include "ft/engine/backend.h"

namespace ft::engine::cpu {

void index_select(Scratch& scratch, const KvLayout& layout, int64_t layer, const float* q, const float* w,
                  const IndexerSpec& spec, std::span<const AttentionSeq> seqs, int32_t* selected);

void sparse_attention(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                      std::span<const AttentionSeq> seqs, const int32_t* selected, std::size_t top_k, float* out);

}  // namespace ft::engine::cpu
