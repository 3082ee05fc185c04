#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>

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

// What a holder of memory others need calls (the engine's KV pool asking its page tier): the least
// recently used unpinned entry goes first, then pinned ones, then there is nothing left to give.
TEST(HostRamTier, EvictLeastRecentTakesUnpinnedFirstThenPinned) {
  HostRamTier ram(1 << 20);
  for (std::uint64_t id = 1; id <= 3; ++id)
    ASSERT_TRUE(ram.save(key("t", 1, id), make_state(testing::model(1), 1, {1000}, id)).is_ok());
  ram.pin(key("t", 1, 1));  // the oldest, pinned
  ASSERT_TRUE(ram.evict_least_recent());
  EXPECT_FALSE(ram.contains(key("t", 1, 2)));
  ASSERT_TRUE(ram.evict_least_recent());
  EXPECT_FALSE(ram.contains(key("t", 1, 3)));
  ASSERT_TRUE(ram.evict_least_recent());
  EXPECT_FALSE(ram.contains(key("t", 1, 1)));
  EXPECT_FALSE(ram.evict_least_recent());
  EXPECT_EQ(ram.stats().evictions, 3u);
  EXPECT_EQ(ram.stats().bytes, 0u);
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

// Bytes still arriving when the state is saved (as a GPU page copied to the host by an
// asynchronous copy): they are in place only once wait_ready() is called, which counts the calls.
class ArrivingBytes final : public ChunkOwner {
 public:
  explicit ArrivingBytes(std::vector<std::byte> final_bytes) : final_(std::move(final_bytes)), bytes_(final_.size()) {}
  std::span<const std::byte> view() const { return bytes_; }
  void wait_ready() const override {
    std::call_once(arrived_, [this] { std::copy(final_.begin(), final_.end(), bytes_.begin()); });
    ++waits;
  }
  mutable std::atomic<int> waits{0};

 private:
  std::vector<std::byte> final_;
  mutable std::vector<std::byte> bytes_;
  mutable std::once_flag arrived_;
};

ModelState arriving_state(const ModelState& like, std::vector<std::shared_ptr<ArrivingBytes>>& owners) {
  ModelState s = like;
  for (StateChunk& c : s.chunks) {
    owners.push_back(
        std::make_shared<ArrivingBytes>(std::vector<std::byte>(c.data.span().begin(), c.data.span().end())));
    c.data = ChunkBytes::shared(owners.back()->view(), owners.back());
  }
  return s;
}

// A save into RAM neither reads nor waits for the bytes (a checkpoint must not stall the pass after
// it); the first reader waits, and sees them as they arrived; a write behind to disk waits too.
TEST(HostRamTier, SavingBytesStillArrivingDoesNotWaitForThem) {
  const StoreKey k = key("t", 1, 1);
  const ModelState expected = make_state(k.model, 5, {3000, 500}, 7);
  std::vector<std::shared_ptr<ArrivingBytes>> owners;
  HostRamTier ram(1 << 20);
  ASSERT_TRUE(ram.save_shared(k, std::make_shared<const ModelState>(arriving_state(expected, owners))).is_ok());
  for (const auto& o : owners) EXPECT_EQ(o->waits.load(), 0);

  auto header = ram.lookup_header(k);
  ASSERT_TRUE(header.is_ok());
  for (const auto& o : owners) EXPECT_GE(o->waits.load(), 1);
  for (std::size_t i = 0; i < expected.chunks.size(); ++i)
    EXPECT_EQ(header->chunks[i].checksum, chunk_checksum(expected.chunks[i].data)) << i;
  auto back = read_all(ram, k);
  ASSERT_TRUE(back.is_ok());
  EXPECT_TRUE(same(*back, expected));

  test::TempDir dir;
  std::vector<std::shared_ptr<ArrivingBytes>> disk_owners;
  {
    auto store = TieredStore::open(testing::small_options(dir.path()));
    ASSERT_TRUE(store.is_ok());
    ASSERT_TRUE((*store)->save_async(k, arriving_state(expected, disk_owners)).is_ok());
    (*store)->flush();
  }
  auto store = TieredStore::open(testing::small_options(dir.path()));  // from disk alone
  ASSERT_TRUE(store.is_ok());
  auto from_disk = read_all(**store, k);
  ASSERT_TRUE(from_disk.is_ok()) << from_disk.status().to_string();
  EXPECT_TRUE(same(*from_disk, expected));
}

// One growing sequence's checkpoints hold the same KV pages (views of one owner's memory): the RAM
// tier counts each page once against its budget, so they all fit where counted per checkpoint
// they would not, and a page's bytes leave the count with the last checkpoint holding it.
TEST(HostRamTier, PagesSharedByCheckpointsCountOnce) {
  constexpr std::size_t kPage = 64 << 10, kOwn = 1000;
  std::vector<std::shared_ptr<ArrivingBytes>> pages;
  for (std::uint64_t j = 0; j < 4; ++j) pages.push_back(std::make_shared<ArrivingBytes>(testing::pattern(kPage, j)));
  auto checkpoint = [&](std::size_t n) {  // after n pages
    ModelState s = make_state(testing::model(1), 64 * n, {kOwn}, n);
    for (std::size_t j = 0; j < n; ++j)
      s.chunks.push_back(testing::page_chunk(j, ChunkBytes::shared(pages[j]->view(), pages[j])));
    return std::make_shared<const ModelState>(std::move(s));
  };
  // Room for 4 pages and the checkpoints' own bytes; counted per checkpoint, 1 + 2 + 3 + 4 pages.
  HostRamTier ram(4 * kPage + 4 * kOwn);
  for (std::size_t n = 1; n <= 4; ++n) ASSERT_TRUE(ram.save_shared(key("t", 1, n), checkpoint(n)).is_ok());
  EXPECT_EQ(ram.stats().entries, 4u);
  EXPECT_EQ(ram.stats().evictions, 0u);
  EXPECT_EQ(ram.stats().bytes, 4 * kPage + 4 * kOwn);
  EXPECT_EQ(ram.stats().logical_bytes, 10 * kPage + 4 * kOwn);
  ASSERT_EQ(ram.usage_by_tenant().size(), 1u);
  EXPECT_EQ(ram.usage_by_tenant()[0].bytes, 4 * kPage + 4 * kOwn);
  for (const auto& p : pages) EXPECT_EQ(p->waits.load(), 0);  // counting is not reading

  ASSERT_TRUE(ram.erase(key("t", 1, 4)).is_ok());  // page 3 was its alone
  EXPECT_EQ(ram.stats().bytes, 3 * kPage + 3 * kOwn);
  ASSERT_TRUE(ram.erase(key("t", 1, 1)).is_ok());  // page 0 is still held by 2 and 3
  EXPECT_EQ(ram.stats().bytes, 3 * kPage + 2 * kOwn);

  // A copy of the same bytes is other memory: it counts in full.
  HostRamTier big(1 << 30);
  ASSERT_TRUE(big.save_shared(key("t", 1, 2), checkpoint(2)).is_ok());
  ModelState copy = *checkpoint(2);
  for (StateChunk& c : copy.chunks) c.data = std::vector<std::byte>(c.data.span().begin(), c.data.span().end());
  ASSERT_TRUE(big.save(key("t", 1, 9), copy).is_ok());
  EXPECT_EQ(big.stats().bytes, 2 * (2 * kPage + kOwn));
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
