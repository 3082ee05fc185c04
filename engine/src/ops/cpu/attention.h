// The CPU backend's attention over bf16 KV pages: writing new K/V into the pages and causal GQA
// attention of a batch of sequences.
//
// A query at position p attends keys [0, p] in fixed chunks of kKeyChunk positions (chunk c holds
// [c * kKeyChunk, (c + 1) * kKeyChunk)), each chunk's pages in order with an online softmax; the
// chunks' partial results are then merged in chunk order. The chunks are what spreads a long
// context's decode over the threads (flash-decoding), and since their bounds are absolute positions
// a query gets the same bits whether it is decoded alone, batched, or part of a prefill.
// Each K/V page row is read once for the whole query group of its kv head (GQA). A sliding window
// only moves where a query's keys begin (chunks and pages before it are skipped); sinks join the
// softmax when the chunks are merged.
#pragma once

#include <cstddef>
#include <span>

#include "ft/engine/backend.h"
#include "ft/engine/expert_kernels.h"

namespace ft::engine::cpu {

inline constexpr int64_t kKeyChunk = 1024;

// The softmax state of one (row, head) over one key chunk: running max and sum of exp(score - max).
struct AttentionPartial {
  float max;
  float sum;
};

void kv_write(const KvLayout& layout, int64_t layer, const float* k, const float* v, std::span<const AttentionSeq> seqs);

// bf16_x: the AMX kernel's queries and softmax weights as bf16, not bf16x2 (as linear() takes it).
void attention(Scratch& scratch, CpuIsa isa, const KvLayout& layout, int64_t layer, const float* q, std::size_t heads,
               float scale, std::span<const AttentionSeq> seqs, float* out, const AttentionOptions& opt = {},
               bool bf16_x = false);

}  // namespace ft::engine::cpu
