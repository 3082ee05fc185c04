// The host-RAM tier: checkpoints kept as shared, immutable ModelStates (no copy: the engine's
// snapshot is the stored value), evicted least recently used first by bytes. Nothing here is
// persisted; pinned keys are kept while pins hold at most half the budget (MemoryTier). (A
// MemoryTier whose payload is the state itself.)
#pragma once

#include <cstdint>

#include "ft/store/memory_tier.h"

namespace ft::store {

class HostRamTier final : public MemoryTier {
 public:
  explicit HostRamTier(std::uint64_t byte_budget);
};

}  // namespace ft::store
