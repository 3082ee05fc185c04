// Bytes held by a set of saved states, where memory several of them view (ChunkBytes::shared: the
// KV pages every checkpoint of one growing sequence holds) counts once. The host-RAM tier's budget
// and the write-behind queue's byte bound both count this way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "ft/store/checkpoint_format.h"

namespace ft::store {

// One state's bytes: the views of shared memory (each once) and the bytes it holds alone.
struct StateFootprint {
  using SharedChunk = std::pair<const std::byte*, std::uint64_t>;  // memory, size
  std::uint64_t own_bytes = 0;
  std::vector<SharedChunk> shared;

  // Shared views by address (an identity: their bytes are not waited for); owned chunks are own bytes.
  static StateFootprint of(const ModelState& state);
};

// The bytes a multiset of footprints holds: own bytes summed, shared chunks once while any holds them.
class SharedBytes {
 public:
  std::uint64_t bytes() const { return bytes_; }
  std::uint64_t added_by(const StateFootprint& f) const;  // what add(f) would add
  void add(const StateFootprint& f);
  void remove(const StateFootprint& f);  // one that was added

 private:
  std::uint64_t bytes_ = 0;
  std::map<StateFootprint::SharedChunk, std::uint32_t> holders_;
};

}  // namespace ft::store
