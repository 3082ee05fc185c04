#include "ft/engine/engine_status.h"

#include <unistd.h>

#include <fstream>

#include "ft/store/tier_chain.h"

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
  return {{"entries", t.entries},
          {"bytes", t.bytes},
          {"logical_bytes", t.logical_bytes},
          {"hits", t.hits},
          {"misses", t.misses},
          {"evictions", t.evictions},
          {"corruptions", t.corruptions},
          {"dropped_writes", t.dropped_writes},
          {"degraded", t.degraded}};
}

// Every tier of a store, fastest first (a chain inside a chain in its place), each with its own
// stats: the chain's own stats are its last tier's, which hides what the faster ones hold.
void add_tiers(const store::StateTier& t, json& out) {
  if (const auto* chain = dynamic_cast<const store::TierChain*>(&t)) {
    for (std::size_t i = 0; i < chain->size(); ++i) add_tiers(chain->tier(i), out);
    return;
  }
  out.push_back({{"tier", t.name()}, {"stats", tier_json(t.stats())}});
}

json store_json(const store::StateTier& store) {
  json tiers = json::array();
  add_tiers(store, tiers);
  return {{"tier", store.name()}, {"stats", tier_json(store.stats())}, {"tiers", std::move(tiers)}};
}

json costs_json(const SplitCosts& c) {
  return {{"pcie_gbps", c.pcie_gbps},
          {"cpu_gbps", c.cpu_gbps},
          {"pcie_shared_gbps", c.pcie_shared_gbps},
          {"cpu_shared_gbps", c.cpu_shared_gbps}};
}

// Routed experts in host RAM: the cache and how its misses were served.
json experts_json(const PlacementPlan& p, const std::optional<ExpertOffloadStats>& s) {
  json j = {{"in_host_ram", true},
            {"pinned", p.experts_pinned},
            {"slots", p.expert_slots},
            {"min_slots", s ? s->min_slots : 0},
            {"slot_bytes", p.expert_slot_bytes},
            {"cache_bytes", p.expert_cache_bytes()},
            {"policy", s ? s->policy : p.moe_policy}};
  if (!s) return j;
  const double uses = double(s->hits + s->misses);
  j["stats"] = {{"hits", s->hits},
                {"misses", s->misses},
                {"hit_rate", uses > 0 ? double(s->hits) / uses : 0.0},
                {"resident", s->resident},
                {"fetched", s->fetched},
                {"fetched_bytes", s->fetched_bytes},
                {"cpu_computed", s->cpu_computed},
                {"cpu_bytes", s->cpu_bytes},
                {"read_in_place", s->read_in_place},
                {"read_in_place_bytes", s->read_in_place_bytes},
                {"prefetched", s->prefetched},
                {"prefetched_bytes", s->prefetched_bytes},
                {"prefetch_used", s->prefetch_used},
                {"cpu_share", s->cpu_share},
                {"fetch_gbps", s->fetch_seconds > 0 ? double(s->fetched_bytes) / s->fetch_seconds / 1e9 : 0.0},
                {"cpu_gbps", s->cpu_seconds > 0 ? double(s->cpu_bytes) / s->cpu_seconds / 1e9 : 0.0},
                {"split", costs_json(s->costs)},
                {"calibrated", costs_json(s->calibrated)},
                {"layer_hit_rate", s->layer_hit_rate},
                {"layer_fetched", s->layer_fetched},
                {"layer_cpu_computed", s->layer_cpu_computed},
                {"layer_read_in_place", s->layer_read_in_place},
                {"workspace_overflow_bytes", s->workspace_overflow_bytes}};
  return j;
}

}  // namespace

json placement_json(const Model& m, const ElasticGpuMemory* elastic) {
  const PlacementPlan p = m.placement();
  const KvPoolStats kv = m.kv_stats();
  json j = {{"device", p.device},
            {"budget_bytes", p.budget_bytes},
            {"weights",
             {{"embedding_bytes", p.embedding_bytes},
              {"dense_bytes", p.dense_bytes},
              {"routed_expert_bytes", p.routed_expert_bytes}}},
            {"kv",
             {{"page_bytes", p.kv_page_bytes},
              {"pages", p.kv_pages},
              {"tokens", p.kv_tokens},
              {"stats",
               {{"pages_used", kv.pages_used},
                {"pages_touched", kv.pages_touched},
                {"pages_max", kv.pages_max}}}}},  // the budget; "pages" is below it after a shrink
            {"linear_state_bytes_per_sequence", p.linear_state_bytes},
            {"linear_state_sequences", p.linear_state_sequences},  // GPU: the room kept for them
            {"linear_state_bytes", p.linear_state_room()},
            {"workspace_bytes", p.workspace_bytes},
            {"pass_rows", p.pass_rows},
            {"total_bytes", p.total_bytes()}};
  if (p.experts_on_host) {
    j["experts"] = experts_json(p, m.expert_offload_stats());
    if (elastic) {
      const ElasticGpuMemory::Stats e = elastic->stats();
      j["experts"]["elastic"] = {{"ceiling_bytes", e.ceiling_bytes},
                                 {"device_free_bytes", e.device_free_bytes},
                                 {"headroom_bytes", e.headroom_bytes},
                                 {"shrinks", e.shrinks},
                                 {"grows", e.grows},
                                 {"last_error", e.last_error}};
    }
  }
  return j;
}

json engine_status(const Scheduler& scheduler, const store::StateTier* store, const ElasticGpuMemory* elastic) {
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
  j["store"] = store ? store_json(*store) : json(nullptr);
  j["placement"] = placement_json(m, elastic);
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
