// KV pages stored once: the checkpoints of one growing sequence share their first pages, and the
// RocksDB store keeps each page once however many checkpoints hold it, deletes it with the last
// of them, counts it once against the budget, and never serves a checkpoint whose page is gone or
// damaged.
#include <gtest/gtest.h>

#include "ft/store/rocksdb_store.h"
#include "ft/store/store_key.h"
#include "raw_store_db.h"
#include "store_test_util.h"
#include "test_support.h"

namespace ft::store {
namespace {

using testing::add_pages;
using testing::key;
using testing::make_state;
using testing::read_all;
using testing::same;

constexpr std::size_t kPage = 96 << 10;  // two pieces of 64 KiB: a page spans pieces too

StoreOptions page_options(const std::filesystem::path& path) {
  StoreOptions o = testing::small_options(path);
  o.piece_bytes = 64 << 10;
  return o;
}

// The checkpoint of a sequence after `pages` pages: those pages and its own recurrent state.
ModelState growing(std::size_t pages, std::uint64_t sequence = 0) {
  ModelState s = make_state(testing::model(1), pages * 64, {4096}, 1000 * sequence + pages);
  add_pages(s, pages, kPage, sequence);
  return s;
}

std::unique_ptr<RocksDbStore> open_store(const StoreOptions& o) {
  auto s = RocksDbStore::open(o);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return s.is_ok() ? std::move(s).value() : nullptr;
}

// The pieces in the pages column family, read from the closed store's database.
std::vector<std::string> stored_piece_keys(const std::filesystem::path& path) {
  return testing::RawStoreDb(path).keys("pages");
}

std::uint64_t header_bytes(const ModelState& s) { return encode_header(make_header(s, 64 << 10)).size(); }

TEST(RocksDbStorePages, AGrowingSequenceStoresEachPageOnce) {
  test::TempDir dir;
  auto store = open_store(page_options(dir.path()));
  ASSERT_NE(store, nullptr);
  std::uint64_t own = 0, logical = 0;
  for (std::size_t n = 1; n <= 4; ++n) {
    const ModelState s = growing(n);
    ASSERT_TRUE(store->save(key("t", 1, n), s).is_ok());
    own += header_bytes(s) + 4096;
    logical += header_bytes(s) + s.payload_bytes();
  }
  EXPECT_EQ(store->stats().bytes, own + 4 * kPage);  // 4 pages, not 1 + 2 + 3 + 4
  EXPECT_EQ(store->stats().logical_bytes, logical);
  ASSERT_EQ(store->usage_by_tenant().size(), 1u);
  EXPECT_EQ(store->usage_by_tenant()[0].bytes, own + 4 * kPage);
  for (std::size_t n = 1; n <= 4; ++n) {
    auto back = read_all(*store, key("t", 1, n));
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_TRUE(same(*back, growing(n))) << n;
  }
  store.reset();
  EXPECT_EQ(stored_piece_keys(dir.path()).size(), 4u * 2);  // two pieces a page
}

TEST(RocksDbStorePages, APageGoesWithTheLastCheckpointHoldingIt) {
  test::TempDir dir;
  auto store = open_store(page_options(dir.path()));
  ASSERT_NE(store, nullptr);
  for (std::size_t n = 1; n <= 3; ++n) ASSERT_TRUE(store->save(key("t", 1, n), growing(n)).is_ok());
  const std::uint64_t before = store->stats().bytes;

  ASSERT_TRUE(store->erase(key("t", 1, 3)).is_ok());  // page 2 was its alone
  EXPECT_EQ(store->stats().bytes, before - header_bytes(growing(3)) - 4096 - kPage);
  ASSERT_TRUE(store->erase(key("t", 1, 1)).is_ok());  // page 0 is still checkpoint 2's
  auto two = read_all(*store, key("t", 1, 2));
  ASSERT_TRUE(two.is_ok()) << two.status().to_string();
  EXPECT_TRUE(same(*two, growing(2)));
  ASSERT_TRUE(store->erase(key("t", 1, 2)).is_ok());
  EXPECT_EQ(store->stats().bytes, 0u);
  EXPECT_EQ(store->stats().entries, 0u);
  store.reset();
  EXPECT_TRUE(stored_piece_keys(dir.path()).empty());
}

TEST(RocksDbStorePages, ReplacingAKeyKeepsThePagesTheNewStateHolds) {
  test::TempDir dir;
  auto store = open_store(page_options(dir.path()));
  ASSERT_NE(store, nullptr);
  const StoreKey k = key("t", 1, 7);
  ASSERT_TRUE(store->save(k, growing(2)).is_ok());
  ASSERT_TRUE(store->save(k, growing(3)).is_ok());
  auto back = read_all(*store, k);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_TRUE(same(*back, growing(3)));
  EXPECT_EQ(store->stats().bytes, header_bytes(growing(3)) + 4096 + 3 * kPage);
  ASSERT_TRUE(store->save(k, growing(1, /*sequence=*/5)).is_ok());  // nothing shared with before
  EXPECT_EQ(store->stats().bytes, header_bytes(growing(1)) + 4096 + kPage);
  store.reset();
  EXPECT_EQ(stored_piece_keys(dir.path()).size(), 2u);
}

TEST(RocksDbStorePages, TheSamePageTwiceInOneStateIsStoredOnceAndReadTwice) {
  test::TempDir dir;
  auto store = open_store(page_options(dir.path()));
  ASSERT_NE(store, nullptr);
  ModelState s = growing(1);
  add_pages(s, 1, kPage);  // page 0 again
  ASSERT_TRUE(store->save(key("t", 1, 1), s).is_ok());
  EXPECT_EQ(store->stats().bytes, header_bytes(s) + 4096 + kPage);
  auto back = read_all(*store, key("t", 1, 1));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_TRUE(same(*back, s));
}

TEST(RocksDbStorePages, SharingSurvivesReopenAndTheBudgetCountsEachPageOnce) {
  test::TempDir dir;
  StoreOptions o = page_options(dir.path());
  // Room for 6 pages and a few headers: the 5 checkpoints of one sequence up to 5 pages fit
  // (5 pages stored once), where counted per checkpoint (15 pages) they would not.
  o.byte_budget = 6 * kPage + 5 * (4096 + 1024);
  {
    auto store = open_store(o);
    ASSERT_NE(store, nullptr);
    for (std::size_t n = 1; n <= 5; ++n) ASSERT_TRUE(store->save(key("t", 1, n), growing(n)).is_ok());
    EXPECT_EQ(store->stats().entries, 5u);
    EXPECT_EQ(store->stats().evictions, 0u);
  }
  auto store = open_store(o);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->stats().entries, 5u);
  std::uint64_t own = 0;
  for (std::size_t n = 1; n <= 5; ++n) own += header_bytes(growing(n)) + 4096;
  EXPECT_EQ(store->stats().bytes, own + 5 * kPage);
  for (std::size_t n = 1; n <= 5; ++n) {
    auto back = read_all(*store, key("t", 1, n));
    ASSERT_TRUE(back.is_ok()) << n << ": " << back.status().to_string();
    EXPECT_TRUE(same(*back, growing(n))) << n;
  }
  // A second sequence needs room: the first one's checkpoints are evicted until it fits.
  ASSERT_TRUE(store->save(key("t", 1, 100), growing(3, /*sequence=*/9)).is_ok());
  EXPECT_GT(store->stats().evictions, 0u);
  EXPECT_LE(store->stats().bytes, o.byte_budget);
  for (std::size_t n = 1; n <= 5; ++n) {
    if (!store->contains(key("t", 1, n))) continue;
    auto back = read_all(*store, key("t", 1, n));  // what is left is whole
    ASSERT_TRUE(back.is_ok()) << n << ": " << back.status().to_string();
    EXPECT_TRUE(same(*back, growing(n))) << n;
  }
  EXPECT_EQ(store->verify_all().corrupt, 0u);
}

TEST(RocksDbStorePages, TenantsDoNotShareAndDropsTakeTheirPages) {
  test::TempDir dir;
  auto store = open_store(page_options(dir.path()));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->save(key("a", 1, 1), growing(2)).is_ok());
  ASSERT_TRUE(store->save(key("b", 1, 1), growing(2)).is_ok());  // the same bytes, another tenant
  const std::uint64_t each = header_bytes(growing(2)) + 4096 + 2 * kPage;
  EXPECT_EQ(store->stats().bytes, 2 * each);
  ASSERT_TRUE(store->drop_tenant("a").is_ok());
  EXPECT_EQ(store->stats().bytes, each);
  auto back = read_all(*store, key("b", 1, 1));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_TRUE(same(*back, growing(2)));
  ASSERT_TRUE(store->drop_model("b", testing::model(1)).is_ok());
  EXPECT_EQ(store->stats().bytes, 0u);
  store.reset();
  EXPECT_TRUE(stored_piece_keys(dir.path()).empty());
}

TEST(RocksDbStorePages, ADamagedSharedPageIsAMissForEveryHolderNeverWrongData) {
  test::TempDir dir;
  {
    auto store = open_store(page_options(dir.path()));
    ASSERT_NE(store, nullptr);
    for (std::size_t n = 1; n <= 3; ++n) ASSERT_TRUE(store->save(key("t", 1, n), growing(n)).is_ok());
  }
  // Page 0's first piece: every checkpoint holds it. Flip one byte of it.
  {
    testing::RawStoreDb raw(dir.path());
    ASSERT_TRUE(raw.ok());
    const ModelState one = growing(1);
    const std::string head(reinterpret_cast<const char*>(one.chunks[1].data.data()), 64);
    int flipped = 0;
    for (const std::string& k : raw.keys("pages")) {
      std::string v;
      ASSERT_TRUE(raw.db().Get({}, raw.cf("pages"), k, &v).ok());
      if (v.size() != (64u << 10) || v.compare(0, head.size(), head) != 0) continue;
      v[100] = static_cast<char>(v[100] ^ 0x10);
      ASSERT_TRUE(raw.db().Put({}, raw.cf("pages"), k, v).ok());
      ++flipped;
    }
    EXPECT_EQ(flipped, 1);
  }
  auto store = open_store(page_options(dir.path()));
  ASSERT_NE(store, nullptr);
  for (std::size_t n = 1; n <= 3; ++n) {
    auto back = read_all(*store, key("t", 1, n));
    EXPECT_EQ(back.status().code(), ErrorCode::kNotFound) << n;
    EXPECT_FALSE(store->contains(key("t", 1, n))) << n;
  }
  EXPECT_EQ(store->stats().corruptions, 3u);
  EXPECT_EQ(store->stats().bytes, 0u);
}

TEST(RocksDbStorePages, PagesNoCheckpointHoldsAreRemovedAtOpen) {
  test::TempDir dir;
  {
    auto store = open_store(page_options(dir.path()));
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->save(key("t", 1, 1), growing(2)).is_ok());
    ASSERT_TRUE(store->save(key("t", 1, 2), growing(3)).is_ok());
  }
  // A save that did not finish leaves pages without a header: here, checkpoint 2's header goes.
  {
    testing::RawStoreDb raw(dir.path());
    ASSERT_TRUE(raw.ok());
    ASSERT_TRUE(raw.db().Delete({}, raw.cf("meta"), encode_store_key(key("t", 1, 2))).ok());
  }
  EXPECT_EQ(stored_piece_keys(dir.path()).size(), 3u * 2);
  {
    auto store = open_store(page_options(dir.path()));
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->stats().entries, 1u);
    EXPECT_EQ(store->stats().bytes, header_bytes(growing(2)) + 4096 + 2 * kPage);
    auto back = read_all(*store, key("t", 1, 1));
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_TRUE(same(*back, growing(2)));
  }
  EXPECT_EQ(stored_piece_keys(dir.path()).size(), 2u * 2);  // page 2 is gone
}

}  // namespace
}  // namespace ft::store
