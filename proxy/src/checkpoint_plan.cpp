#include "checkpoint_plan.h"

#include <algorithm>

namespace ft::proxy {

std::vector<PrefixKey> lookup_keys(std::span<const PrefixCut> cuts, std::size_t prompt_tokens) {
  std::vector<PrefixKey> keys;
  for (const PrefixCut& c : cuts)
    if (c.tokens < prompt_tokens) keys.push_back(c.key);
  return keys;
}

std::vector<protocol::engine::SnapshotRequest> plan_snapshots(std::span<const PrefixCut> cuts,
                                                              std::size_t restored, std::size_t prompt_tokens,
                                                              const CheckpointPolicy& policy) {
  std::vector<std::size_t> eligible;  // indices into cuts
  for (std::size_t i = 0; i < cuts.size(); ++i)
    if (cuts[i].tokens > restored && cuts[i].tokens <= prompt_tokens) eligible.push_back(i);
  std::vector<bool> take(cuts.size(), false);
  if (!eligible.empty() && eligible.front() == 0) take[0] = true;
  for (std::size_t k = 0; k < eligible.size() && k < policy.tail; ++k) take[eligible[eligible.size() - 1 - k]] = true;
  std::size_t last = restored;
  for (std::size_t i : eligible) {
    if (take[i] || (policy.stride > 0 && cuts[i].tokens - last >= policy.stride)) {
      take[i] = true;
      last = cuts[i].tokens;
    }
  }
  std::vector<protocol::engine::SnapshotRequest> out;
  for (std::size_t i : eligible)
    if (take[i]) out.push_back({int64_t(cuts[i].tokens), cuts[i].key, false});
  for (std::size_t k = 0; prompt_tokens >= policy.min_pin_tokens && k < eligible.size() && k < policy.tail; ++k) {
    const int64_t at = int64_t(cuts[eligible[eligible.size() - 1 - k]].tokens);
    for (auto& s : out)
      if (s.position == at) s.pin = true;
  }
  return out;
}

std::vector<PrefixKey> PinLedger::update(const std::string& tenant, const std::optional<PrefixKey>& restored,
                                         const std::vector<PrefixKey>& pinned) {
  std::vector<PrefixKey> unpin;
  if (pinned.empty()) return unpin;  // nothing new: whatever it restored stays pinned
  std::lock_guard lock(mu_);
  auto [entry, fresh] = tenants_.try_emplace(tenant);
  if (fresh) {
    recent_.push_front(tenant);
    entry->second.recent = recent_.begin();
  } else {
    recent_.splice(recent_.begin(), recent_, entry->second.recent);
  }
  if (tenants_.size() > max_tenants_) {
    tenants_.erase(recent_.back());
    recent_.pop_back();
  }
  auto& groups = entry->second.groups;
  auto release = [&](std::deque<std::vector<PrefixKey>>::iterator g) {
    for (const PrefixKey& k : *g)
      if (std::find(pinned.begin(), pinned.end(), k) == pinned.end()) unpin.push_back(k);
    return groups.erase(g);
  };
  if (restored) {
    for (auto g = groups.begin(); g != groups.end();) {
      g = std::find(g->begin(), g->end(), *restored) != g->end() ? release(g) : std::next(g);
    }
  }
  groups.push_back(pinned);
  while (groups.size() > max_) release(groups.begin());
  return unpin;
}

std::size_t PinLedger::tenants() const {
  std::lock_guard lock(mu_);
  return tenants_.size();
}

}  // namespace ft::proxy
