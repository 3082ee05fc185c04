// RocksDbStore::list: what `freetoken ctl checkpoints list` shows, straight from the index.
#include <gtest/gtest.h>

#include "ft/store/rocksdb_store.h"
#include "store_test_util.h"
#include "test_support.h"

namespace ft::store {
namespace {

using testing::key;
using testing::make_state;
using testing::small_options;

std::unique_ptr<RocksDbStore> open_store(const StoreOptions& o) {
  auto s = RocksDbStore::open(o);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return s.is_ok() ? std::move(s).value() : nullptr;
}

// A store whose clock reads *now, so last-use times are exact.
StoreOptions options_with_clock(const std::filesystem::path& dir, std::int64_t* now) {
  StoreOptions o = small_options(dir);
  o.clock_ms = [now] { return *now; };
  return o;
}

TEST(RocksDbStoreList, ListsEveryEntryInKeyOrderWithTokensBytesAndLastUse) {
  test::TempDir dir;
  std::int64_t now = 1'000'000;
  auto store = open_store(options_with_clock(dir.path(), &now));
  const std::vector<StoreKey> keys = {key("b", 1, 3), key("a", 2, 1), key("ab", 1, 2), key("a", 1, 2)};
  for (const auto& k : keys) {  // tokens = prefix number, payload 100 x that, 1 s apart
    now += 1000;
    ASSERT_TRUE(store->save(k, make_state(k.model, k.prefix.lo, {100 * k.prefix.lo}, 1)).is_ok());
  }
  store->pin(key("ab", 1, 2));

  const std::vector<EntryInfo> all = store->list();
  ASSERT_EQ(all.size(), 4u);
  // Key order: tenant length byte first, so "a" < "b" < "ab"; then model, then prefix.
  EXPECT_EQ(all[0].key, key("a", 1, 2));
  EXPECT_EQ(all[1].key, key("a", 2, 1));
  EXPECT_EQ(all[2].key, key("b", 1, 3));
  EXPECT_EQ(all[3].key, key("ab", 1, 2));
  std::uint64_t total = 0;
  for (const auto& e : all) {
    EXPECT_EQ(e.tokens, e.key.prefix.lo);
    EXPECT_GT(e.bytes, 100 * e.key.prefix.lo);  // payload + header
    EXPECT_EQ(e.pinned, e.key == key("ab", 1, 2));
    total += e.bytes;
  }
  EXPECT_EQ(total, store->stats().bytes);
  EXPECT_EQ(all[0].last_use_ms, 1'004'000);  // saved last
  EXPECT_EQ(all[2].last_use_ms, 1'001'000);  // saved first
}

TEST(RocksDbStoreList, TenantFilterIsExact) {
  test::TempDir dir;
  auto store = open_store(small_options(dir.path()));
  for (const auto& k : {key("a", 1, 1), key("a", 2, 2), key("ab", 1, 1)}) {
    ASSERT_TRUE(store->save(k, make_state(k.model, 1, {10}, 1)).is_ok());
  }
  const auto a = store->list("a");
  ASSERT_EQ(a.size(), 2u);  // "ab" shares the bytes "a" but is another tenant
  EXPECT_EQ(a[0].key.tenant, "a");
  EXPECT_EQ(a[1].key.tenant, "a");
  EXPECT_EQ(store->list("ab").size(), 1u);
  EXPECT_TRUE(store->list("zzz").empty());
  EXPECT_TRUE(store->list("").empty());  // not a valid tenant
}

TEST(RocksDbStoreList, SurvivesReopenAndDoesNotCountAsUse) {
  test::TempDir dir;
  std::int64_t now = 5000;
  {
    auto store = open_store(options_with_clock(dir.path(), &now));
    ASSERT_TRUE(store->save(key("t", 1, 7), make_state(testing::model(1), 7, {64}, 1)).is_ok());
  }
  now = 9000;
  auto store = open_store(options_with_clock(dir.path(), &now));
  auto entries = store->list();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].key, key("t", 1, 7));
  EXPECT_EQ(entries[0].tokens, 7u);
  EXPECT_EQ(entries[0].last_use_ms, 5000);
  EXPECT_EQ(store->stats().hits + store->stats().misses, 0u);
  EXPECT_EQ(store->list()[0].last_use_ms, 5000);
}

}  // namespace
}  // namespace ft::store
