// Host RAM in front of RocksDB. Lookups try RAM, then disk; a checkpoint read from disk is
// promoted into RAM on the way (one read, teed). Saves go to RAM at once and to disk either
// synchronously (save) or through the write-behind queue (save_async).
#pragma once

#include <atomic>
#include <memory>

#include "ft/store/host_ram_tier.h"
#include "ft/store/options.h"
#include "ft/store/rocksdb_store.h"

namespace ft::store {

class TieredStore final : public StateTier {
 public:
  // The RAM tier gets options.ram_budget; the disk tier everything else.
  static Result<std::unique_ptr<TieredStore>> open(StoreOptions options);

  const char* name() const override { return "tiered"; }
  Status save(const StoreKey& key, const ModelState& state) override;
  Status save_shared(const StoreKey& key, std::shared_ptr<const ModelState> state) override;
  // RAM at once, disk through the write-behind queue.
  Status save_deferred(const StoreKey& key, std::shared_ptr<const ModelState> state) override;
  Status save_async(const StoreKey& key, ModelState state) {
    return save_deferred(key, std::make_shared<const ModelState>(std::move(state)));
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
  // Of the disk tier, which holds everything the RAM tier holds (unless a write was dropped).
  std::vector<TenantUsage> usage_by_tenant() const override;
  // entries/bytes/evictions/corruptions/dropped/degraded of the disk tier; hits and misses of the
  // store as a whole (a hit in either tier is a hit).
  TierStats stats() const override;

  void flush() { disk_->flush(); }
  HostRamTier& ram() { return *ram_; }
  RocksDbStore& disk() { return *disk_; }

 private:
  TieredStore(std::unique_ptr<HostRamTier> ram, std::unique_ptr<RocksDbStore> disk);

  std::unique_ptr<HostRamTier> ram_;
  std::unique_ptr<RocksDbStore> disk_;
  std::atomic<std::uint64_t> hits_{0}, misses_{0};
};

}  // namespace ft::store
