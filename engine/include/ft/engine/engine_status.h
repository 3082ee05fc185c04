// The engine's status and memory documents (GET /engine/v1/status and /memory in
// protocol/ENGINE-PROTOCOL.md), built in one place for the engine process and the in-process
// backend alike.
#pragma once

#include <nlohmann/json.hpp>

#include "ft/engine/elastic_gpu_memory.h"
#include "ft/engine/scheduler.h"
#include "ft/store/state_tier.h"

namespace ft::engine {

// Protocol name and version, the model (family, fingerprints, vocabulary, end tokens, context),
// the scheduler's counters and the checkpoint tier's (null when there is none), and where the
// model lives (with `elastic`, how its expert cache has given way to other processes).
nlohmann::json engine_status(const Scheduler& scheduler, const store::StateTier* store,
                             const ElasticGpuMemory* elastic = nullptr);

// The placement part of engine_status: the plan, the KV pool, the expert cache.
nlohmann::json placement_json(const Model& model, const ElasticGpuMemory* elastic = nullptr);

// Resident bytes of this process and the checkpoint tier's bytes per tenant.
nlohmann::json engine_memory(const store::StateTier* store);

}  // namespace ft::engine
