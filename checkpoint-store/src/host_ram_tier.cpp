#include "ft/store/host_ram_tier.h"

namespace ft::store {

HostRamTier::HostRamTier(std::uint64_t byte_budget)
    : MemoryTier("host-ram", byte_budget, [](std::shared_ptr<const ModelState> state) {
        return Result<std::shared_ptr<const Payload>>(std::make_shared<const StatePayload>(std::move(state)));
      }) {}

}  // namespace ft::store
