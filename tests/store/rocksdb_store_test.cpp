#include "ft/store/rocksdb_store.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <sys/stat.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>

#include "ft/store/store_key.h"
#include "raw_store_db.h"
#include "store_test_util.h"
#include "test_support.h"

namespace ft::store {
namespace {

using testing::key;
using testing::make_state;
using testing::read_all;
using testing::same;
using testing::small_options;

std::unique_ptr<RocksDbStore> open_store(const StoreOptions& o) {
  auto s = RocksDbStore::open(o);
  EXPECT_TRUE(s.is_ok()) << s.status().to_string();
  return s.is_ok() ? std::move(s).value() : nullptr;
}

// Opens the database behind a (closed) store directly, the way a disk fault would meet it.
void with_raw_db(const std::filesystem::path& path,
                 const std::function<void(rocksdb::DB&, rocksdb::ColumnFamilyHandle* meta,
                                          rocksdb::ColumnFamilyHandle* blobs)>& fn) {
  testing::RawStoreDb raw(path);
  ASSERT_TRUE(raw.ok());
  fn(raw.db(), raw.cf("meta"), raw.cf("blobs"));
}

// Flips one byte in the first stored blob piece of `k`.
void flip_blob_byte(const std::filesystem::path& path, const StoreKey& k) {
  with_raw_db(path, [&](rocksdb::DB& db, rocksdb::ColumnFamilyHandle*, rocksdb::ColumnFamilyHandle* blobs) {
    const std::string bk = blob_key(encode_store_key(k), 0, 0);
    std::string v;
    ASSERT_TRUE(db.Get({}, blobs, bk, &v).ok());
    v[v.size() / 2] = static_cast<char>(v[v.size() / 2] ^ 0x01);
    ASSERT_TRUE(db.Put({}, blobs, bk, v).ok());
  });
}

TEST(RocksDbStore, RoundTripsMultiChunkStateSplitIntoPieces) {
  test::TempDir dir;
  StoreOptions o = small_options(dir.path());
  o.write_batch_bytes = 1 << 20;  // several batches: exercises the pending-marker path
  auto store = open_store(o);
  // attention KV of 9.6 MB (> 4 MiB: three pieces), plus recurrent and conv state.
  ModelState s = make_state(testing::model(1), 1200, {}, 0);
  s.chunks.push_back({0, ChunkKind::kAttentionKv, DType::kBf16, {2, 8, 1200, 250}, testing::pattern(2 * 8 * 1200 * 250 * 2, 1)});
  s.chunks.push_back({1, ChunkKind::kRecurrent, DType::kF32, {16, 64, 64}, testing::pattern(16 * 64 * 64 * 4, 2)});
  s.chunks.push_back({1, ChunkKind::kConv, DType::kBf16, {3, 512}, testing::pattern(3 * 512 * 2, 3)});
  const StoreKey k = key("t1", 1, 42);
  ASSERT_TRUE(store->save(k, s).is_ok());

  auto h = store->lookup_header(k);
  ASSERT_TRUE(h.is_ok()) << h.status().to_string();
  EXPECT_EQ(h->tokens, 1200u);
  EXPECT_EQ(h->chunks.size(), 3u);
  EXPECT_EQ(h->piece_count(0), 3u);
  std::vector<std::pair<std::size_t, std::uint64_t>> seen;  // (chunk, offset) in delivery order
  ASSERT_TRUE(store->read_chunks(k, *h, [&](const ChunkPiece& p) {
    seen.emplace_back(p.chunk_index, p.offset);
    return Status::ok();
  }).is_ok());
  const std::vector<std::pair<std::size_t, std::uint64_t>> want = {{0, 0}, {0, 4u << 20}, {0, 8u << 20}, {1, 0}, {2, 0}};
  EXPECT_EQ(seen, want);

  auto back = read_all(*store, k);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_TRUE(same(*back, s));
  EXPECT_EQ(store->stats().entries, 1u);
  EXPECT_GT(store->stats().bytes, s.payload_bytes());

  // A sink error aborts the read and is passed through; the entry stays.
  EXPECT_EQ(store->read_chunks(k, *h, [](const ChunkPiece&) { return unavailable("buffer gone"); }).code(),
            ErrorCode::kUnavailable);
  EXPECT_TRUE(store->contains(k));
}

TEST(RocksDbStore, ReplacingAKeyLeavesOnlyTheNewState) {
  test::TempDir dir;
  StoreOptions o = small_options(dir.path());
  o.piece_bytes = 1000;
  auto store = open_store(o);
  const StoreKey k = key("t", 1, 1);
  ASSERT_TRUE(store->save(k, make_state(k.model, 10, {5000, 5000}, 1)).is_ok());
  auto old_header = store->lookup_header(k);
  const ModelState newer = make_state(k.model, 10, {2500}, 2);
  ASSERT_TRUE(store->save(k, newer).is_ok());
  // A reader holding the old header is told the entry changed, and the entry is not dropped.
  EXPECT_EQ(store->read_chunks(k, *old_header, [](const ChunkPiece&) { return Status::ok(); }).code(),
            ErrorCode::kNotFound);
  auto back = read_all(*store, k);
  ASSERT_TRUE(back.is_ok());
  EXPECT_TRUE(same(*back, newer));
  EXPECT_EQ(store->stats().corruptions, 0u);
  EXPECT_EQ(store->verify_all().ok, 1u);
}

TEST(RocksDbStore, DeepestReturnsTheDeepestKeyHeld) {
  test::TempDir dir;
  auto store = open_store(small_options(dir.path()));
  std::vector<PrefixKey> chain;
  for (std::uint64_t i = 1; i <= 5; ++i) chain.push_back(testing::prefix(i));
  for (std::uint64_t i : {1, 3}) ASSERT_TRUE(store->save(key("t", 1, i), make_state(testing::model(1), i * 10, {100}, i)).is_ok());

  auto d = store->deepest("t", testing::model(1), chain);
  ASSERT_TRUE(d.is_ok());
  ASSERT_TRUE(d->has_value());
  EXPECT_EQ((*d)->index, 2u);
  EXPECT_EQ((*d)->key, testing::prefix(3));
  EXPECT_EQ((*d)->header.tokens, 30u);

  auto none = store->deepest("t", testing::model(1), std::span(chain).subspan(3));
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->has_value());
  auto other_model = store->deepest("t", testing::model(2), chain);
  EXPECT_FALSE(other_model->has_value());
  EXPECT_EQ(store->stats().hits, 1u);
  EXPECT_EQ(store->stats().misses, 2u);
}

TEST(RocksDbStore, TenantsAreIsolated) {
  test::TempDir dir;
  auto store = open_store(small_options(dir.path()));
  ASSERT_TRUE(store->save(key("alice", 1, 7), make_state(testing::model(1), 5, {64}, 1)).is_ok());
  EXPECT_EQ(store->lookup_header(key("bob", 1, 7)).status().code(), ErrorCode::kNotFound);
  EXPECT_FALSE(store->contains(key("alic", 1, 7)));
  const PrefixKey p = testing::prefix(7);
  EXPECT_FALSE(store->deepest("bob", testing::model(1), std::span(&p, 1))->has_value());
  EXPECT_TRUE(store->lookup_header(key("alice", 1, 7)).is_ok());
}

TEST(RocksDbStore, PersistsAcrossReopen) {
  test::TempDir dir;
  const ModelState s = make_state(testing::model(3), 99, {10000, 300, 7}, 5);
  std::uint64_t bytes = 0;
  {
    auto store = open_store(small_options(dir.path()));
    ASSERT_TRUE(store->save(key("t", 3, 1), s).is_ok());
    bytes = store->stats().bytes;
  }
  auto store = open_store(small_options(dir.path()));
  EXPECT_EQ(store->stats().entries, 1u);
  EXPECT_EQ(store->stats().bytes, bytes);
  auto back = read_all(*store, key("t", 3, 1));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_TRUE(same(*back, s));
}

// Model state gives back the prompts it came from: the store's directory is its owner's alone,
// and a store path that is a link to elsewhere is refused.
TEST(RocksDbStore, ItsDirectoryIsOwnerOnly) {
  test::TempDir dir;
  const auto path = dir.path() / "new" / "store";
  { auto store = open_store(small_options(path)); }
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const auto link = dir.path() / "link";
  std::filesystem::create_directory_symlink(path, link);
  auto refused = RocksDbStore::open(small_options(link));
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("symbolic link"), std::string::npos) << refused.status().message();
}

TEST(RocksDbStore, ClosingFlushesIntoBlobFilesNotJustTheWal) {
  test::TempDir dir;
  {
    auto store = open_store(small_options(dir.path()));
    ASSERT_TRUE(store->save(key("t", 3, 1), make_state(testing::model(3), 99, {100000, 300}, 5)).is_ok());
  }
  // A clean close leaves the payload in blob files: the next open need not replay a large WAL.
  std::uintmax_t blob_bytes = 0, wal_bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    if (e.path().extension() == ".blob") blob_bytes += e.file_size();
    if (e.path().extension() == ".log") wal_bytes += e.file_size();
  }
  EXPECT_GE(blob_bytes, 100000u);
  EXPECT_LT(wal_bytes, 100000u);
}

TEST(RocksDbStore, FlippedBlobByteIsAMissAndTheEntryIsRemoved) {
  test::TempDir dir;
  const StoreKey k = key("t", 1, 1);
  {
    auto store = open_store(small_options(dir.path()));
    ASSERT_TRUE(store->save(k, make_state(k.model, 10, {20000, 100}, 1)).is_ok());
  }
  flip_blob_byte(dir.path(), k);
  {
    auto store = open_store(small_options(dir.path()));
    auto h = store->lookup_header(k);  // the header itself is intact
    ASSERT_TRUE(h.is_ok());
    bool delivered_after_failure = false;
    const Status st = store->read_chunks(k, *h, [&](const ChunkPiece& p) {
      delivered_after_failure = delivered_after_failure || p.chunk_index > 0;
      return Status::ok();
    });
    EXPECT_EQ(st.code(), ErrorCode::kNotFound) << st.to_string();
    EXPECT_FALSE(delivered_after_failure);  // stops at the bad chunk
    EXPECT_FALSE(store->contains(k));
    EXPECT_EQ(store->lookup_header(k).status().code(), ErrorCode::kNotFound);
    EXPECT_EQ(store->stats().corruptions, 1u);
    EXPECT_EQ(store->stats().entries, 0u);
  }
  auto store = open_store(small_options(dir.path()));  // and it stays removed
  EXPECT_EQ(store->stats().entries, 0u);
}

TEST(RocksDbStore, MissingPieceIsAMiss) {
  test::TempDir dir;
  StoreOptions o = small_options(dir.path());
  o.piece_bytes = 4096;
  const StoreKey k = key("t", 1, 1);
  { ASSERT_TRUE(open_store(o)->save(k, make_state(k.model, 10, {20000}, 1)).is_ok()); }
  with_raw_db(dir.path(), [&](rocksdb::DB& db, rocksdb::ColumnFamilyHandle*, rocksdb::ColumnFamilyHandle* blobs) {
    ASSERT_TRUE(db.Delete({}, blobs, blob_key(encode_store_key(k), 0, 3)).ok());
  });
  auto store = open_store(o);
  EXPECT_EQ(read_all(*store, k).status().code(), ErrorCode::kNotFound);
  EXPECT_FALSE(store->contains(k));
}

TEST(RocksDbStore, VersionMismatchOrBadHeaderIsAMiss) {
  test::TempDir dir;
  const StoreKey newer = key("t", 1, 1), broken = key("t", 1, 2), good = key("t", 1, 3);
  {
    auto store = open_store(small_options(dir.path()));
    for (const auto& k : {newer, broken, good}) ASSERT_TRUE(store->save(k, make_state(k.model, 10, {500}, 1)).is_ok());
  }
  with_raw_db(dir.path(), [&](rocksdb::DB& db, rocksdb::ColumnFamilyHandle* meta, rocksdb::ColumnFamilyHandle*) {
    std::string v;
    ASSERT_TRUE(db.Get({}, meta, encode_store_key(newer), &v).ok());
    auto h = decode_header(v);
    ASSERT_TRUE(h.is_ok());
    h->format_version = kCheckpointFormatVersion + 1;  // a valid header of a format we do not read
    ASSERT_TRUE(db.Put({}, meta, encode_store_key(newer), encode_header(*h)).ok());
    ASSERT_TRUE(db.Get({}, meta, encode_store_key(broken), &v).ok());
    v[10] = static_cast<char>(v[10] ^ 0x40);
    ASSERT_TRUE(db.Put({}, meta, encode_store_key(broken), v).ok());
  });
  auto store = open_store(small_options(dir.path()));
  EXPECT_EQ(store->lookup_header(newer).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(store->lookup_header(broken).status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(store->lookup_header(good).is_ok());
  EXPECT_EQ(store->stats().corruptions, 1u);  // another format is a miss, not damage
  EXPECT_EQ(store->stats().entries, 1u);
}

TEST(RocksDbStore, EvictionHonoursPinsAndRecomputeCost) {
  test::TempDir dir;
  std::atomic<std::int64_t> now{0};
  StoreOptions o = small_options(dir.path());
  o.eviction_ms_per_token = 1.0;
  o.clock_ms = [&] { return now.load(); };
  const std::size_t payload = 100000;
  auto entry_bytes = [&] { return encode_header(make_header(make_state(testing::model(1), 1, {payload}, 0))).size() + payload; };
  o.byte_budget = 3 * entry_bytes();
  auto store = open_store(o);
  auto save = [&](std::uint64_t id, std::uint64_t tokens) {
    ASSERT_TRUE(store->save(key("t", 1, id), make_state(testing::model(1), tokens, {payload}, id)).is_ok());
  };
  auto held = [&](std::uint64_t id) { return store->contains(key("t", 1, id)); };

  store->pin(key("t", 1, 4));
  save(1, 100);    // priority 0 + 100
  save(2, 10000);  // priority 0 + 10000: long, expensive to recompute
  save(4, 1);      // pinned
  now = 1000;
  save(3, 100);  // over budget: 1 goes (4 is pinned though cheaper)
  EXPECT_FALSE(held(1));
  EXPECT_TRUE(held(2) && held(3) && held(4));
  now = 2000;
  save(5, 100);  // 3 (1100) goes before the older but costlier 2 (10000)
  EXPECT_FALSE(held(3));
  EXPECT_TRUE(held(2) && held(4) && held(5));
  now = 20000;
  ASSERT_TRUE(store->lookup_header(key("t", 1, 5)).is_ok());  // a use refreshes 5 to 20100
  save(6, 100);  // 2 (10000) is finally the cheapest to lose
  EXPECT_FALSE(held(2));
  EXPECT_TRUE(held(4) && held(5) && held(6));
  store->unpin(key("t", 1, 4));
  now = 30000;
  save(7, 100);  // unpinned, 4 (priority 1) goes first
  EXPECT_FALSE(held(4));
  EXPECT_EQ(store->stats().evictions, 4u);
  EXPECT_LE(store->stats().bytes, o.byte_budget);
}

TEST(RocksDbStore, LastUseSurvivesReopen) {
  test::TempDir dir;
  std::atomic<std::int64_t> now{0};
  StoreOptions o = small_options(dir.path());
  o.eviction_ms_per_token = 0;
  o.clock_ms = [&] { return now.load(); };
  o.byte_budget = 2 * 1100;
  {
    auto store = open_store(o);
    for (std::uint64_t id : {1, 2}) ASSERT_TRUE(store->save(key("t", 1, id), make_state(testing::model(1), 1, {1000}, id)).is_ok());
    now = 500;
    ASSERT_TRUE(store->lookup_header(key("t", 1, 1)).is_ok());  // 1 is now the more recent
  }
  auto store = open_store(o);
  now = 600;
  ASSERT_TRUE(store->save(key("t", 1, 3), make_state(testing::model(1), 1, {1000}, 3)).is_ok());
  EXPECT_TRUE(store->contains(key("t", 1, 1)));
  EXPECT_FALSE(store->contains(key("t", 1, 2)));
}

// The store's clock is read inside every save: a closed gate blocks it, parking whoever saves (the
// writer thread) mid-save, so what happens meanwhile is deterministic.
class WriterGate {
 public:
  std::function<std::int64_t()> clock() {
    return [this]() -> std::int64_t {
      std::unique_lock lock(mu_);
      if (closed_) {
        parked_ = true;
        cv_.notify_all();
        cv_.wait(lock, [&] { return !closed_; });
      }
      return 1;
    };
  }
  void close() {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  void wait_parked() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return parked_; });
  }
  void open() {
    {
      std::lock_guard lock(mu_);
      closed_ = false;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false, parked_ = false;
};

TEST(RocksDbStore, AsyncQueueFullDropsOldestUnpinnedWithoutBlocking) {
  test::TempDir dir;
  WriterGate gate;
  StoreOptions o = small_options(dir.path());
  o.async_queue_depth = 3;
  o.clock_ms = gate.clock();
  auto store = open_store(o);
  auto state = std::make_shared<const ModelState>(make_state(testing::model(1), 10, {4096}, 1));
  auto push = [&](std::uint64_t id) { ASSERT_TRUE(store->save_async(key("t", 1, id), state).is_ok()); };

  gate.close();
  push(0);
  gate.wait_parked();
  store->pin(key("t", 1, 1));
  store->pin(key("t", 1, 6));
  push(1);  // pinned
  push(2);
  push(3);  // queue: 1p 2 3 (full)
  push(4);  // drops 2
  push(5);  // drops 3
  push(6);  // pinned: drops 4
  EXPECT_EQ(store->stats().dropped_writes, 3u);
  gate.open();
  store->flush();
  for (std::uint64_t id : {0, 1, 5, 6}) EXPECT_TRUE(store->contains(key("t", 1, id))) << id;
  for (std::uint64_t id : {2, 3, 4}) EXPECT_FALSE(store->contains(key("t", 1, id))) << id;
  EXPECT_EQ(store->stats().entries, 4u);
}

// Memory a state's chunks can view (as the engine's KV pages are): the bytes live here.
class HeldBytes final : public ChunkOwner {
 public:
  explicit HeldBytes(std::vector<std::byte> bytes) : bytes_(std::move(bytes)) {}
  std::span<const std::byte> view() const { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

// One growing sequence's checkpoints, queued while the writer is busy, hold the same KV pages: the
// queue's byte bound counts each page once, so none is dropped where counted per checkpoint
// (1 + 2 + 3 + 4 pages) most would be; a state with its own copy of the pages counts in full.
TEST(RocksDbStore, AsyncQueueCountsPagesSharedByPendingSavesOnce) {
  constexpr std::size_t kPage = 64 << 10;
  test::TempDir dir;
  WriterGate gate;
  StoreOptions o = small_options(dir.path());
  o.clock_ms = gate.clock();
  o.async_queue_bytes = 4 * kPage + 4 * 4096;
  auto store = open_store(o);
  std::vector<std::shared_ptr<HeldBytes>> pages;
  for (std::uint64_t j = 0; j < 4; ++j) pages.push_back(std::make_shared<HeldBytes>(testing::pattern(kPage, j)));
  auto checkpoint = [&](std::size_t n, bool copies) {
    ModelState s = make_state(testing::model(1), 64 * n, {4096}, n);
    for (std::size_t j = 0; j < n; ++j)
      s.chunks.push_back(testing::page_chunk(
          j, copies ? ChunkBytes(std::vector<std::byte>(pages[j]->view().begin(), pages[j]->view().end()))
                    : ChunkBytes::shared(pages[j]->view(), pages[j])));
    return std::make_shared<const ModelState>(std::move(s));
  };

  gate.close();
  ASSERT_TRUE(store->save_async(key("t", 1, 0), checkpoint(1, false)).is_ok());
  gate.wait_parked();  // the writer holds checkpoint 0; the next ones wait in the queue
  for (std::size_t n = 1; n <= 4; ++n) ASSERT_TRUE(store->save_async(key("t", 1, n), checkpoint(n, false)).is_ok());
  EXPECT_EQ(store->stats().dropped_writes, 0u);
  ASSERT_TRUE(store->save_async(key("t", 1, 9), checkpoint(3, true)).is_ok());  // 3 pages more: over
  EXPECT_GT(store->stats().dropped_writes, 0u);
  gate.open();
  store->flush();
  EXPECT_TRUE(store->contains(key("t", 1, 9)));
  for (std::size_t n = 0; n <= 4; ++n) {
    if (!store->contains(key("t", 1, n))) continue;
    auto back = read_all(*store, key("t", 1, n));
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_TRUE(same(*back, *checkpoint(std::max<std::size_t>(n, 1), true))) << n;
  }
}

// save_deferred, what the engine's scheduler calls after the prefill chunk that ends at a boundary,
// goes through the write-behind queue: with the writer parked mid-save it returns at once, and the
// checkpoint reaches the disk later.
TEST(RocksDbStore, SaveDeferredDoesNotWaitForTheDisk) {
  test::TempDir dir;
  WriterGate gate;
  StoreOptions o = small_options(dir.path());
  o.clock_ms = gate.clock();
  auto store = open_store(o);
  auto state = std::make_shared<const ModelState>(make_state(testing::model(1), 10, {4096}, 1));
  gate.close();
  ASSERT_TRUE(store->save_async(key("t", 1, 0), state).is_ok());
  gate.wait_parked();
  StateTier& tier = *store;
  auto deferred = std::async(std::launch::async, [&] { return tier.save_deferred(key("t", 1, 1), state); });
  const bool returned = deferred.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  EXPECT_TRUE(returned) << "save_deferred waited for the disk";
  gate.open();
  EXPECT_TRUE(deferred.get().is_ok());
  store->flush();
  EXPECT_TRUE(store->contains(key("t", 1, 1)));
}

TEST(RocksDbStore, UsageAndDropByTenantAndModel) {
  test::TempDir dir;
  {
    auto store = open_store(small_options(dir.path()));
    const std::vector<StoreKey> keys = {key("a", 1, 1), key("a", 1, 2), key("a", 2, 1), key("ab", 1, 1)};
    for (const auto& k : keys) ASSERT_TRUE(store->save(k, make_state(k.model, 1, {1000}, 1)).is_ok());
    auto usage = store->usage_by_tenant();
    ASSERT_EQ(usage.size(), 2u);
    EXPECT_EQ(usage[0].tenant, "a");
    EXPECT_EQ(usage[0].entries, 3u);
    EXPECT_EQ(usage[1].tenant, "ab");
    EXPECT_EQ(usage[1].entries, 1u);
    EXPECT_EQ(usage[0].bytes + usage[1].bytes, store->stats().bytes);

    ASSERT_TRUE(store->drop_model("a", testing::model(1)).is_ok());
    EXPECT_FALSE(store->contains(key("a", 1, 1)));
    EXPECT_FALSE(store->contains(key("a", 1, 2)));
    EXPECT_TRUE(store->contains(key("a", 2, 1)));
    EXPECT_TRUE(store->contains(key("ab", 1, 1)));
    ASSERT_TRUE(store->drop_tenant("a").is_ok());
    EXPECT_FALSE(store->contains(key("a", 2, 1)));
    EXPECT_TRUE(store->contains(key("ab", 1, 1)));
  }
  auto store = open_store(small_options(dir.path()));  // drops are persistent
  EXPECT_EQ(store->stats().entries, 1u);
  EXPECT_EQ(store->lookup_header(key("a", 2, 1)).status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(read_all(*store, key("ab", 1, 1)).is_ok());
}

TEST(RocksDbStore, VerifyAllReportsAndRemovesCorruptEntries) {
  test::TempDir dir;
  {
    auto store = open_store(small_options(dir.path()));
    for (std::uint64_t id : {1, 2, 3}) ASSERT_TRUE(store->save(key("t", 1, id), make_state(testing::model(1), 1, {3000, 10}, id)).is_ok());
  }
  flip_blob_byte(dir.path(), key("t", 1, 2));
  auto store = open_store(small_options(dir.path()));
  const VerifyReport r = store->verify_all();
  EXPECT_EQ(r.checked, 3u);
  EXPECT_EQ(r.ok, 2u);
  EXPECT_EQ(r.corrupt, 1u);
  EXPECT_EQ(r.bytes_read, 2u * 3010u + 3000u);  // the bad chunk is read, then rejected
  EXPECT_EQ(store->stats().entries, 2u);
  EXPECT_FALSE(store->contains(key("t", 1, 2)));
  EXPECT_EQ(store->verify_all().corrupt, 0u);
}

TEST(RocksDbStore, RejectsInvalidInput) {
  test::TempDir dir;
  auto store = open_store(small_options(dir.path()));
  ModelState bad = make_state(testing::model(1), 1, {100}, 1);
  bad.chunks[0].shape = {99};
  EXPECT_EQ(store->save(key("t", 1, 1), bad).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(store->save(key("", 1, 1), make_state(testing::model(1), 1, {1}, 1)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(store->save(key("t", 2, 1), make_state(testing::model(1), 1, {1}, 1)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(store->stats().entries, 0u);
}

}  // namespace
}  // namespace ft::store
