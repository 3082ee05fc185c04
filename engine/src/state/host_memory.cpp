#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "ft/engine/memory.h"

namespace ft::engine {
namespace {

constexpr std::size_t kPage = 4096, kHugePage = std::size_t(2) << 20;

class HostMemory final : public HostVisibleMemory {
 public:
  Result<std::byte*> allocate(std::size_t n) override {
    // Address space only: the kernel commits (zero-filled) memory as it is first written. A block
    // of 2 MiB or more starts on a 2 MiB boundary and asks for huge pages: a prefill chunk writes
    // hundreds of MB of fresh KV pages, and at 4 KiB a page that was a fault every 4 KiB (4% of a
    // 4,096-token CPU prefill on the Xeon host, the kv_write op's time).
    const std::size_t bytes = (std::max<std::size_t>(n, 1) + kPage - 1) / kPage * kPage;
    const std::size_t slack = bytes >= kHugePage ? kHugePage : 0;
    void* p = ::mmap(nullptr, bytes + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return unavailable("cannot reserve " + std::to_string(n >> 20) + " MiB of address space: " + std::strerror(errno));
    auto* base = static_cast<std::byte*>(p);
    if (slack == 0) return base;
    // Keep [aligned, aligned + bytes) and give back the slack on either side.
    const std::size_t head = (kHugePage - reinterpret_cast<std::uintptr_t>(base) % kHugePage) % kHugePage;
    if (head > 0) ::munmap(base, head);
    if (slack - head > 0) ::munmap(base + head + bytes, slack - head);
    (void)::madvise(base + head, bytes, MADV_HUGEPAGE);  // a hint: 4 KiB pages where refused
    return base + head;
  }
  void free(std::byte* p, std::size_t n) override { ::munmap(p, std::max<std::size_t>(n, 1)); }  // (rounded to pages)
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
