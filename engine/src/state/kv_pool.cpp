#include "ft/engine/kv_pool.h"

#include <cstring>
#include <mutex>

#include "state/mirror_buffers.h"

namespace ft::engine {

const char* kv_dtype_name(KvDType dtype) { return dtype == KvDType::kBf16 ? "bf16" : "f32"; }

KvPage::KvPage(const Key&, std::shared_ptr<KvPool> pool, std::uint32_t index, std::byte* data)
    : pool_(std::move(pool)), index_(index), data_(data) {}

KvPage::~KvPage() { pool_->release(index_); }

std::shared_ptr<const KvPageMirror> KvPage::mirror() const {
  std::lock_guard lock(mirror_mu_);
  return mirror_;
}

void KvPage::set_mirror(std::shared_ptr<const KvPageMirror> mirror) {
  std::lock_guard lock(mirror_mu_);
  mirror_ = std::move(mirror);
}

Result<std::shared_ptr<KvPool>> KvPool::create(const KvLayout& layout, std::uint64_t budget_bytes,
                                               std::shared_ptr<Memory> memory) {
  const std::uint64_t page = layout.page_bytes();
  if (page == 0) return invalid_argument("KV pool: empty page layout");
  const std::uint64_t pages = budget_bytes / page;
  if (pages == 0) {
    return invalid_argument("KV budget of " + std::to_string(budget_bytes >> 20) + " MiB is below one page (" +
                            std::to_string(page >> 20) + " MiB = " + std::to_string(layout.page_tokens) +
                            " tokens of every attention layer)");
  }
  if (pages > UINT32_MAX) return invalid_argument("KV budget too large");
  // On the host this is address space only: memory is committed as pages are first written.
  auto block = MemoryBlock::allocate(std::move(memory), pages * page);
  if (!block) return unavailable("KV pool: " + block.status().message());
  return std::make_shared<KvPool>(Key{}, layout, std::move(block).value(), pages);
}

KvPool::KvPool(const Key&, const KvLayout& layout, MemoryBlock block, std::uint64_t pages)
    : layout_(layout), block_(std::move(block)), base_(block_.data()), pages_(pages) {
  counters_.page_bytes = layout.page_bytes();
  counters_.pages_total = pages;
}

KvPool::~KvPool() = default;

Result<KvPageRef> KvPool::allocate() {
  const std::size_t page = layout_.page_bytes();
  std::uint32_t index;
  bool reused;
  {
    std::lock_guard lock(mu_);
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
      reused = true;
    } else if (high_water_ < pages_) {
      index = std::uint32_t(high_water_++);
      counters_.pages_touched = high_water_;
      reused = false;
    } else {
      ++counters_.exhausted;
      return unavailable("KV budget exhausted: all " + std::to_string(pages_) + " pages (" +
                         std::to_string(pages_ * std::uint64_t(layout_.page_tokens)) + " tokens) are in use");
    }
    ++counters_.pages_used;
  }
  std::byte* data = base_ + std::size_t(index) * page;
  // A reused page is zeroed: its tail is stored with checkpoints and must not carry another
  // sequence's keys. Fresh pages are zero already.
  if (reused) block_.memory()->zero(data, page);
  return std::make_shared<KvPage>(KvPage::Key{}, shared_from_this(), index, data);
}

Result<KvPageRef> KvPool::copy_of(const KvPage& source) {
  FT_ASSIGN_OR_RETURN(KvPageRef page, allocate());
  block_.memory()->copy(page->data(), source.data(), layout_.page_bytes());
  std::lock_guard lock(mu_);
  ++counters_.copies;
  return page;
}

void KvPool::release(std::uint32_t index) {
  std::lock_guard lock(mu_);
  free_.push_back(index);
  --counters_.pages_used;
}

std::shared_ptr<MirrorBuffers> KvPool::mirror_buffer_pool() {
  std::lock_guard lock(mu_);
  if (!mirrors_) {
    std::shared_ptr<Memory> staging = block_.memory()->staging_memory();
    if (!staging) return nullptr;
    mirrors_ = std::make_shared<MirrorBuffers>(std::move(staging), layout_.page_bytes());
  }
  return mirrors_;
}

std::shared_ptr<std::byte> KvPool::mirror_buffer() {
  const std::shared_ptr<MirrorBuffers> buffers = mirror_buffer_pool();
  return buffers ? buffers->take() : nullptr;
}

Status KvPool::reserve_mirror_buffers(std::size_t count) {
  const std::shared_ptr<MirrorBuffers> buffers = mirror_buffer_pool();
  return buffers ? buffers->reserve(count) : Status::ok();
}

std::size_t KvPool::free_mirror_buffers() const {
  std::lock_guard lock(mu_);
  return mirrors_ ? mirrors_->free_count() : 0;
}

std::uint64_t KvPool::mirror_buffers() const {
  std::lock_guard lock(mu_);
  return mirrors_ ? mirrors_->allocated() : 0;
}

void KvPool::count_mirror() {
  std::lock_guard lock(mu_);
  ++counters_.mirrored;
}

KvPoolStats KvPool::stats() const {
  std::lock_guard lock(mu_);
  return counters_;
}

}  // namespace ft::engine
