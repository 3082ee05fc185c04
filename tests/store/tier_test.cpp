#include <gtest/gtest.h>

#include "ft/store/host_ram_tier.h"
#include "ft/store/tiered_store.h"
#include "store_test_util.h"
#include "test_support.h"

namespace ft::store {
namespace {

using testing::key;
using testing::make_state;
using testing::read_all;
using testing::same;

TEST(HostRamTier, EvictsLeastRecentlyUsedByBytesButNeverPinned) {
  HostRamTier ram(3000);
  auto save = [&](std::uint64_t id) {
    ASSERT_TRUE(ram.save(key("t", 1, id), make_state(testing::model(1), 1, {1000}, id)).is_ok());
  };
  save(1);
  save(2);
  save(3);
  ram.pin(key("t", 1, 2));
  ASSERT_TRUE(ram.lookup_header(key("t", 1, 1)).is_ok());  // 1 is now more recent than 3
  save(4);  // LRU order (old first): 2 (pinned), 3, 1
  EXPECT_FALSE(ram.contains(key("t", 1, 3)));
  EXPECT_TRUE(ram.contains(key("t", 1, 1)) && ram.contains(key("t", 1, 2)) && ram.contains(key("t", 1, 4)));
  EXPECT_EQ(ram.stats().bytes, 3000u);
  EXPECT_EQ(ram.stats().evictions, 1u);

  ASSERT_TRUE(ram.save(key("t", 1, 9), make_state(testing::model(1), 1, {5000}, 9)).is_ok());  // larger than the tier
  EXPECT_FALSE(ram.contains(key("t", 1, 9)));
  auto back = read_all(ram, key("t", 1, 4));
  ASSERT_TRUE(back.is_ok());
  EXPECT_TRUE(same(*back, make_state(testing::model(1), 1, {1000}, 4)));
}

// Pins a client never releases (abandoned sessions, cycled keys) cannot hold the tier over its
// budget: while pinned entries exceed half of it, the least recently used pinned ones make room.
TEST(HostRamTier, PinsBeyondHalfTheBudgetGiveWayOldestFirst) {
  HostRamTier ram(4000);
  for (std::uint64_t id = 1; id <= 4; ++id) {
    ASSERT_TRUE(ram.save(key("t", 1, id), make_state(testing::model(1), 1, {1000}, id)).is_ok());
    ram.pin(key("t", 1, id));
  }
  ASSERT_TRUE(ram.save(key("t", 1, 5), make_state(testing::model(1), 1, {1000}, 5)).is_ok());
  EXPECT_TRUE(ram.contains(key("t", 1, 5)));
  EXPECT_FALSE(ram.contains(key("t", 1, 1))) << "the oldest pinned entry made room";
  EXPECT_TRUE(ram.contains(key("t", 1, 2)) && ram.contains(key("t", 1, 3)) && ram.contains(key("t", 1, 4)));
  EXPECT_LE(ram.stats().bytes, 4000u);
  // Within half the budget pins hold: with 2 and 3 released, 4 is the only pin left and stays.
  ram.unpin(key("t", 1, 2));
  ram.unpin(key("t", 1, 3));
  for (std::uint64_t id = 6; id <= 9; ++id)
    ASSERT_TRUE(ram.save(key("t", 1, id), make_state(testing::model(1), 1, {1000}, id)).is_ok());
  EXPECT_TRUE(ram.contains(key("t", 1, 4)));
  EXPECT_LE(ram.stats().bytes, 4000u);
}

TEST(TieredStore, DiskHitIsPromotedToRam) {
  test::TempDir dir;
  auto store = TieredStore::open(testing::small_options(dir.path()));
  ASSERT_TRUE(store.is_ok()) << store.status().to_string();
  const StoreKey k = key("t", 1, 1);
  const ModelState s = make_state(k.model, 50, {6u << 20, 1000}, 1);  // > 4 MiB: arrives in pieces
  ASSERT_TRUE((*store)->disk().save(k, s).is_ok());
  EXPECT_FALSE((*store)->ram().contains(k));

  auto first = read_all(**store, k);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_TRUE(same(*first, s));
  EXPECT_TRUE((*store)->ram().contains(k));
  const auto disk_hits = (*store)->disk().stats().hits;
  auto second = read_all(**store, k);
  ASSERT_TRUE(second.is_ok());
  EXPECT_TRUE(same(*second, s));
  EXPECT_EQ((*store)->disk().stats().hits, disk_hits);  // served by RAM
  EXPECT_EQ((*store)->ram().stats().hits, 1u);
  EXPECT_EQ((*store)->stats().hits, 2u);
}

TEST(TieredStore, SaveAsyncIsInRamAtOnceAndOnDiskAfterFlush) {
  test::TempDir dir;
  const StoreKey k = key("t", 1, 1);
  const ModelState s = make_state(k.model, 5, {2000}, 1);
  {
    auto store = TieredStore::open(testing::small_options(dir.path()));
    ASSERT_TRUE(store.is_ok());
    ASSERT_TRUE((*store)->save_async(k, s).is_ok());
    EXPECT_TRUE((*store)->ram().contains(k));
    (*store)->flush();
    EXPECT_TRUE((*store)->disk().contains(k));
  }
  auto store = TieredStore::open(testing::small_options(dir.path()));  // RAM starts empty
  ASSERT_TRUE(store.is_ok());
  EXPECT_FALSE((*store)->ram().contains(k));
  auto back = read_all(**store, k);
  ASSERT_TRUE(back.is_ok());
  EXPECT_TRUE(same(*back, s));
}

TEST(TieredStore, DeepestLooksAcrossTiersAndDropsReachBoth) {
  test::TempDir dir;
  auto opened = TieredStore::open(testing::small_options(dir.path()));
  ASSERT_TRUE(opened.is_ok());
  TieredStore& store = **opened;
  ASSERT_TRUE(store.disk().save(key("t", 1, 1), make_state(testing::model(1), 10, {100}, 1)).is_ok());
  ASSERT_TRUE(store.ram().save(key("t", 1, 2), make_state(testing::model(1), 20, {100}, 2)).is_ok());
  const std::vector<PrefixKey> chain = {testing::prefix(1), testing::prefix(2), testing::prefix(3)};
  auto d = store.deepest("t", testing::model(1), chain);
  ASSERT_TRUE(d.is_ok() && d->has_value());
  EXPECT_EQ((*d)->index, 1u);
  EXPECT_EQ((*d)->header.tokens, 20u);

  ASSERT_TRUE(store.drop_tenant("t").is_ok());
  EXPECT_FALSE(store.contains(key("t", 1, 1)));
  EXPECT_FALSE(store.contains(key("t", 1, 2)));
  EXPECT_FALSE(store.deepest("t", testing::model(1), chain)->has_value());
}

}  // namespace
}  // namespace ft::store
