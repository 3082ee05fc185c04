// The engine's status and memory documents (GET /engine/v1/status and /memory in
// protocol/ENGINE-PROTOCOL.md), built in one place for the engine process and the in-process
// backend alike.
#pragma once

#include <nlohmann/json.hpp>

#include "ft/engine/scheduler.h"
#include "ft/store/state_tier.h"

namespace ft::engine {

// Protocol name and version, the model (family, fingerprints, vocabulary, end tokens, context),
// the scheduler's counters and the checkpoint tier's (null when there is none).
nlohmann::json engine_status(const Scheduler& scheduler, const store::StateTier* store);

// Resident bytes of this process and the checkpoint tier's bytes per tenant.
nlohmann::json engine_memory(const store::StateTier* store);

}  // namespace ft::engine
