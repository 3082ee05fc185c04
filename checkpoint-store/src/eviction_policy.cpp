#include "eviction_policy.h"

#include <cmath>

namespace ft::store {

std::int64_t EvictionIndex::priority(const IndexEntry& e) const {
  return e.last_use_ms + static_cast<std::int64_t>(std::llround(static_cast<double>(e.tokens) * ms_per_token_));
}

void EvictionIndex::put(const std::string& key, std::uint64_t bytes, std::uint64_t tokens,
                        std::int64_t last_use_ms) {
  erase(key);
  IndexEntry& e = entries_[key];
  e = {bytes, tokens, last_use_ms, false};
  total_bytes_ += bytes;
  if (!pinned(key)) order_.emplace(priority(e), key);
}

bool EvictionIndex::erase(const std::string& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  order_.erase({priority(it->second), key});
  total_bytes_ -= it->second.bytes;
  entries_.erase(it);
  return true;
}

const IndexEntry* EvictionIndex::find(const std::string& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

void EvictionIndex::touch(const std::string& key, std::int64_t now_ms) {
  auto it = entries_.find(key);
  if (it == entries_.end() || now_ms <= it->second.last_use_ms) return;
  const bool in_order = order_.erase({priority(it->second), key}) != 0;
  it->second.last_use_ms = now_ms;
  it->second.last_use_dirty = true;
  if (in_order) order_.emplace(priority(it->second), key);
}

void EvictionIndex::pin(const std::string& key) {
  if (!pins_.insert(key).second) return;
  if (auto it = entries_.find(key); it != entries_.end()) order_.erase({priority(it->second), key});
}

void EvictionIndex::unpin(const std::string& key) {
  if (pins_.erase(key) == 0) return;
  if (auto it = entries_.find(key); it != entries_.end()) order_.emplace(priority(it->second), key);
}

void EvictionIndex::cheapest_first(const std::function<bool(const std::string&)>& visit) const {
  for (const auto& [priority, key] : order_)
    if (!visit(key)) return;
}

std::vector<std::string> EvictionIndex::keys_with_prefix(std::string_view prefix) const {
  std::vector<std::string> out;
  for (auto it = entries_.lower_bound(std::string(prefix));
       it != entries_.end() && std::string_view(it->first).starts_with(prefix); ++it) {
    out.push_back(it->first);
  }
  return out;
}

std::vector<std::pair<std::string, std::int64_t>> EvictionIndex::take_dirty_last_use() {
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (auto& [key, e] : entries_) {
    if (!e.last_use_dirty) continue;
    out.emplace_back(key, e.last_use_ms);
    e.last_use_dirty = false;
  }
  return out;
}

}  // namespace ft::store
