// A bounded, thread-safe map from pre-token bytes to their BPE ids. Text repeats words a lot, and
// a hit skips the merge loop. Sharded so concurrent encoders rarely contend on one lock; a full
// shard is cleared rather than tracked LRU (cheap, and hot words come straight back).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe.h"

namespace ft::protocol::tok {

class WordCache {
 public:
  static constexpr std::size_t kMaxWordBytes = 256;  // HF caches only words shorter than this
  static constexpr std::size_t kShards = 16;
  static constexpr std::size_t kEntriesPerShard = 8192;

  // Appends the cached ids of `word` to `out`; false on a miss.
  bool get(std::string_view word, std::vector<int32_t>& out) const {
    const std::size_t h = StringHash{}(word);
    const Shard& s = shards_[h % kShards];
    std::shared_lock lock(s.mu);
    auto it = s.map.find(word);
    if (it == s.map.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }

  void put(std::string_view word, const int32_t* ids, std::size_t n) const {
    const std::size_t h = StringHash{}(word);
    Shard& s = shards_[h % kShards];
    std::unique_lock lock(s.mu);
    if (s.map.size() >= kEntriesPerShard) s.map.clear();
    s.map.try_emplace(std::string(word), ids, ids + n);
  }

 private:
  struct Shard {
    mutable std::shared_mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
  };
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace ft::protocol::tok
