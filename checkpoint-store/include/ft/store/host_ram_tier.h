// The host-RAM tier: checkpoints kept as shared, immutable ModelStates, evicted least recently
// used first by bytes. Nothing here is persisted; pinned keys are never evicted.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "ft/store/state_tier.h"

namespace ft::store {

class HostRamTier final : public StateTier {
 public:
  explicit HostRamTier(std::uint64_t byte_budget);
  std::uint64_t byte_budget() const { return budget_; }

  const char* name() const override { return "host-ram"; }
  Status save(const StoreKey& key, const ModelState& state) override;
  Status save_shared(const StoreKey& key, std::shared_ptr<const ModelState> state) override;
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

 private:
  struct Entry {
    std::shared_ptr<const ModelState> state;
    ModelStateHeader header;
    std::uint64_t bytes = 0;
    std::list<std::string>::iterator lru;  // position in lru_
  };
  void erase_locked(std::map<std::string, Entry>::iterator it);
  void drop_prefix_locked(const std::string& prefix);
  void evict_locked();

  const std::uint64_t budget_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;  // by encoded StoreKey: tenant ranges are contiguous
  std::list<std::string> lru_;            // front = most recently used
  std::set<std::string> pins_;
  std::uint64_t bytes_ = 0;
  TierStats counters_;
};

}  // namespace ft::store
