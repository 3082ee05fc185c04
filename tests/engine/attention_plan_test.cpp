// How the GPU's paged attention spreads a call over the SMs (engine/cuda/attention_plan.h): host
// arithmetic, so it is tested here, on machines without a GPU. The GPU suite checks each plan's
// results against the reference (CudaAttention.*), with the shapes below.
#include "attention_plan.h"

#include <gtest/gtest.h>

namespace ft::engine::cuda {
namespace {

constexpr AttentionGpu kH100{132, true};

AttentionCall decode(int rows, int kv_heads, int group, int keys, int head_dim = 128) {
  return {rows, kv_heads, group, head_dim, keys, false};
}

// Qwen3-30B-A3B's attention (32 query heads over 4 kv heads) decoding one sequence 8,192 tokens
// deep: 4 blocks alone. The keys go to splits of blocks of 4 query heads (two a kv head), as many
// as fill the GPU once.
TEST(AttentionPlan, ALongDecodeRowSplitsItsKeysToFillTheGpu) {
  const AttentionCall c = decode(1, 4, 8, 8192);
  const AttentionPlan p = plan_attention(c, kH100, true);
  EXPECT_EQ(p.per_slice, 4);
  EXPECT_EQ(p.slices, 2);
  EXPECT_EQ(p.cluster, 1);
  EXPECT_EQ(p.splits, 16);
  EXPECT_LE(long(c.rows) * c.kv_heads * p.blocks(), kH100.sms);
  EXPECT_GE(attention_tiles(c), p.splits * kAttnSplitTiles);
  EXPECT_EQ(p.workspace_floats(1, 32, 128), std::size_t(32) * 16 * 130);
  // Four times the context keeps the one wave; so does 2,048 (4 tiles a split).
  EXPECT_EQ(plan_attention(decode(1, 4, 8, 32768), kH100, true).splits, 16);
  EXPECT_EQ(plan_attention(decode(1, 4, 8, 2048), kH100, true).splits, 16);
  // Four rows: 32 blocks, 4 splits.
  EXPECT_EQ(plan_attention(decode(4, 4, 8, 8192), kH100, true).splits, 4);
}

// The slices follow the warps' room for a preloaded value tile: 4 heads of 128 dims, 8 of 64, one
// of 256; a group of 5 (Llama 4) in slices of 3.
TEST(AttentionPlan, SplitBlocksKeepAsManyHeadsAsPreloadTheirValues) {
  EXPECT_EQ(plan_attention(decode(1, 8, 8, 16384, 64), kH100, true).per_slice, 8);
  const AttentionPlan wide = plan_attention(decode(1, 2, 8, 16384, 256), kH100, true);
  EXPECT_EQ(wide.per_slice, 1);
  EXPECT_EQ(wide.slices, 8);
  const AttentionPlan five = plan_attention(decode(1, 8, 5, 8192), kH100, true);
  EXPECT_EQ(five.per_slice, 3);
  EXPECT_EQ(five.slices, 2);
  EXPECT_TRUE(attention_values_preload(4, 128));
  EXPECT_FALSE(attention_values_preload(5, 128));  // padded to 8 queries
  EXPECT_FALSE(attention_values_preload(1, 160));  // padded to 256 dims
}

// Without a workspace (or for prefill-sized calls) the same row slices its group and takes a cluster.
TEST(AttentionPlan, WithoutAWorkspaceTheGroupIsSlicedAndTheKeysClustered) {
  const AttentionPlan p = plan_attention(decode(1, 4, 8, 8192), kH100, false);
  EXPECT_EQ(p.splits, 1);
  EXPECT_EQ(p.per_slice, 1);
  EXPECT_EQ(p.slices, 8);
  EXPECT_EQ(p.cluster, 4);
  EXPECT_EQ(p.workspace_floats(1, 32, 128), 0u);
  // No clusters on the GPU: the slices alone.
  const AttentionPlan flat = plan_attention(decode(1, 4, 8, 8192), {132, false}, false);
  EXPECT_EQ(flat.cluster, 1);
  EXPECT_EQ(flat.splits, 1);
}

// Shorter contexts split as far as each split keeps its tiles, down to half the GPU (one row of 1,024
// keys: 8 splits); shorter still (measured: no faster) and batches that fill the GPU by themselves,
// not at all.
TEST(AttentionPlan, ShortContextsSplitLessOrNotAtAll) {
  EXPECT_EQ(plan_attention(decode(1, 4, 8, 1536), kH100, true).splits, 12);
  EXPECT_EQ(plan_attention(decode(1, 4, 8, 1024), kH100, true).splits, 8);
  EXPECT_EQ(plan_attention(decode(1, 4, 8, 992), kH100, true).splits, 1);  // 31 tiles: 7 splits, under half
  EXPECT_EQ(plan_attention(decode(1, 4, 8, 128), kH100, true).splits, 1);
  EXPECT_EQ(plan_attention(decode(16, 4, 8, 8192), kH100, true).splits, 1);  // 128 blocks already
  EXPECT_EQ(plan_attention(decode(40, 4, 8, 32768), kH100, true).splits, 1);
}

// The GPU suite's decode shapes (CudaAttention.DecodeAttentionOverLongContexts) split, but for the
// sliding window of 128 keys.
TEST(AttentionPlan, TheGpuSuitesLongDecodeShapesSplit) {
  EXPECT_GT(plan_attention(decode(1, 4, 8, 9001), kH100, true).splits, 1);
  EXPECT_GT(plan_attention(decode(3, 4, 8, 6001), kH100, true).splits, 1);
  const AttentionPlan g16 = plan_attention(decode(1, 2, 16, 9001), kH100, true);
  EXPECT_EQ(g16.slices, 4);
  EXPECT_GT(g16.splits, 1);
  EXPECT_GT(plan_attention(decode(1, 8, 8, 9001, 64), kH100, true).splits, 1);
  EXPECT_GT(plan_attention(decode(3, 8, 8, 6001, 64), kH100, true).splits, 1);
  EXPECT_GT(plan_attention(decode(1, 2, 8, 9001, 256), kH100, true).splits, 1);
  EXPECT_GT(plan_attention(decode(3, 2, 8, 6001, 256), kH100, true).splits, 1);
  EXPECT_GT(plan_attention({1, 8, 5, 128, 8192, true}, kH100, true).splits, 1);  // Llama 4's chunk
  EXPECT_GT(plan_attention({3, 8, 5, 128, 6001, true}, kH100, true).splits, 1);
  EXPECT_EQ(plan_attention({1, 8, 8, 64, 128, true}, kH100, true).splits, 1);
}

}  // namespace
}  // namespace ft::engine::cuda
