// TierChain: fastest tier first, write-through, a hit in a slower tier is promoted into the faster
// ones (unless larger than them), deepest across tiers, pins and drops reach every tier.
#include <gtest/gtest.h>

#include "ft/store/host_ram_tier.h"
#include "ft/store/tier_chain.h"
#include "store_test_util.h"

namespace ft::store {
namespace {

using testing::key;
using testing::make_state;
using testing::model;
using testing::prefix;

struct Chain {
  HostRamTier* fast;
  HostRamTier* slow;
  std::unique_ptr<TierChain> chain;
};

Chain make_chain(std::uint64_t fast_budget, std::uint64_t slow_budget) {
  auto fast = std::make_unique<HostRamTier>(fast_budget);
  auto slow = std::make_unique<HostRamTier>(slow_budget);
  Chain c{fast.get(), slow.get(), nullptr};
  std::vector<std::unique_ptr<StateTier>> tiers;
  tiers.push_back(std::move(fast));
  tiers.push_back(std::move(slow));
  c.chain = std::make_unique<TierChain>(std::move(tiers), std::vector<std::uint64_t>{fast_budget, slow_budget});
  return c;
}

std::vector<std::byte> read_all(StateTier& t, const StoreKey& k) {
  std::vector<std::byte> out;
  auto h = t.lookup_header(k);
  EXPECT_TRUE(h.is_ok());
  if (!h.is_ok()) return out;
  EXPECT_TRUE(t.read_chunks(k, *h, [&](const ChunkPiece& p) {
                 out.insert(out.end(), p.bytes.begin(), p.bytes.end());
                 return Status::ok();
               }).is_ok());
  return out;
}

TEST(TierChain, WritesThroughAndPromotesASlowerHit) {
  Chain c = make_chain(1000, 100000);
  const StoreKey a = key("t", 1, 1), b = key("t", 1, 2);
  ASSERT_TRUE(c.chain->save(a, make_state(model(1), 10, {300, 200}, 1)).is_ok());
  EXPECT_TRUE(c.fast->contains(a) && c.slow->contains(a));
  ASSERT_TRUE(c.chain->save(b, make_state(model(1), 20, {400, 300}, 2)).is_ok());
  EXPECT_FALSE(c.fast->contains(a)) << "evicted from the small fast tier";
  EXPECT_TRUE(c.slow->contains(a));

  const std::vector<std::byte> expected = read_all(*c.slow, a);
  EXPECT_EQ(read_all(*c.chain, a), expected);  // served by the slow tier...
  EXPECT_TRUE(c.fast->contains(a));             // ...and promoted on the way
  EXPECT_EQ(read_all(*c.fast, a), expected);
  EXPECT_EQ(c.chain->stats().hits, 1u);

  // Larger than the fast tier: served, never promoted.
  const StoreKey big = key("t", 1, 3);
  ASSERT_TRUE(c.slow->save(big, make_state(model(1), 30, {900, 900}, 3)).is_ok());
  EXPECT_EQ(read_all(*c.chain, big).size(), 1800u);
  EXPECT_FALSE(c.fast->contains(big));
}

// load_shared: a checkpoint a slower memory tier holds is handed to the faster tier (the same
// object, no copy) and returned from there; one the faster tier cannot hold is returned as the
// slower one holds it; a key no tier holds is null.
TEST(TierChain, LoadSharedPromotesFirstThenHandsOverTheFastestTiersState) {
  Chain c = make_chain(1000, 100000);
  const StoreKey a = key("t", 1, 1), big = key("t", 1, 2);
  ASSERT_TRUE(c.slow->save(a, make_state(model(1), 10, {300, 200}, 1)).is_ok());
  const auto held = c.slow->find_shared(a);
  const auto loaded = c.chain->load_shared(a);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded.get(), held.get()) << "shared, not copied";
  EXPECT_TRUE(c.fast->contains(a));
  EXPECT_EQ(c.fast->find_shared(a).get(), held.get());
  EXPECT_EQ(c.chain->stats().hits, 1u);

  ASSERT_TRUE(c.slow->save(big, make_state(model(1), 30, {900, 900}, 3)).is_ok());
  ASSERT_TRUE(c.chain->load_shared(big));
  EXPECT_FALSE(c.fast->contains(big)) << "larger than the fast tier";
  EXPECT_FALSE(c.chain->load_shared(key("t", 1, 9)));
}

TEST(TierChain, DeepestAcrossTiersAndPinsAndDropsEverywhere) {
  Chain c = make_chain(100000, 100000);
  const StoreKey shallow = key("t", 1, 1), deep = key("t", 1, 2);
  ASSERT_TRUE(c.fast->save(shallow, make_state(model(1), 10, {10}, 1)).is_ok());
  ASSERT_TRUE(c.slow->save(deep, make_state(model(1), 20, {10}, 2)).is_ok());
  const PrefixKey keys[] = {prefix(1), prefix(2), prefix(3)};
  auto found = c.chain->deepest("t", model(1), keys);
  ASSERT_TRUE(found.is_ok() && found->has_value());
  EXPECT_EQ((*found)->index, 1u);
  EXPECT_EQ((*found)->header.tokens, 20u);
  EXPECT_FALSE(c.chain->deepest("other", model(1), keys)->has_value());

  c.chain->pin(deep);  // reaches both tiers: the fast one may not evict it either
  ASSERT_TRUE(c.chain->save(deep, make_state(model(1), 20, {10}, 2)).is_ok());
  ASSERT_TRUE(c.chain->drop_tenant("t").is_ok());
  EXPECT_FALSE(c.fast->contains(shallow) || c.slow->contains(deep) || c.fast->contains(deep));
}

}  // namespace
}  // namespace ft::store
