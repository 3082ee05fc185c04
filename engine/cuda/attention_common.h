// What the attention kernels (the per-row one in attention_kernels.cu, the tiled prefill one in
// attention_prefill.cu, the inputs pass in attention_inputs.cu) share: page offsets, where a row
// sits, bf16 rounding, the test that splits row tiles between the two attention kernels, and the
// prefill entry point. Internal to engine/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels.h"

namespace ft::engine::cuda {

// Eight bf16 (a 16-byte load, lowest address first) as floats.
__device__ __forceinline__ void unpack_bf16x8(const uint4 w, float (&f)[8]) {
  const std::uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(words[i] << 16);
    f[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

// Byte offsets inside a page of one layer's K and V (KvLayout's, computed on the host).
struct PageOffsets {
  std::size_t k_base = 0;       // K block of kv head 0
  std::size_t v_base = 0;       // V block of kv head 0
  std::size_t block_bytes = 0;  // one kv head's block
};
// Where `layer` lives in each page of `layout` (its own shape's blocks).
inline PageOffsets page_offsets(const KvLayout& layout, int layer) {
  return {layout.k_offset(layer, 0), layout.v_offset(layer, 0), layout.block_bytes(layer)};
}

// Bit for bit bf16.h's f32_to_bf16 (round to nearest even, a NaN stays a quiet NaN with its upper
// payload), which cuda_bf16.h's conversion does not promise for NaNs.
__device__ __forceinline__ std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((bits >> 16) | 0x0040u);
  return std::uint16_t((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// Where row r of a batched call sits: its sequence's page table and its position.
struct RowPlace {
  std::byte* const* table;  // pages of the row's sequence, position 0 first
  int pos;
};

__device__ __forceinline__ RowPlace row_place(int r, const int32_t* row_seq, const AttnSeqDev* seqs,
                                              std::byte* const* pages) {
  const AttnSeqDev seq = seqs[row_seq[r]];
  return {pages + seq.page0, seq.pos0 + (r - seq.row0)};
}

// Whether all rows of row tile `tile` ([tile * tile_rows, ...) of `rows`) belong to one sequence:
// such tiles are the tiled kernel's, the rows of the others the per-row kernel's. A sequence's rows
// are consecutive, so its first and last row tell.
__device__ __forceinline__ bool tile_in_one_sequence(int tile, int tile_rows, int rows, const int32_t* row_seq) {
  const int r0 = tile * tile_rows, r1 = min(r0 + tile_rows, rows) - 1;
  return row_seq[r0] == row_seq[r1];
}

// The first key the query at `pos` sees (AttentionOptions::first_key): a sliding window's start, its
// chunk's start, or 0. Non-decreasing in pos; pos -1 (a padding row) gives at most 0.
__host__ __device__ inline int attn_first_key(int pos, int window, int chunk) {
  if (window > 0) return max(0, pos - window + 1);
  if (chunk > 0) return pos - pos % chunk;
  return 0;
}

// One paged_attention call as the kernels of other files see it (device pointers; the rest host
// values).
struct PagedAttentionCall {
  const float* q;  // [T, heads, head_dim]
  float* out;      // [T, heads, head_dim]
  const int32_t* row_seq;
  const AttnSeqDev* seqs;
  std::byte* const* pages;
  PageOffsets off;
  int T;
  int heads;
  int kv_heads;
  int group;
  int head_dim;
  int page_tokens;
  float scale;
  int window;          // > 0: sliding window
  int chunk;           // > 0: chunked attention
  const float* sinks;  // [heads] or null
};

// Runs the tiled kernel (attention_prefill.cu) over every row tile that lies in one sequence, when
// the call is prefill-sized (64 rows or more) and the device (dev, with sms SMs) fits it; returns
// the tile size in rows (the per-row kernel then skips those tiles) or 0 when it ran nothing.
int tiled_prefill_attention(const PagedAttentionCall& a, int dev, int sms, cudaStream_t s);

// The tensor-core decode kernel (attention_decode.cu; attention_plan.h's attention_mma_fits holds):
// the rows' keys split over `splits` blocks, whose states go to the workspace `part` and are merged
// by the last to finish (split_done: kAttnSplitCounters counters at zero); splits 1: neither.
void decode_attention(const PagedAttentionCall& a, int splits, float* part, unsigned* split_done, cudaStream_t s);

}  // namespace ft::engine::cuda
