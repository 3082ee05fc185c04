// How the GPU's paged attention spreads a call over the SMs (engine/cuda/attention_plan.h): host
// arithmetic, so it is tested here, on machines without a GPU. The GPU suite checks each plan's
// results against the reference (CudaAttention.*), with the shapes below.
#include "attention_plan.h"

#include <gtest/gtest.h>

namespace ft::engine::cuda {
namespace {

constexpr AttentionGpu kH100{132, true};
constexpr AttentionGpu kMma{132, true, true};  // the same GPU, its tensor cores in use

AttentionCall decode(int rows, int kv_heads, int group, int keys, int head_dim = 128) {
  return {rows, kv_heads, group, head_dim, keys, false};
}

AttentionCall paged(AttentionCall c, int page_tokens) {
  c.page_tokens = page_tokens;
  return c;
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
  EXPECT_EQ(p.workspace_floats(1, 32, 128), std::size_t(32) * 16 * 132);  // m, l, 2 pad, 128 outputs
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

// A split call's (row, kv head, slice) blocks each need a counter that tells the last split to
// finish: a call with more of them than there are counters runs unsplit (only a GPU of thousands of
// SMs could fill itself twice with so many).
TEST(AttentionPlan, ASplitNeverNeedsMoreCountersThanThereAre) {
  constexpr AttentionGpu kHuge{10000, true};
  const AttentionPlan fits = plan_attention(decode(63, 8, 8, 65536), kHuge, true);  // 1,008 blocks
  EXPECT_GT(fits.splits, 1);
  EXPECT_LE(63 * 8 * fits.slices, kAttnSplitCounters);
  EXPECT_EQ(plan_attention(decode(63, 16, 8, 65536), kHuge, true).splits, 1);  // 2,016 blocks
}

// On a GPU with bf16 tensor cores, decode rows of groups of up to 8 heads of 64 or 128 dims, over
// pages of whole 16-key steps, take the tensor-core kernel: the whole group a block, the keys split
// to fill the GPU once while each warp keeps two steps.
TEST(AttentionPlan, DecodeRowsOfSmallGroupsTakeTheTensorCores) {
  const AttentionPlan p = plan_attention(paged(decode(1, 4, 8, 8192), 64), kMma, true);
  EXPECT_TRUE(p.mma);
  EXPECT_EQ(p.slices, 1);
  EXPECT_EQ(p.per_slice, 8);
  EXPECT_EQ(p.warps, kAttnMmaWarps);
  EXPECT_EQ(p.splits, 32);  // 512 steps over 8 warps, two each (132 / 4 blocks would allow 33)
  EXPECT_EQ(p.workspace_floats(1, 32, 128), std::size_t(32) * 32 * 132);
  EXPECT_EQ(plan_attention(paged(decode(1, 4, 8, 32768), 64), kMma, true).splits, 33);  // 132 / 4
  EXPECT_EQ(plan_attention(paged(decode(1, 4, 8, 1024), 64), kMma, true).splits, 4);    // 64 steps
  EXPECT_EQ(plan_attention(paged(decode(1, 4, 8, 128), 64), kMma, true).splits, 1);
  EXPECT_EQ(plan_attention(paged(decode(8, 4, 8, 8192), 64), kMma, true).splits, 4);   // 132 / 32 blocks
  EXPECT_EQ(plan_attention(paged(decode(1, 4, 8, 8192), 64), kMma, false).splits, 1);  // no workspace
  EXPECT_TRUE(plan_attention(paged(decode(3, 8, 5, 6001), 16), kMma, true).mma);       // Llama 4's group of 5
  EXPECT_TRUE(plan_attention(paged(decode(1, 8, 8, 9001, 64), 16), kMma, true).mma);   // gpt-oss

  // Not: a group of 16, 256 dims, pages of 8 keys (or none given), prefill-sized calls, no tensor cores.
  EXPECT_FALSE(plan_attention(paged(decode(1, 2, 16, 9001), 64), kMma, true).mma);
  EXPECT_FALSE(plan_attention(paged(decode(1, 2, 8, 9001, 256), 64), kMma, true).mma);
  EXPECT_FALSE(plan_attention(paged(decode(1, 4, 8, 9001), 8), kMma, true).mma);
  EXPECT_FALSE(plan_attention(decode(1, 4, 8, 9001), kMma, true).mma);
  EXPECT_FALSE(plan_attention(paged(decode(64, 4, 8, 9001), 64), kMma, true).mma);
  EXPECT_FALSE(plan_attention(paged(decode(1, 4, 8, 9001), 64), kH100, true).mma);
}

// A decode step recorded as a graph is planned for its pass shape's context (a power of 2, at least
// 256); the same step run op by op must get the same plan, or the two would differ in their last
// bits: decode calls plan for their context rounded up to a power of 2, and no plan of up to 256
// keys splits (here a batch of 4 rows of a group of 16 would otherwise split 256 keys in two).
TEST(AttentionPlan, ADecodeStepIsPlannedAsItsRecordedGraphIs) {
  EXPECT_EQ(attention_plan_context(1, 258), 512);
  EXPECT_EQ(attention_plan_context(1, 512), 512);
  EXPECT_EQ(attention_plan_context(63, 100), 128);
  EXPECT_EQ(attention_plan_context(64, 258), 258);  // prefill-sized calls are never recorded
  for (int keys = 1; keys <= 256; ++keys) {
    for (const AttentionCall& c :
         {paged(decode(1, 4, 8, keys), 64), paged(decode(1, 8, 8, keys, 64), 16), paged(decode(4, 2, 16, keys), 64)}) {
      EXPECT_EQ(plan_attention(c, kMma, true).splits, 1) << keys;
      EXPECT_EQ(plan_attention(c, kH100, true).splits, 1) << keys;
    }
  }
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
