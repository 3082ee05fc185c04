// The GPU hot tier: checkpoints held in device memory, in front of host RAM and disk (a
// store::MemoryTier whose payload is one device allocation per checkpoint). A restore from it
// streams the chunks back in 4 MiB pieces; an engine whose state lives on the GPU reads the
// device copy directly instead (the seam the CUDA runtime will use).
#pragma once

#include <cstdint>
#include <memory>

#include "ft/common/result.h"
#include "ft/store/memory_tier.h"

namespace ft::engine {

// kUnavailable without CUDA or a usable GPU. `byte_budget`: device bytes for checkpoints.
Result<std::unique_ptr<store::MemoryTier>> make_gpu_state_tier(std::uint64_t byte_budget);

}  // namespace ft::engine
