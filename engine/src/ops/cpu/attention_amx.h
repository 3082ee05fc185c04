// The AMX version of the per-chunk partial attention (attention_amx.cpp); attention() merges the
// partials the same way for both versions.
#pragma once

#include <cstddef>
#include <span>

#include "ops/cpu/attention.h"

namespace ft::engine::cpu {

// Whether the AMX kernel takes this layout on this path (bf16 KV, head_dim a multiple of 32,
// page_tokens 32 or 64, AMX usable).
bool attention_amx_fits(CpuIsa isa, const KvLayout& layout, int64_t layer);

// For every (row, head, key chunk) the rows see: the chunk's softmax state and unnormalised output,
// at index (row * heads + head) * max_chunks + chunk of part / part_out (part_out rows of head_dim).
// bf16_x: queries and softmax weights enter the tiles as bf16, else bf16x2 (amx.h).
void attention_amx_partials(const KvLayout& layout, int64_t layer, const float* q, std::size_t heads, float scale,
                            std::span<const AttentionSeq> seqs, float* part_out, AttentionPartial* part,
                            std::size_t max_chunks, bool bf16_x);

}  // namespace ft::engine::cpu
