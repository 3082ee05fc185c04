// Host RAM in front of RocksDB: the TierChain {HostRamTier, RocksDbStore}. Lookups try RAM, then
// disk; a checkpoint read from disk is promoted into RAM on the way (one read, teed). Saves go to
// RAM at once and to disk either synchronously (save) or through the write-behind queue
// (save_deferred / save_async).
#pragma once

#include <memory>

#include "ft/store/host_ram_tier.h"
#include "ft/store/options.h"
#include "ft/store/rocksdb_store.h"
#include "ft/store/tier_chain.h"

namespace ft::store {

class TieredStore final : public TierChain {
 public:
  // The RAM tier gets options.ram_budget; the disk tier everything else.
  static Result<std::unique_ptr<TieredStore>> open(StoreOptions options);

  const char* name() const override { return "tiered"; }
  Status save_async(const StoreKey& key, ModelState state) {
    return save_deferred(key, std::make_shared<const ModelState>(std::move(state)));
  }

  void flush() { disk_->flush(); }
  HostRamTier& ram() { return *ram_; }
  RocksDbStore& disk() { return *disk_; }

 private:
  TieredStore(std::vector<std::unique_ptr<StateTier>> tiers, std::uint64_t ram_budget, HostRamTier* ram,
              RocksDbStore* disk)
      : TierChain(std::move(tiers), {ram_budget, 0}), ram_(ram), disk_(disk) {}

  HostRamTier* ram_;    // owned by the chain
  RocksDbStore* disk_;  // owned by the chain
};

}  // namespace ft::store
