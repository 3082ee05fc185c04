// What the two attention kernels (the per-row one in attention_kernels.cu, the tiled prefill one in
// attention_prefill.cu) share: page offsets, the test that splits row tiles between them, and the
// prefill entry point. Internal to engine/cuda.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels.h"

namespace ft::engine::cuda {

// Byte offsets inside a page of one layer's K and V (KvLayout's, computed on the host).
struct PageOffsets {
  std::size_t k_base = 0;       // K block of kv head 0
  std::size_t v_base = 0;       // V block of kv head 0
  std::size_t block_bytes = 0;  // one kv head's block
};

// Whether all rows of row tile `tile` ([tile * tile_rows, ...) of `rows`) belong to one sequence:
// such tiles are the tiled kernel's, the rows of the others the per-row kernel's. A sequence's rows
// are consecutive, so its first and last row tell.
__device__ __forceinline__ bool tile_in_one_sequence(int tile, int tile_rows, int rows, const int32_t* row_seq) {
  const int r0 = tile * tile_rows, r1 = min(r0 + tile_rows, rows) - 1;
  return row_seq[r0] == row_seq[r1];
}

// One paged_attention call as the tiled prefill kernel sees it (device pointers; the rest host values).
struct PrefillAttention {
  const float* q;
  float* out;
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
  int dev;  // the device and its SM count, for the launch shape
  int sms;
};

// Runs the tiled kernel over every row tile that lies in one sequence, when the call is
// prefill-sized (64 rows or more) and the device fits it; returns the tile size in rows (the
// per-row kernel then skips those tiles) or 0 when it ran nothing.
int tiled_prefill_attention(const PrefillAttention& a, cudaStream_t s);

}  // namespace ft::engine::cuda
