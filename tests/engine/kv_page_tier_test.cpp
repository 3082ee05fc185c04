// The hot checkpoint tier that keeps KV pages in the model's own pool (the GPU's, in VRAM): a
// checkpoint's pages outlive their sequence and a restore adopts them without a copy; one read
// from a slower tier is copied into free pages once; a sequence short of pages takes them back;
// the budget bounds what it keeps. The pool is in OffHostMemory (host RAM the code must treat as
// device memory), so this runs in CI; tests/gpu has the same on a GPU.
#include "ft/engine/kv_page_tier.h"

#include <gtest/gtest.h>

#include "ft/engine/state_checkpoint.h"
#include "ft/store/host_ram_tier.h"
#include "ft/store/rocksdb_store.h"
#include "ft/store/tier_chain.h"
#include "off_host_pools.h"
#include "test_support.h"

namespace ft::engine {
namespace {

using testing::append;
using testing::Pools;
using testing::token_bytes;

const ModelFingerprint kModel{1, 2};
store::StoreKey key(std::uint64_t n) { return {"t", kModel, store::PrefixKey{0, n}}; }

std::unique_ptr<store::MemoryTier> tier_of(const Pools& p, std::uint64_t budget = 1ull << 30) {
  auto tier = make_kv_page_tier(p.pool, budget);
  EXPECT_TRUE(tier.is_ok()) << tier.status().message();
  return std::move(tier).value();
}

std::shared_ptr<const store::ModelState> checkpoint(const SequenceState& s) {
  return std::make_shared<const store::ModelState>(to_model_state(s, kModel));
}

// The same checkpoint as a slower tier hands it over: every chunk bytes of its own.
std::shared_ptr<const store::ModelState> as_read_from_disk(const store::ModelState& state) {
  auto out = std::make_shared<store::ModelState>();
  out->tokens = state.tokens;
  out->model = state.model;
  for (const store::StateChunk& c : state.chunks) {
    const std::span<const std::byte> b = c.data.span();
    out->chunks.push_back({c.layer, c.kind, c.dtype, c.shape, std::vector<std::byte>(b.begin(), b.end())});
  }
  return out;
}

std::vector<std::vector<std::byte>> keys_of(const SequenceState& s, int64_t n) {
  std::vector<std::vector<std::byte>> out;
  for (int64_t pos = 0; pos < n; ++pos) out.push_back(token_bytes(s, pos));
  return out;
}

TEST(KvPageTier, ACheckpointsPagesOutliveItsSequenceAndARestoreAdoptsThem) {
  Pools p;
  auto tier = tier_of(p);
  EXPECT_STREQ(tier->name(), "gpu");
  SequenceState s = p.fresh();
  append(s, *p.mem, 40, 1);  // 3 pages
  const auto written = keys_of(s, 40);
  std::vector<const std::byte*> pages;
  for (const KvPageRef& page : s.pages()) pages.push_back(page->data());
  ASSERT_TRUE(tier->save_shared(key(1), checkpoint(s)).is_ok());
  s.reset();
  EXPECT_EQ(p.pool->stats().pages_used, 3u) << "the tier holds the sequence's pages";

  SequenceState r = p.fresh();
  ASSERT_TRUE(restore_model_state(*tier, key(1), r).is_ok());
  EXPECT_EQ(p.pool->stats().pages_used, 3u) << "nothing allocated: the restore took the kept pages";
  for (std::size_t i = 0; i < pages.size(); ++i) EXPECT_EQ(r.pages()[i]->data(), pages[i]);
  EXPECT_EQ(keys_of(r, 40), written);

  append(r, *p.mem, 5, 2);  // writing into kept page 2 copies it first: the checkpoint stays true
  SequenceState again = p.fresh();
  ASSERT_TRUE(restore_model_state(*tier, key(1), again).is_ok());
  EXPECT_EQ(keys_of(again, 40), written);
}

TEST(KvPageTier, ACheckpointFromASlowerTierIsCopiedIntoFreePagesOnceThenAdopted) {
  Pools elsewhere;
  SequenceState s = elsewhere.fresh();
  append(s, *elsewhere.mem, 40, 1);
  const auto written = keys_of(s, 40);
  const auto from_disk = as_read_from_disk(to_model_state(s, kModel));

  Pools p;
  auto tier = tier_of(p);
  ASSERT_TRUE(tier->save_shared(key(1), from_disk).is_ok());
  EXPECT_EQ(p.pool->stats().pages_used, 3u) << "copied into three pages of the pool";
  for (int n = 0; n < 2; ++n) {
    SequenceState r = p.fresh();
    ASSERT_TRUE(restore_model_state(*tier, key(1), r).is_ok());
    EXPECT_EQ(p.pool->stats().pages_used, 3u) << "restore " << n << " took the pages, allocated none";
    EXPECT_EQ(keys_of(r, 40), written);
  }
  // The checkpoint the tier hands out is still the bytes it was given.
  const auto held = tier->find_shared(key(1));
  ASSERT_TRUE(held);
  ASSERT_EQ(held->chunks.size(), from_disk->chunks.size());
  for (std::size_t i = 0; i < held->chunks.size(); ++i) EXPECT_TRUE(held->chunks[i].data == from_disk->chunks[i].data);
}

// A checkpoint only on disk, behind the tier: the restore reads it once into the tier's pages and
// the sequence takes those, so its pages are in the pool once (streaming it into the sequence's
// pages while the chain copied it into the tier's took them twice), and the next restore
// allocates none.
TEST(KvPageTier, ARestoreFromDiskBehindItTakesThePagesItLoadsOnce) {
  Pools elsewhere;
  SequenceState s = elsewhere.fresh();
  append(s, *elsewhere.mem, 40, 1);  // 3 pages
  const auto written = keys_of(s, 40);
  ft::test::TempDir dir;
  store::StoreOptions o;
  o.path = dir.path();
  auto disk = store::RocksDbStore::open(o);
  ASSERT_TRUE(disk.is_ok()) << disk.status().to_string();
  ASSERT_TRUE((*disk)->save(key(1), to_model_state(s, kModel)).is_ok());

  Pools p;
  std::vector<std::unique_ptr<store::StateTier>> tiers;
  tiers.push_back(tier_of(p));
  tiers.push_back(std::move(disk).value());
  store::TierChain chain(std::move(tiers), {0, 0});
  SequenceState r = p.fresh();
  ASSERT_TRUE(restore_model_state(chain, key(1), r).is_ok());
  EXPECT_EQ(keys_of(r, 40), written);
  EXPECT_TRUE(chain.tier(0).contains(key(1)));
  EXPECT_EQ(p.pool->stats().pages_used, 3u) << "the tier's pages are the sequence's";
  r.reset();
  SequenceState again = p.fresh();
  ASSERT_TRUE(restore_model_state(chain, key(1), again).is_ok());
  EXPECT_EQ(p.pool->stats().pages_used, 3u) << "taken from the tier, none allocated";
  EXPECT_EQ(keys_of(again, 40), written);
}

TEST(KvPageTier, ASequenceShortOfPagesTakesThemBackPinnedOrNot) {
  Pools p(6);
  auto tier = tier_of(p);
  SequenceState a = p.fresh();
  append(a, *p.mem, 48, 1);  // 3 of the 6 pages
  ASSERT_TRUE(tier->save_shared(key(1), checkpoint(a)).is_ok());
  tier->pin(key(1));
  a.reset();
  SequenceState b = p.fresh();
  append(b, *p.mem, 96, 2);  // all 6: three free, three the tier gives back
  EXPECT_EQ(b.position(), 96);
  EXPECT_FALSE(tier->contains(key(1)));
  EXPECT_EQ(tier->stats().evictions, 1u);
  EXPECT_EQ(p.pool->stats().exhausted, 0u);

  // Pages the tier keeps that a live sequence holds too free nothing: the pool is out of pages.
  ASSERT_TRUE(tier->save_shared(key(2), checkpoint(b)).is_ok());
  SequenceState c = p.fresh();
  EXPECT_EQ(c.reserve(1).code(), ErrorCode::kUnavailable);
  EXPECT_FALSE(tier->contains(key(2))) << "given up while trying";
}

TEST(KvPageTier, TheBudgetBoundsThePagesItKeeps) {
  Pools p;
  auto tier = tier_of(p, 4 * p.layout.page_bytes());
  for (std::uint64_t n = 1; n <= 2; ++n) {
    SequenceState s = p.fresh();
    append(s, *p.mem, 48, uint16_t(n));  // 3 pages each
    ASSERT_TRUE(tier->save_shared(key(n), checkpoint(s)).is_ok());
  }
  EXPECT_FALSE(tier->contains(key(1)));
  EXPECT_TRUE(tier->contains(key(2)));
  EXPECT_EQ(p.pool->stats().pages_used, 3u) << "the first checkpoint's pages went back with it";
}

TEST(KvPageTier, APoolOutlivesItsTierWithoutCallingIt) {
  Pools p(2);
  {
    auto tier = tier_of(p);
    SequenceState s = p.fresh();
    append(s, *p.mem, 20, 1);
    ASSERT_TRUE(tier->save_shared(key(1), checkpoint(s)).is_ok());
  }
  EXPECT_EQ(p.pool->stats().pages_used, 0u);
  SequenceState s = p.fresh();
  append(s, *p.mem, 32, 1);
  EXPECT_EQ(s.reserve(1).code(), ErrorCode::kUnavailable) << "no reclaimer left to ask";
}

// Elastic VRAM: a pool giving chunks back asks the tier for the pages that hold a top chunk.
TEST(KvPageTier, APoolGivingChunksBackTakesTheTiersPagesFirst) {
  Pools p;
  auto pool = KvPool::create(p.layout, 8 * p.layout.page_bytes(), p.mem, 2 * p.layout.page_bytes());
  ASSERT_TRUE(pool.is_ok());
  auto tier = make_kv_page_tier(*pool, 1ull << 30);
  ASSERT_TRUE(tier.is_ok());
  SequenceState a("m", *pool, {}, p.mem), b("m", *pool, {}, p.mem);
  append(a, *p.mem, 64, 1);  // pages 0-3: chunks 0 and 1
  append(b, *p.mem, 16, 2);  // page 4: chunk 2
  ASSERT_TRUE((*tier)->save_shared(key(1), checkpoint(b)).is_ok());
  b.reset();
  EXPECT_EQ((*pool)->set_capacity(2), 4u) << "chunk 2 went once the tier let page 4 go; a's pages stay";
  EXPECT_FALSE((*tier)->contains(key(1)));
  a.reset();
  EXPECT_EQ((*pool)->set_capacity(2), 2u);
}

// On the host a checkpoint's KV chunks are the pool's pages themselves, held by the RAM tier: the
// engine lends the pool that tier's checkpoints, so a sequence short of pages takes them back.
TEST(PoolReclaimer, ASequenceTakesHostPagesBackFromTheRamTier) {
  const KvLayout layout{2, 2, 8, testing::kPage, KvDType::kBf16, {}};
  auto pool = KvPool::create(layout, 6 * layout.page_bytes());
  ASSERT_TRUE(pool.is_ok());
  store::HostRamTier ram(1ull << 30);
  SequenceState a("m", *pool, {}, host_memory());
  append(a, *host_memory(), 48, 1);  // 3 of the 6 pages
  ASSERT_TRUE(ram.save_shared(key(1), checkpoint(a)).is_ok());
  a.reset();
  EXPECT_EQ((*pool)->stats().pages_used, 3u) << "the RAM tier's checkpoint holds them";
  {
    SequenceState b("m", *pool, {}, host_memory());
    EXPECT_EQ(b.reserve(96).code(), ErrorCode::kUnavailable) << "without a reclaimer";
  }
  PoolReclaimer lend(*pool, ram);
  SequenceState b("m", *pool, {}, host_memory());
  ASSERT_TRUE(b.reserve(96).is_ok());
  EXPECT_FALSE(ram.contains(key(1)));
}

TEST(KvPageTier, NeedsAPool) {
  EXPECT_EQ(make_kv_page_tier(nullptr, 1 << 20).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace ft::engine
