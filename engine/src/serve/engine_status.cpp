#include "ft/engine/engine_status.h"

#include <unistd.h>

#include <fstream>

namespace ft::engine {
namespace {

using nlohmann::json;

// Resident set size in bytes (Linux), 0 when unknown.
uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * uint64_t(sysconf(_SC_PAGESIZE));
}

json tier_json(const store::TierStats& t) {
  return {{"entries", t.entries},         {"bytes", t.bytes},         {"hits", t.hits},
          {"misses", t.misses},           {"evictions", t.evictions}, {"corruptions", t.corruptions},
          {"dropped_writes", t.dropped_writes}, {"degraded", t.degraded}};
}

}  // namespace

json engine_status(const Scheduler& scheduler, const store::StateTier* store) {
  const Model& m = scheduler.model();
  const ModelConfig& cfg = m.config();
  json j = {{"protocol", protocol::engine::kProtocolName},
            {"version", protocol::engine::kProtocolVersion},
            {"model",
             {{"family", model_family_name(cfg.family)},
              {"fingerprint", m.fingerprint()},
              {"store_fingerprint", scheduler.fingerprint().to_hex()},
              {"vocab_size", cfg.vocab_size},
              {"eos_token_ids", cfg.eos_token_ids},
              {"context_length", scheduler.options().context_length}}},
            {"scheduler", to_json(scheduler.stats())}};
  j["scheduler"]["max_running"] = scheduler.options().max_running;
  j["scheduler"]["max_waiting"] = scheduler.options().max_waiting;
  j["store"] = store ? json{{"tier", store->name()}, {"stats", tier_json(store->stats())}} : json(nullptr);
  const PlacementPlan& p = m.placement();
  j["placement"] = {{"device", p.device},
                    {"budget_bytes", p.budget_bytes},
                    {"weights", {{"embedding_bytes", p.embedding_bytes},
                                 {"dense_bytes", p.dense_bytes},
                                 {"routed_expert_bytes", p.routed_expert_bytes}}},
                    {"kv", {{"page_bytes", p.kv_page_bytes}, {"pages", p.kv_pages}, {"tokens", p.kv_tokens},
                            {"stats", {{"pages_used", m.kv_stats().pages_used}, {"pages_touched", m.kv_stats().pages_touched}}}}},
                    {"linear_state_bytes_per_sequence", p.linear_state_bytes},
                    {"workspace_bytes", p.workspace_bytes},
                    {"reserved_bytes", p.reserved_bytes},
                    {"total_bytes", p.total_bytes()}};
  return j;
}

json engine_memory(const store::StateTier* store) {
  json j = {{"resident_bytes", resident_bytes()}};
  if (store) {
    json tenants = json::array();
    for (const auto& u : store->usage_by_tenant())
      tenants.push_back({{"tenant", u.tenant}, {"entries", u.entries}, {"bytes", u.bytes}});
    j["checkpoints"] = {{"tier", store->name()}, {"stats", tier_json(store->stats())}, {"tenants", tenants}};
  }
  return j;
}

}  // namespace ft::engine
