#include "ft/engine/reserved_memory.h"

#include <algorithm>

namespace ft::engine {

Result<std::shared_ptr<ReservedMemory>> ReservedMemory::create(std::shared_ptr<Memory> under, std::size_t bytes) {
  std::shared_ptr<ReservedMemory> m(new ReservedMemory(under));  // private constructor
  if (bytes > 0) {
    FT_ASSIGN_OR_RETURN(m->reservation_, MemoryBlock::allocate(std::move(under), aligned(bytes)));
  }
  return m;
}

std::size_t ReservedMemory::bytes_in_use() const {
  std::lock_guard lock(mu_);
  return in_use_;
}

Result<std::byte*> ReservedMemory::allocate(std::size_t n) {
  const std::size_t size = aligned(std::max<std::size_t>(n, 1));
  std::byte* p = nullptr;
  {
    std::lock_guard lock(mu_);
    if (auto it = freed_.find(size); it != freed_.end()) {
      p = it->second;
      freed_.erase(it);
    } else if (next_ + size <= reservation_.size()) {
      p = reservation_.data() + next_;
      next_ += size;
    }
    if (p) in_use_ += size;
  }
  if (!p) return under_->allocate(n);
  // Zeroed like any new block; on a GPU this also waits for a snapshot still reading the block.
  under_->zero(p, size);
  return p;
}

void ReservedMemory::free(std::byte* p, std::size_t n) {
  if (!owns(p)) return under_->free(p, n);
  const std::size_t size = aligned(std::max<std::size_t>(n, 1));
  std::lock_guard lock(mu_);
  freed_.emplace(size, p);
  in_use_ -= size;
}

}  // namespace ft::engine
