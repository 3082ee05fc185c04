// Which prefix to restore and which boundaries to snapshot, for one request.
//
// Restore: the deepest cut the engine holds that leaves at least one prompt token to compute.
// Snapshot (cuts past the restored point only):
//   - the first cut of the conversation (the end of system + tools): every session and sub-agent
//     of the same agent shares it;
//   - the last `tail` cuts: the next turn of this conversation restores from the deepest one, and
//     the ones before it survive a client that regenerates its newest message (OpenClaw);
//   - one every `stride` tokens in between, so an edit in the middle of a long history (Claude
//     Code's /compact) still finds a recent checkpoint.
// The tail snapshots are pinned: they are the newest checkpoints of a live session (the deepest is
// often the generation prompt, which the next turn renders differently, so the message boundary
// before it is the one that turn restores); prompts under min_pin_tokens pin nothing. PinLedger unpins what a session superseded and caps
// how many sessions stay pinned per tenant, so abandoned sessions do not hold memory forever while
// short side calls (titles, probes) cannot push a live session out.
#pragma once

#include <cstddef>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ft/protocol/engine_protocol.h"
#include "ft/proxy/prefix_keys.h"
#include "ft/proxy/server.h"

namespace ft::proxy {

// Keys worth looking up: cuts that leave >= 1 token of the prompt to compute.
std::vector<PrefixKey> lookup_keys(std::span<const PrefixCut> cuts, std::size_t prompt_tokens);

// Snapshot requests for cuts in (restored, prompt_tokens], per the policy above.
std::vector<protocol::engine::SnapshotRequest> plan_snapshots(std::span<const PrefixCut> cuts,
                                                              std::size_t restored, std::size_t prompt_tokens,
                                                              const CheckpointPolicy& policy);

class PinLedger {
 public:
  // At most `max_tenants` tenants are remembered: the least recently active beyond that is
  // forgotten (its pins then give way in the engine's tiers, which honour pins only up to half
  // their budget), so callers cycling through keys cannot grow the ledger without end.
  explicit PinLedger(std::size_t max_sessions_per_tenant, std::size_t max_tenants = 4096)
      : max_(max_sessions_per_tenant), max_tenants_(max_tenants) {}
  // Records the request's pinned snapshots (one session's group) and returns the keys to unpin
  // with it: the group the restored key belongs to when this request pins a newer one (the
  // session moved on), and the tenant's oldest groups beyond the cap.
  std::vector<PrefixKey> update(const std::string& tenant, const std::optional<PrefixKey>& restored,
                                const std::vector<PrefixKey>& pinned);
  std::size_t tenants() const;

 private:
  struct Tenant {
    std::deque<std::vector<PrefixKey>> groups;  // oldest first
    std::list<std::string>::iterator recent;    // its place in recent_
  };
  std::size_t max_, max_tenants_;
  mutable std::mutex mu_;
  std::map<std::string, Tenant> tenants_;
  std::list<std::string> recent_;  // front: the most recently active tenant
};

}  // namespace ft::proxy
