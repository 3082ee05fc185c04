#include "ft/engine/kv_pool.h"

#include <algorithm>
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
                                               std::shared_ptr<Memory> memory, std::uint64_t chunk_bytes) {
  const std::uint64_t page = layout.page_bytes();
  if (page == 0) return invalid_argument("KV pool: empty page layout");
  const std::uint64_t pages = budget_bytes / page;
  if (pages == 0) {
    return invalid_argument("KV budget of " + std::to_string(budget_bytes >> 20) + " MiB is below one page (" +
                            std::to_string(page >> 20) + " MiB = " + std::to_string(layout.page_tokens) +
                            " tokens of every attention layer)");
  }
  if (pages > UINT32_MAX) return invalid_argument("KV budget too large");
  const std::uint64_t chunk_pages = std::max<std::uint64_t>(1, chunk_bytes / page);
  std::vector<MemoryBlock> chunks;
  for (std::uint64_t first = 0; first < pages; first += chunk_pages) {
    // On the host this is address space only: memory is committed as pages are first written.
    auto block = MemoryBlock::allocate(memory, std::min(chunk_pages, pages - first) * page);
    if (!block) return unavailable("KV pool: " + block.status().message());
    chunks.push_back(std::move(block).value());
  }
  return std::make_shared<KvPool>(Key{}, layout, std::move(memory), std::move(chunks), pages, chunk_pages);
}

KvPool::KvPool(const Key&, const KvLayout& layout, std::shared_ptr<Memory> memory, std::vector<MemoryBlock> chunks,
               std::uint64_t pages, std::uint64_t chunk_pages)
    : layout_(layout),
      memory_(std::move(memory)),
      max_pages_(pages),
      chunk_pages_(chunk_pages),
      chunks_(std::move(chunks)),
      chunk_used_(chunks_.size(), 0),
      capacity_(pages) {
  counters_.page_bytes = layout.page_bytes();
  counters_.pages_total = pages;
  counters_.pages_max = pages;
}

KvPool::~KvPool() = default;

void KvPool::set_reclaimer(std::function<bool()> reclaimer) {
  std::lock_guard lock(reclaimer_mu_);
  reclaimer_ = std::move(reclaimer);
}

bool KvPool::reclaim() {
  std::lock_guard lock(reclaimer_mu_);
  return reclaimer_ && reclaimer_();
}

Result<KvPageRef> KvPool::allocate(Reclaim reclaim) {
  const std::size_t page = layout_.page_bytes();
  std::uint32_t index;
  bool reused;
  std::byte* data;
  for (;;) {
    std::unique_lock lock(mu_);
    if (!free_.empty()) {  // the lowest: pages stay packed into the bottom chunks
      index = *free_.begin();
      free_.erase(free_.begin());
      reused = true;
    } else if (high_water_ < capacity_) {
      index = std::uint32_t(high_water_++);
      counters_.pages_touched = high_water_;
      reused = false;
    } else {
      lock.unlock();  // the reclaimer's holders give their pages back through release()
      if (reclaim == Reclaim::kYes && this->reclaim()) continue;
      lock.lock();
      ++counters_.exhausted;
      return unavailable("KV budget exhausted: all " + std::to_string(capacity_) + " pages (" +
                         std::to_string(capacity_ * std::uint64_t(layout_.page_tokens)) + " tokens) are in use");
    }
    ++counters_.pages_used;
    ++chunk_used_[index / chunk_pages_];
    data = chunks_[index / chunk_pages_].data() + std::size_t(index % chunk_pages_) * page;
    break;
  }
  // A reused page is zeroed: its tail is stored with checkpoints and must not carry another
  // sequence's keys. Fresh pages are zero already.
  if (reused) memory_->zero(data, page);
  return std::make_shared<KvPage>(KvPage::Key{}, shared_from_this(), index, data);
}

Result<KvPageRef> KvPool::copy_of(const KvPage& source) {
  FT_ASSIGN_OR_RETURN(KvPageRef page, allocate());
  memory_->copy(page->data(), source.data(), layout_.page_bytes());
  std::lock_guard lock(mu_);
  ++counters_.copies;
  return page;
}

KvPageRef KvPool::page_of(const store::ChunkBytes& bytes) const {
  if (auto page = std::dynamic_pointer_cast<const KvPage>(bytes.owner())) {
    if (page->pool() == this && page->data() == bytes.shared_address()) return std::const_pointer_cast<KvPage>(page);
    return nullptr;
  }
  if (auto mirror = std::dynamic_pointer_cast<const KvPageMirror>(bytes.owner())) {
    if (KvPageRef page = mirror->page(); page && page->pool() == this) return page;
  }
  return nullptr;
}

void KvPool::release(std::uint32_t index) {
  std::lock_guard lock(mu_);
  free_.insert(index);
  --counters_.pages_used;
  --chunk_used_[index / chunk_pages_];
}

std::uint64_t KvPool::set_capacity(std::uint64_t pages) {
  pages = std::clamp<std::uint64_t>(pages, 1, max_pages_);
  // Pages a checkpoint tier keeps may pin a chunk above `pages`: it lets them go, least recently
  // used first, until the chunk is free (a sequence's pages stay where they are).
  while (resize(pages) > pages && chunks_blocked(pages) && reclaim()) {
  }
  std::lock_guard lock(mu_);
  return capacity_;
}

bool KvPool::chunks_blocked(std::uint64_t pages) const {
  std::lock_guard lock(mu_);
  return chunks_.size() > 1 && capacity_ > pages && chunk_used_.back() > 0;
}

std::uint64_t KvPool::resize(std::uint64_t pages) {
  std::vector<MemoryBlock> gone;  // freed after the lock: a GPU's free waits for copies reading them
  std::lock_guard lock(mu_);
  while (chunks_.size() > 1 && capacity_ > pages) {
    const std::size_t c = chunks_.size() - 1;
    const std::uint64_t first = c * chunk_pages_;
    if (chunk_used_[c] > 0) break;
    free_.erase(free_.lower_bound(std::uint32_t(first)), free_.end());
    high_water_ = std::min(high_water_, first);
    gone.push_back(std::move(chunks_.back()));
    chunks_.pop_back();
    chunk_used_.pop_back();
    capacity_ = first;
  }
  while (chunk_end(chunks_.size()) <= pages && capacity_ < pages) {
    const std::size_t c = chunks_.size();
    auto block = MemoryBlock::allocate(memory_, (chunk_end(c) - capacity_) * layout_.page_bytes());
    if (!block) break;  // as far as the memory allows
    chunks_.push_back(std::move(block).value());
    chunk_used_.push_back(0);
    capacity_ = chunk_end(c);  // new pages, zero: past high_water_
  }
  counters_.pages_total = capacity_;
  counters_.pages_touched = high_water_;
  return capacity_;
}

std::shared_ptr<MirrorBuffers> KvPool::mirror_buffer_pool() {
  std::lock_guard lock(mu_);
  if (!mirrors_) {
    std::shared_ptr<Memory> staging = memory_->staging_memory();
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
