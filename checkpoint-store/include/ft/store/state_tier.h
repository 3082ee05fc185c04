// One interface for every place a model-state checkpoint can live: host RAM, local disk (RocksDB),
// and later the engine's GPU hot tier. TieredStore composes them, fastest first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ft/common/result.h"
#include "ft/store/checkpoint_format.h"
#include "ft/store/types.h"

namespace ft::store {

// A run of bytes of chunk `chunk_index`, starting `offset` bytes into that chunk. Pieces of one
// chunk arrive in order; chunks arrive in header order.
struct ChunkPiece {
  std::size_t chunk_index = 0;
  std::uint64_t offset = 0;
  std::span<const std::byte> bytes;
};
// Copies a piece to where it belongs (e.g. a pinned host buffer). A non-OK return aborts the read.
using ChunkSink = std::function<Status(const ChunkPiece&)>;

struct DeepestMatch {
  std::size_t index = 0;  // position in keys_in_order
  PrefixKey key;
  ModelStateHeader header;
};

struct TierStats {
  std::uint64_t entries = 0;
  std::uint64_t bytes = 0;           // held against the budget: headers + payloads, a shared KV page once
  std::uint64_t logical_bytes = 0;   // every checkpoint's whole size (a shared page counted in each)
  std::uint64_t hits = 0;            // lookups (lookup_header, deepest) that found a checkpoint
  std::uint64_t misses = 0;          // lookups that found none (corrupt entries included)
  std::uint64_t evictions = 0;       // entries removed to stay within the byte budget
  std::uint64_t corruptions = 0;     // entries dropped for a checksum/version/missing-chunk fault
  std::uint64_t dropped_writes = 0;  // async saves dropped because the queue was full
  bool degraded = false;             // writes failed; the tier no longer persists anything
};

struct TenantUsage {
  TenantId tenant;
  std::uint64_t entries = 0;
  std::uint64_t bytes = 0;
};

struct VerifyReport {
  std::uint64_t checked = 0;
  std::uint64_t ok = 0;
  std::uint64_t corrupt = 0;  // failed and were removed
  std::uint64_t bytes_read = 0;
};

class StateTier {
 public:
  virtual ~StateTier() = default;

  virtual const char* name() const = 0;

  // Stores (or replaces) the checkpoint under `key`. Invalid states are kInvalidArgument; a tier
  // that cannot persist (degraded) still returns OK: losing a cache entry is not the caller's
  // failure.
  virtual Status save(const StoreKey& key, const ModelState& state) = 0;
  // Same, letting a tier keep a reference instead of a copy.
  virtual Status save_shared(const StoreKey& key, std::shared_ptr<const ModelState> state) {
    return save(key, *state);
  }
  // Same, but may return before the checkpoint is durable (write-behind): what the engine calls,
  // so decoding never waits for a disk. A lookup right after it may still see the entry missing
  // in slow tiers.
  virtual Status save_deferred(const StoreKey& key, std::shared_ptr<const ModelState> state) {
    return save_shared(key, std::move(state));
  }

  // kNotFound on a miss, including an entry that turned out corrupt (it is removed).
  virtual Result<ModelStateHeader> lookup_header(const StoreKey& key) = 0;

  // Streams the chunks of the checkpoint `header` (from lookup_header) to `sink`. The delivered
  // bytes are valid only if this returns OK: a checksum is confirmed after a chunk's last piece.
  // kNotFound if the entry is gone, was replaced, or is corrupt (then it is removed).
  virtual Status read_chunks(const StoreKey& key, const ModelStateHeader& header,
                             const ChunkSink& sink) = 0;

  // The stored state itself when this tier keeps it as a ModelState in host memory (no copy, no
  // integrity check needed: it never left RAM), else null. Lets the engine adopt the KV pages a
  // checkpoint shares with its pool instead of copying them. Counts as a hit when found.
  virtual std::shared_ptr<const ModelState> find_shared(const StoreKey& key) {
    (void)key;
    return nullptr;
  }
  // find_shared, and where the checkpoint is only in a slower part of this tier (a chain's disk),
  // read once into the faster parts first and handed over from there: a restore then adopts what
  // the fastest part keeps (the GPU tier's pool pages) instead of streaming the bytes to the caller
  // and copying them into the faster parts besides. Null when not held (read_chunks then serves).
  virtual std::shared_ptr<const ModelState> load_shared(const StoreKey& key) { return find_shared(key); }

  // Whether an entry is held (no IO, no integrity check, no stats).
  virtual bool contains(const StoreKey& key) const = 0;

  // The deepest of `keys_in_order` (shallow to deep) held for (tenant, model), nullopt if none.
  virtual Result<std::optional<DeepestMatch>> deepest(const TenantId& tenant,
                                                      const ModelFingerprint& model,
                                                      std::span<const PrefixKey> keys_in_order) = 0;

  virtual Status erase(const StoreKey& key) = 0;

  // A pinned key is kept ahead of unpinned ones (e.g. the newest checkpoint of a live session);
  // memory tiers honour pins up to half their budget, so forgotten pins cannot fill them. Pins
  // live in memory only and may name keys not stored yet.
  virtual void pin(const StoreKey& key) = 0;
  virtual void unpin(const StoreKey& key) = 0;

  virtual Status drop_tenant(const TenantId& tenant) = 0;
  virtual Status drop_model(const TenantId& tenant, const ModelFingerprint& model) = 0;
  virtual std::vector<TenantUsage> usage_by_tenant() const = 0;
  virtual TierStats stats() const = 0;
};

// deepest() for tiers whose contains() is cheap: probes from the deep end, returns the first key
// whose header can be looked up.
Result<std::optional<DeepestMatch>> probe_deepest(StateTier& tier, const TenantId& tenant,
                                                  const ModelFingerprint& model,
                                                  std::span<const PrefixKey> keys_in_order);

}  // namespace ft::store
