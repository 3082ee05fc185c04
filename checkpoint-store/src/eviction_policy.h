// In-memory index of the checkpoints on disk, ordered by how cheap each is to lose.
//
// Priority = last use (ms) + tokens x ms_per_token: recency, with the recompute cost (which grows
// with the token count) buying extra time. The lowest priority unpinned entry is evicted first.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ft::store {

struct IndexEntry {
  std::uint64_t bytes = 0;   // logical: header + payload
  std::uint64_t tokens = 0;
  std::int64_t last_use_ms = 0;
  bool last_use_dirty = false;  // changed since last persisted
};

class EvictionIndex {
 public:
  explicit EvictionIndex(double ms_per_token) : ms_per_token_(ms_per_token) {}

  void put(const std::string& key, std::uint64_t bytes, std::uint64_t tokens, std::int64_t last_use_ms);
  bool erase(const std::string& key);
  const IndexEntry* find(const std::string& key) const;
  void touch(const std::string& key, std::int64_t now_ms);

  void pin(const std::string& key);
  void unpin(const std::string& key);
  bool pinned(const std::string& key) const { return pins_.count(key) != 0; }

  // Unpinned keys, cheapest to lose first, each handed to `visit` until it returns false. What an
  // eviction frees is the store's to say (a KV page shared with other checkpoints stays).
  void cheapest_first(const std::function<bool(const std::string&)>& visit) const;

  // Keys whose encoding starts with `prefix` (a tenant or a tenant+model).
  std::vector<std::string> keys_with_prefix(std::string_view prefix) const;
  // Last-use times changed since the previous call, marked clean.
  std::vector<std::pair<std::string, std::int64_t>> take_dirty_last_use();

  const std::map<std::string, IndexEntry>& entries() const { return entries_; }
  std::uint64_t total_bytes() const { return total_bytes_; }

 private:
  std::int64_t priority(const IndexEntry& e) const;

  double ms_per_token_;
  std::map<std::string, IndexEntry> entries_;
  std::set<std::pair<std::int64_t, std::string>> order_;  // unpinned entries by priority
  std::set<std::string> pins_;                             // may name keys not stored (yet)
  std::uint64_t total_bytes_ = 0;
};

}  // namespace ft::store
