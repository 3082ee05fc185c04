// Checkpoints held in some memory (host RAM, GPU memory), evicted least recently used first by
// bytes; pinned keys are evicted only when pins alone would hold more than half the budget (then
// the least recently used pinned ones); nothing is persisted. The bookkeeping (LRU, pins, tenant
// ranges, stats) is here once; where the bytes live is the Payload a tier makes of each state.
#pragma once

#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ft/store/shared_bytes.h"
#include "ft/store/state_tier.h"

namespace ft::store {

class MemoryTier : public StateTier {
 public:
  // One checkpoint's bytes wherever the tier keeps them.
  class Payload {
   public:
    virtual ~Payload() = default;
    // Streams the chunks described by `header` to `sink`, in order.
    virtual Status read(const ModelStateHeader& header, const ChunkSink& sink) const = 0;
    // The state itself, when the payload is the state (host RAM); null otherwise.
    virtual std::shared_ptr<const ModelState> state() const { return nullptr; }
  };
  // A payload that is the state itself (no copy: the engine's snapshot is the stored value).
  class StatePayload : public Payload {
   public:
    explicit StatePayload(std::shared_ptr<const ModelState> state) : state_(std::move(state)) {}
    Status read(const ModelStateHeader& header, const ChunkSink& sink) const override;
    std::shared_ptr<const ModelState> state() const override { return state_; }

   private:
    std::shared_ptr<const ModelState> state_;
  };
  // Makes the payload of a (validated) state. kUnavailable (e.g. out of device memory) means "not
  // cached": save still succeeds, as for a state larger than the whole budget.
  using PayloadFactory = std::function<Result<std::shared_ptr<const Payload>>(std::shared_ptr<const ModelState>)>;

  // Entries count against the budget with a shared chunk (ChunkBytes::shared, e.g. a KV page that
  // one growing sequence's checkpoints all hold) once however many entries hold it (shared_bytes.h).
  MemoryTier(const char* name, std::uint64_t byte_budget, PayloadFactory make_payload);
  std::uint64_t byte_budget() const { return budget_; }

  const char* name() const override { return name_; }
  Status save(const StoreKey& key, const ModelState& state) override;
  Status save_shared(const StoreKey& key, std::shared_ptr<const ModelState> state) override;
  Result<ModelStateHeader> lookup_header(const StoreKey& key) override;
  Status read_chunks(const StoreKey& key, const ModelStateHeader& header,
                     const ChunkSink& sink) override;
  std::shared_ptr<const ModelState> find_shared(const StoreKey& key) override;
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
  // Evicts the least recently used entry, an unpinned one while there is one: for a holder of
  // memory that others need now (the KV pool's pages a tier keeps). False when the tier is empty.
  bool evict_least_recent();

 private:
  // An entry's header. Its checksums read every byte of the state, which for a GPU's KV pages may
  // mean waiting for their copies to the host: so a payload that is the state itself (host RAM)
  // leaves them to the first reader that asks, and a save returns without touching the bytes.
  class EntryHeader {
   public:
    explicit EntryHeader(std::shared_ptr<const ModelState> state) : state_(std::move(state)) {}
    const ModelStateHeader& get() const;

   private:
    mutable std::once_flag once_;
    mutable std::shared_ptr<const ModelState> state_;  // until the header is made
    mutable ModelStateHeader header_;
  };
  struct Entry {
    std::shared_ptr<const Payload> payload;
    std::shared_ptr<const EntryHeader> header;
    std::uint64_t bytes = 0;               // the whole state
    StateFootprint footprint;              // as counted
    std::list<std::string>::iterator lru;  // position in lru_
  };
  void erase_locked(std::map<std::string, Entry>::iterator it);
  void drop_prefix_locked(const std::string& prefix);
  // Evicts unpinned entries, least recently used first, until `incoming` more bytes fit; then, while
  // pinned entries hold more than half the budget, pinned ones likewise.
  void evict_locked(std::uint64_t incoming = 0);

  const char* const name_;
  const std::uint64_t budget_;
  const PayloadFactory make_payload_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;  // by encoded StoreKey: tenant ranges are contiguous
  std::list<std::string> lru_;            // front = most recently used
  std::set<std::string> pins_;
  SharedBytes bytes_;                // counted against the budget
  std::uint64_t logical_bytes_ = 0;  // every entry's whole state
  TierStats counters_;
};

}  // namespace ft::store
