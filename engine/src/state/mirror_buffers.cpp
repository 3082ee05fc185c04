#include "state/mirror_buffers.h"

#include <cstring>

namespace ft::engine {

MirrorBuffers::~MirrorBuffers() {
  for (std::byte* p : free_)
    if (!in_reserve(p)) memory_->free(p, bytes_);
}

std::shared_ptr<std::byte> MirrorBuffers::take() {
  std::byte* p = nullptr;
  {
    std::lock_guard lock(mu_);
    if (!free_.empty()) {
      p = free_.back();
      free_.pop_back();
    }
  }
  if (!p) {
    auto got = memory_->allocate(bytes_);
    if (!got.is_ok()) return nullptr;
    p = *got;
    allocated_.fetch_add(1);
  }
  return std::shared_ptr<std::byte>(p, [self = shared_from_this()](std::byte* q) { self->give_back(q); });
}

Status MirrorBuffers::reserve(std::size_t count) {
  std::lock_guard lock(mu_);
  if (reserve_.data() || count == 0) return Status::ok();
  FT_ASSIGN_OR_RETURN(reserve_, MemoryBlock::allocate(memory_, count * bytes_));
  // Touched now: host memory is committed as it is first written, ~1 GB/s of page faults.
  if (memory_->is_host()) std::memset(reserve_.data(), 0, reserve_.size());
  for (std::size_t i = count; i-- > 0;) free_.push_back(reserve_.data() + i * bytes_);
  allocated_.fetch_add(count);
  return Status::ok();
}

std::size_t MirrorBuffers::free_count() const {
  std::lock_guard lock(mu_);
  return free_.size();
}

void MirrorBuffers::give_back(std::byte* p) {
  std::lock_guard lock(mu_);
  free_.push_back(p);
}

}  // namespace ft::engine
