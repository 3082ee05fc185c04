#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "ft/engine/memory.h"

namespace ft::engine {
namespace {

class HostMemory final : public HostVisibleMemory {
 public:
  Result<std::byte*> allocate(std::size_t n) override {
    // Address space only: the kernel commits (zero-filled) memory as it is first written.
    void* p = ::mmap(nullptr, std::max<std::size_t>(n, 1), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return unavailable("cannot reserve " + std::to_string(n >> 20) + " MiB of address space: " + std::strerror(errno));
    return static_cast<std::byte*>(p);
  }
  void free(std::byte* p, std::size_t n) override { ::munmap(p, std::max<std::size_t>(n, 1)); }
};

}  // namespace

void HostVisibleMemory::zero(std::byte* p, std::size_t n) { std::memset(p, 0, n); }
void HostVisibleMemory::copy(std::byte* dst, const std::byte* src, std::size_t n) { std::memcpy(dst, src, n); }
void HostVisibleMemory::to_host(void* dst, const std::byte* src, std::size_t n) { std::memcpy(dst, src, n); }
void HostVisibleMemory::from_host(std::byte* dst, const void* src, std::size_t n) { std::memcpy(dst, src, n); }

std::shared_ptr<Memory> host_memory() {
  static const std::shared_ptr<Memory> memory = std::make_shared<HostMemory>();
  return memory;
}

Result<MemoryBlock> MemoryBlock::allocate(std::shared_ptr<Memory> memory, std::size_t bytes) {
  MemoryBlock b;
  FT_ASSIGN_OR_RETURN(b.data_, memory->allocate(bytes));
  b.bytes_ = bytes;
  b.memory_ = std::move(memory);
  return b;
}

MemoryBlock& MemoryBlock::operator=(MemoryBlock&& o) noexcept {
  if (this != &o) {
    reset();
    memory_ = std::move(o.memory_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void MemoryBlock::reset() {
  if (data_) memory_->free(data_, bytes_);
  data_ = nullptr;
  bytes_ = 0;
  memory_.reset();
}

}  // namespace ft::engine
