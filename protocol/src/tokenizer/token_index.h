// String -> id lookup over strings stored elsewhere (a vector indexed by id), as one flat
// open-addressing table of (hash, id). Tokenizer vocabularies have up to ~200k tokens and loading
// resolves ~1.3M merge halves against them; std::unordered_map's node chasing made that the
// slowest part of loading.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <xxhash.h>

namespace ft::protocol::tok {

class TokenIndex {
 public:
  // Indexes strings[id] for every id where include(id) holds; a repeated string keeps the last id.
  template <typename Include>
  void build(const std::vector<std::string>& strings, Include include) {
    std::size_t n = 0;
    for (std::size_t id = 0; id < strings.size(); ++id) n += include(id) ? 1 : 0;
    std::size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Slot{0, -1});
    mask_ = cap - 1;
    size_ = 0;
    for (std::size_t id = 0; id < strings.size(); ++id) {
      if (!include(id)) continue;
      const uint64_t h = hash(strings[id]);
      for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
        Slot& s = slots_[i];
        if (s.id < 0) {
          s = Slot{static_cast<uint32_t>(h >> 32), static_cast<int32_t>(id)};
          ++size_;
          break;
        }
        if (s.hash == static_cast<uint32_t>(h >> 32) && strings[s.id] == strings[id]) {
          s.id = static_cast<int32_t>(id);
          break;
        }
      }
    }
  }

  // The id of `key` in `strings` (the vector build() indexed), or -1.
  int32_t find(std::string_view key, const std::vector<std::string>& strings) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash(key);
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.hash == static_cast<uint32_t>(h >> 32) && strings[s.id] == key) return s.id;
    }
  }

  std::size_t size() const { return size_; }

 private:
  static uint64_t hash(std::string_view s) { return XXH3_64bits(s.data(), s.size()); }
  struct Slot {
    uint32_t hash;  // high half of the 64-bit hash; the low half picked the slot
    int32_t id;     // -1: empty
  };
  std::vector<Slot> slots_;
  std::size_t mask_ = 0, size_ = 0;
};

}  // namespace ft::protocol::tok
