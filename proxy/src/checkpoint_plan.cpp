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
  if (!out.empty()) out.back().pin = true;
  return out;
}

std::vector<PrefixKey> PinLedger::update(const std::string& tenant, const std::optional<PrefixKey>& restored,
                                         const std::optional<PrefixKey>& pinned) {
  std::vector<PrefixKey> unpin;
  std::lock_guard lock(mu_);
  auto& pins = pins_[tenant];
  if (pinned) {
    if (restored) {
      auto it = std::find(pins.begin(), pins.end(), *restored);
      if (it != pins.end()) {  // this conversation moved on from it
        unpin.push_back(*it);
        pins.erase(it);
      }
    }
    if (std::find(pins.begin(), pins.end(), *pinned) == pins.end()) pins.push_back(*pinned);
  }
  while (pins.size() > max_) {
    unpin.push_back(pins.front());
    pins.pop_front();
  }
  return unpin;
}

}  // namespace ft::proxy
