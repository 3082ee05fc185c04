// The persistent tier: checkpoints in a RocksDB database on local disk.
//
// Column families: "meta" holds one encoded ModelStateHeader per StoreKey; "blobs" holds the chunk
// pieces (stored as BlobDB blob files, so multi-MiB values are not rewritten by compaction);
// "pages" holds KV pages by content, each once however many checkpoints hold it (one growing
// sequence's checkpoints share their first pages); "default" holds bookkeeping (lazily persisted
// last-use times, pending-save markers).
//
// Thread-safe. Saves are serialized; reads run concurrently with them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "ft/common/result.h"
#include "ft/store/options.h"
#include "ft/store/state_tier.h"

namespace ft::store {

// One stored checkpoint as the in-memory index knows it (no IO: nothing is read or verified).
struct EntryInfo {
  StoreKey key;
  std::uint64_t tokens = 0;
  std::uint64_t bytes = 0;        // logical: header + payload (pages shared with others included)
  std::int64_t last_use_ms = 0;   // ms since the epoch; 0 if never recorded
  bool pinned = false;            // pins live in this process only
};

class RocksDbStore final : public StateTier {
 public:
  // Opens (creating if needed) the database at options.path, recovering from a crash: the WAL is
  // replayed, saves that did not complete are removed, the index is rebuilt from "meta".
  static Result<std::unique_ptr<RocksDbStore>> open(StoreOptions options);
  ~RocksDbStore() override;  // flush() + persist last-use times + close
  RocksDbStore(const RocksDbStore&) = delete;
  RocksDbStore& operator=(const RocksDbStore&) = delete;

  const char* name() const override { return "rocksdb"; }
  Status save(const StoreKey& key, const ModelState& state) override;
  // Written behind (save_async): the engine saves a checkpoint after the prefill chunk that ends
  // at a boundary, and a disk write there would hold up the next chunk.
  Status save_deferred(const StoreKey& key, std::shared_ptr<const ModelState> state) override {
    return save_async(key, std::move(state));
  }
  Result<ModelStateHeader> lookup_header(const StoreKey& key) override;
  Status read_chunks(const StoreKey& key, const ModelStateHeader& header,
                     const ChunkSink& sink) override;
  bool contains(const StoreKey& key) const override;
  Result<std::optional<DeepestMatch>> deepest(const TenantId& tenant, const ModelFingerprint& model,
                                              std::span<const PrefixKey> keys_in_order) override;
  Status erase(const StoreKey& key) override;
  void pin(const StoreKey& key) override;
  void unpin(const StoreKey& key) override;
  Status drop_tenant(const TenantId& tenant) override;
  Status drop_model(const TenantId& tenant, const ModelFingerprint& model) override;
  std::vector<TenantUsage> usage_by_tenant() const override;
  TierStats stats() const override;

  // Write-behind: validates, then queues the save for the background writer and returns at once.
  // When the queue is full the oldest pending unpinned save is dropped (counted in
  // stats().dropped_writes); the caller never waits for disk.
  Status save_async(const StoreKey& key, std::shared_ptr<const ModelState> state);
  // Waits until every queued save is written, persists last-use times, and flushes memtables to
  // SST/blob files (for tests, measurements and shutdown; costs a few fsyncs).
  void flush();

  // The checkpoints held, in key order (tenant, model, prefix), optionally of one tenant only.
  // For operators (`freetoken ctl checkpoints list`); does not count as a use.
  std::vector<EntryInfo> list(const std::optional<TenantId>& tenant = std::nullopt) const;

  // Re-reads every checkpoint and checks all checksums; bad entries are removed.
  VerifyReport verify_all();

  // True once a write failed (disk full, IO error): saves are then skipped with a warning.
  bool degraded() const;

 private:
  struct Impl;
  explicit RocksDbStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ft::store
