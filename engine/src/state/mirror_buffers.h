// Page-sized host buffers for the KV pages' host copies at checkpoints (KvPageMirror), in a
// Memory's staging memory (host RAM for a GPU's pages: the copies go through the GPU memory's own
// page-locked bounce buffers, engine/cuda/host_copier.h), reused through a free list. A reserve
// made and touched at load spares the first checkpoints the page faults of fresh memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ft/engine/memory.h"

namespace ft::engine {

class MirrorBuffers : public std::enable_shared_from_this<MirrorBuffers> {
 public:
  MirrorBuffers(std::shared_ptr<Memory> memory, std::size_t bytes) : memory_(std::move(memory)), bytes_(bytes) {}
  ~MirrorBuffers();
  MirrorBuffers(const MirrorBuffers&) = delete;
  MirrorBuffers& operator=(const MirrorBuffers&) = delete;

  // A buffer, handed back to the free list when its last holder lets go (each holds this object,
  // so it outlives the pool when a checkpoint keeps a mirror longer). Allocated here when none is
  // free; null when that fails.
  std::shared_ptr<std::byte> take();
  // `count` buffers in one allocation, on the free list ahead of any checkpoint. Once only.
  Status reserve(std::size_t count);

  std::uint64_t allocated() const { return allocated_.load(); }  // buffers made so far
  std::size_t free_count() const;

 private:
  bool in_reserve(const std::byte* p) const { return p >= reserve_.data() && p < reserve_.data() + reserve_.size(); }
  void give_back(std::byte* p);

  const std::shared_ptr<Memory> memory_;
  const std::size_t bytes_;
  mutable std::mutex mu_;
  std::vector<std::byte*> free_;
  MemoryBlock reserve_;  // freed after every buffer of it is back (they hold this object)
  std::atomic<std::uint64_t> allocated_{0};
};

}  // namespace ft::engine
