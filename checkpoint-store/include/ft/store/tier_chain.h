// Tiers composed fastest first (GPU memory, host RAM, disk): one StateTier to the engine.
//
//   save*        every tier (write-through); save_deferred lets the last tier write behind
//   lookup/read  the first tier that holds the key; a checkpoint read from a slower tier is
//                copied into the faster ones on the way (one read, teed), unless larger than them
//   load_shared  the same promotion made first (of the state itself from a memory tier), then
//                the fastest tier's own state handed over
//   deepest      the deepest key any tier holds
//   pin/erase/drop  every tier;  usage/entries/bytes  of the last (the most complete) tier;
//   hits/misses  of the chain as a whole
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "ft/store/memory_tier.h"

namespace ft::store {

class TierChain : public StateTier {
 public:
  // Fastest first; at least one. `budgets[i]`: bytes tier i can hold (a checkpoint larger than
  // that is not promoted into it); 0 means unlimited.
  TierChain(std::vector<std::unique_ptr<StateTier>> tiers, std::vector<std::uint64_t> budgets);

  const char* name() const override { return "chain"; }
  Status save(const StoreKey& key, const ModelState& state) override;
  Status save_shared(const StoreKey& key, std::shared_ptr<const ModelState> state) override;
  Status save_deferred(const StoreKey& key, std::shared_ptr<const ModelState> state) override;
  Result<ModelStateHeader> lookup_header(const StoreKey& key) override;
  Status read_chunks(const StoreKey& key, const ModelStateHeader& header, const ChunkSink& sink) override;
  std::shared_ptr<const ModelState> find_shared(const StoreKey& key) override;
  std::shared_ptr<const ModelState> load_shared(const StoreKey& key) override;
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

  std::size_t size() const { return tiers_.size(); }
  StateTier& tier(std::size_t i) { return *tiers_[i]; }
  const StateTier& tier(std::size_t i) const { return *tiers_[i]; }

 private:
  // The tiers faster than `i` a checkpoint of `payload_bytes` is copied into when read from tier i.
  std::vector<std::size_t> promotions(std::size_t i, std::uint64_t payload_bytes) const;
  // Reads the checkpoint from tier i into a host copy, passing each piece on to `sink` too (may be
  // empty), and saves the copy into `promote`. kNotFound when tier i no longer holds it.
  Result<std::shared_ptr<const ModelState>> read_and_promote(std::size_t i, const StoreKey& key,
                                                             const ModelStateHeader& header,
                                                             const std::vector<std::size_t>& promote,
                                                             const ChunkSink& sink);

  std::vector<std::unique_ptr<StateTier>> tiers_;
  std::vector<std::uint64_t> budgets_;
  std::atomic<std::uint64_t> hits_{0}, misses_{0};
};

}  // namespace ft::store
