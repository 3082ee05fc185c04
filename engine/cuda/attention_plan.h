// How paged_attention (attention_kernels.cu) spreads one call over the GPU: plain host arithmetic,
// kept apart from the kernels so that CI, which has no GPU, tests the choices.
//
// A block owns one query row and a slice of one GQA group's query heads (each K/V element it reads
// serves every head of the slice); its warps take the row's key tiles round robin. Prefill-sized
// calls fill the GPU with rows. Decode rows alone do not: one row of a model with 4 kv heads is 4
// blocks on a GPU of 132 SMs. Such a call spreads each row over more blocks in one of two ways:
//   - split: the row's keys go to `splits` blocks, each with as many of the group's heads as its
//     warps can hold (every K/V byte read once a slice, not once a head); each writes its partial
//     softmax state to a workspace and the split that finishes last merges them in split order
//     (flash-decoding; a counter per row and slice says which is last). For contexts long enough
//     to fill at least half the GPU with splits.
//   - slice + cluster: the group's heads into smaller slices (each re-reads the kv head's keys,
//     mostly from L2), then the keys over a thread block cluster merged through distributed shared
//     memory (sm_90+). For short contexts, and where no workspace is given.
// On GPUs with bf16 tensor cores (sm_80+), decode rows of GQA groups of up to 8 heads of 64 or 128
// dims take a third way instead: a block has every head of the group, its warps take q.k and p.v of
// 16 keys at a time on the tensor cores (attention_decode.cu), and the row's keys are split over as
// many blocks as fill the GPU once, merged as above.
// Decode steps recorded as CUDA graphs are planned for their pass shape's context (a power of 2),
// so one recording serves every step up to it: the rows' actual keys may leave splits empty.
#pragma once

#include <algorithm>
#include <cstddef>

namespace ft::engine::cuda {

inline constexpr int kAttnTile = 32;          // keys per warp step
inline constexpr int kAttnMaxWarps = 8;       // per block
inline constexpr int kAttnMaxQueries = 8;     // query heads per block
inline constexpr int kAttnMaxCluster = 8;     // portable cluster size
inline constexpr int kAttnMaxSplits = 64;     // blocks a row's keys may be split over
inline constexpr int kAttnSplitTiles = 4;     // key tiles a split keeps, at least (half its warps')
inline constexpr int kAttnTiledMinRows = 64;  // fewer rows: decode-sized, the per-row kernel alone
inline constexpr int kAttnSplitCounters = 1024;  // (row, kv head, slice) blocks a split call may have
inline constexpr int kAttnSplitStateHead = 4;    // floats before a split state's outputs (16-byte aligned)
// Contexts of at most this many keys never split: the shortest context a recorded decode step is
// planned for (its pass shape's), so such steps plan as their op-by-op runs do (see below).
inline constexpr int kAttnNeverSplitKeys = 256;
inline constexpr int kAttnMmaKeys = 16;     // keys a tensor-core decode warp takes a step
inline constexpr int kAttnMmaWarps = 8;     // its warps a block
inline constexpr int kAttnMmaMaxGroup = 8;  // query heads (hi and lo halves: the mma's 16 rows)

struct AttentionCall {
  int rows = 0;  // T
  int kv_heads = 0;
  int group = 0;  // query heads per kv head
  int head_dim = 0;
  int max_keys = 0;      // keys the longest row reads (its context, bounded by a window or chunk)
  bool limited = false;  // a window or chunk: a row's keys may start mid-tile (one tile more)
  int page_tokens = 0;   // KV positions a page
};

struct AttentionGpu {
  int sms = 1;
  bool clusters = false;  // thread block clusters (sm_90+)
  bool mma = false;       // bf16 tensor cores (sm_80+)
};

struct AttentionPlan {
  int slices = 1;  // blocks per (row, kv head): the group's heads in slices of per_slice
  int per_slice = 1;
  int warps = 1;    // per block
  int cluster = 1;  // blocks of a cluster splitting a row's keys (merged in shared memory)
  int splits = 1;   // blocks splitting a row's keys (merged by the last to finish)
  bool mma = false;  // the tensor-core decode kernel (slices 1: the whole group a block)

  int blocks() const { return slices * cluster * splits; }  // per (row, kv head)
  // Floats of workspace the split needs for `rows` rows of `heads` query heads: per (row, head,
  // split) its running max, its sum, two floats of padding and head_dim unnormalised outputs.
  std::size_t workspace_floats(int rows, int heads, int head_dim) const {
    return splits > 1 ? std::size_t(rows) * std::size_t(heads) * std::size_t(splits) *
                            std::size_t(head_dim + kAttnSplitStateHead)
                      : 0;
  }
};

inline int attention_tiles(const AttentionCall& c) {
  return std::max(1, (c.max_keys + kAttnTile - 1) / kAttnTile + (c.limited ? 1 : 0));
}

inline int attention_pow2_ceil(int v) {
  int r = 1;
  while (r < v) r *= 2;
  return r;
}

// Whether the kernel's warps, with nc 32-dim columns of mq queries (both powers of 2), load a tile's
// values ahead of its scores: at most 16 accumulators a lane (4 a query of 128 dims) leave room for
// the tile beside them (ValueTile::kPreload in attention_kernels.cu is this).
constexpr bool attention_preloads_values(int nc, int mq) { return nc <= 4 && nc * mq <= 16; }

// The same for a block of `per_slice` query heads of head_dim dims, as the kernel pads them.
inline bool attention_values_preload(int per_slice, int head_dim) {
  return attention_preloads_values(attention_pow2_ceil(std::max(1, head_dim / 32)), attention_pow2_ceil(per_slice));
}

// The split of a decode call, or none (splits 1). Its slices are the largest whose warps preload
// their values (measured: blocks of 4 query heads of 128 dims beat blocks of the whole group of 8,
// whose warps load each tile's values only as they use them). Its splits fill the GPU once (more
// measured slower) while each keeps kAttnSplitTiles of the longest row's tiles; a split that would
// fill less than half the GPU is not taken (one row of a GQA-8 model: from ~1,000 keys on, where
// splitting measured at least as fast as the slices and clusters).
inline AttentionPlan plan_split_attention(const AttentionCall& c, const AttentionGpu& gpu) {
  AttentionPlan p;
  p.per_slice = std::min(c.group, kAttnMaxQueries);
  while (p.per_slice > 1 && !attention_values_preload(p.per_slice, c.head_dim)) p.per_slice = (p.per_slice + 1) / 2;
  p.slices = (c.group + p.per_slice - 1) / p.per_slice;
  p.per_slice = (c.group + p.slices - 1) / p.slices;
  p.warps = kAttnMaxWarps;
  const long blocks = long(c.rows) * c.kv_heads * p.slices;
  if (blocks > kAttnSplitCounters || c.max_keys <= kAttnNeverSplitKeys) return AttentionPlan{};
  const long fill = std::min<long>(long(gpu.sms) / std::max(1L, blocks), kAttnMaxSplits);
  const long splits = std::min<long>(fill, attention_tiles(c) / kAttnSplitTiles);
  if (splits < 2 || 2 * splits < fill) return AttentionPlan{};
  p.splits = int(splits);
  return p;
}

// The context a decode-sized call is planned for: its longest row's, rounded up to a power of 2, so
// that a step run op by op is planned as the same step recorded in a graph (whose pass shape's
// context is that power of 2, or 256 where the row is shorter: kAttnNeverSplitKeys) and both give
// the same bits.
inline int attention_plan_context(int rows, int max_ctx) {
  return rows < kAttnTiledMinRows ? attention_pow2_ceil(max_ctx) : max_ctx;
}

// Whether a call is the tensor-core decode kernel's: decode-sized, a group that fits its rows, a head
// dim it is built for, and pages holding whole 16-key steps.
inline bool attention_mma_fits(const AttentionCall& c, const AttentionGpu& gpu) {
  return gpu.mma && c.rows < kAttnTiledMinRows && c.group <= kAttnMmaMaxGroup &&
         (c.head_dim == 64 || c.head_dim == 128) && c.page_tokens > 0 && c.page_tokens % kAttnMmaKeys == 0;
}

// The tensor-core decode kernel's split: as many splits as fill the GPU once (a block an SM) while
// each warp keeps two steps of the longest row's keys; none without a workspace.
inline AttentionPlan plan_mma_attention(const AttentionCall& c, const AttentionGpu& gpu, bool may_split) {
  AttentionPlan p;
  p.mma = true;
  p.per_slice = c.group;
  p.warps = kAttnMmaWarps;
  const long blocks = long(c.rows) * c.kv_heads;
  if (!may_split || blocks > kAttnSplitCounters || c.max_keys <= kAttnNeverSplitKeys) return p;
  const long steps = (c.max_keys + kAttnMmaKeys - 1) / kAttnMmaKeys + (c.limited ? 1 : 0);
  const long fill = std::min<long>(gpu.sms / std::max(1L, blocks), kAttnMaxSplits);
  const long splits = std::min<long>(fill, steps / (2L * kAttnMmaWarps));
  if (splits >= 2) p.splits = int(splits);
  return p;
}

// The shape of a paged_attention call; `may_split`: a workspace and the split counters can be had
// and no row is the tiled prefill kernel's.
inline AttentionPlan plan_attention(const AttentionCall& c, const AttentionGpu& gpu, bool may_split) {
  if (attention_mma_fits(c, gpu)) return plan_mma_attention(c, gpu, may_split);
  if (may_split) {
    if (const AttentionPlan split = plan_split_attention(c, gpu); split.splits > 1) return split;
  }
  AttentionPlan p;
  const int tiles = attention_tiles(c);
  int max_cluster = 1;
  while (gpu.clusters && max_cluster < kAttnMaxCluster && tiles >= max_cluster * 2 * kAttnMaxWarps * 2)
    max_cluster *= 2;
  // A group of up to kAttnMaxQueries heads shares a block; larger groups split into even slices. A
  // grid with fewer blocks than the GPU has SMs, counting the cluster ranks its rows' keys could be
  // split over, splits the group further: the extra reads of the same K/V mostly hit L1/L2, and
  // more SMs pull from memory. Halving the slice also halves each block's queries, so its warps hold
  // less state (8 queries of 128 dims took 190-255 registers) and keep more loads in flight.
  p.slices = (c.group + kAttnMaxQueries - 1) / kAttnMaxQueries;
  p.per_slice = (c.group + p.slices - 1) / p.slices;
  while (p.per_slice > 1 && long(c.rows) * c.kv_heads * p.slices * max_cluster < gpu.sms) {
    p.per_slice = (p.per_slice + 1) / 2;
    p.slices = (c.group + p.per_slice - 1) / p.per_slice;
  }
  // Warps split a row's keys: fewer per block when the grid alone fills the GPU, never more than
  // the longest row has tiles. Then clusters while the grid is still smaller than the GPU and
  // every warp keeps a few tiles (a short context, as in most decode steps, gets none).
  const long blocks = long(c.rows) * c.kv_heads * p.slices;
  p.warps = std::min(blocks >= 2L * gpu.sms ? 4 : kAttnMaxWarps, tiles);
  while (gpu.clusters && p.cluster < kAttnMaxCluster && blocks * p.cluster * 2 <= gpu.sms &&
         tiles >= p.cluster * 2 * p.warps * 2)
    p.cluster *= 2;
  return p;
}

}  // namespace ft::engine::cuda
