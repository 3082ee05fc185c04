// KV pools in "device" memory for CI: host RAM behind the Memory interface with is_host() false,
// so the off-host checkpoint paths (page mirrors, asynchronous copies out, staging buffers, pages
// kept by a checkpoint tier) run without a GPU; and a sequence's keys written and read back.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "ft/engine/kv_pool.h"
#include "ft/engine/memory.h"
#include "ft/engine/sequence_state.h"

namespace ft::engine::testing {

// An asynchronous copy that runs when it is waited for (or when the memory must finish its copies
// first): a reader that did not wait would see the destination as it was before the copy.
class DeferredCopy final : public CopyFence {
 public:
  DeferredCopy(void* dst, const std::byte* src, std::size_t n, std::size_t& counter)
      : dst_(dst), src_(src), n_(n), counter_(counter) {}
  void wait() const override {
    std::call_once(done_, [this] {
      std::memcpy(dst_, src_, n_);
      counter_ += n_;
    });
  }

 private:
  void* dst_;
  const std::byte* src_;
  std::size_t n_;
  std::size_t& counter_;
  mutable std::once_flag done_;
};

// Host RAM that the code under test must treat as device memory: reads and writes only through
// to_host / from_host (counted). With `deferred`, to_host_async copies only when waited for, or
// before a zero() (the ordering a GPU's memory promises: a page reused after its copy was issued).
class OffHostMemory final : public Memory {
 public:
  bool is_host() const override { return false; }
  Result<std::byte*> allocate(std::size_t n) override { return host_->allocate(n); }
  void free(std::byte* p, std::size_t n) override { host_->free(p, n); }
  void zero(std::byte* p, std::size_t n) override {
    finish_copies();
    std::memset(p, 0, n);
  }
  void copy(std::byte* dst, const std::byte* src, std::size_t n) override { std::memcpy(dst, src, n); }
  void to_host(void* dst, const std::byte* src, std::size_t n) override {
    std::memcpy(dst, src, n);
    read_bytes += n;
  }
  std::shared_ptr<const CopyFence> to_host_async(void* dst, const std::byte* src, std::size_t n) override {
    if (!deferred) return Memory::to_host_async(dst, src, n);
    pending_.push_back(std::make_shared<DeferredCopy>(dst, src, n, read_bytes));
    return pending_.back();
  }
  // As a GPU's: a copy on the device now, moved out when waited for.
  std::shared_ptr<const CopyFence> snapshot_to_host(void* dst, const std::byte* src, std::size_t n) override {
    if (!deferred) return Memory::snapshot_to_host(dst, src, n);
    auto& copy = snapshots_.emplace_back(std::make_unique<std::vector<std::byte>>(src, src + n));
    pending_.push_back(std::make_shared<DeferredCopy>(dst, copy->data(), n, read_bytes));
    return pending_.back();
  }
  void from_host(std::byte* dst, const void* src, std::size_t n) override { std::memcpy(dst, src, n); }
  // As a GPU's memory offers page-locked host memory, when `staging` is set.
  std::shared_ptr<Memory> staging_memory() override { return staging; }
  void finish_copies() {
    for (const auto& c : pending_) c->wait();
    pending_.clear();
  }
  std::size_t read_bytes = 0;
  std::shared_ptr<Memory> staging;
  bool deferred = false;

 private:
  std::shared_ptr<Memory> host_ = host_memory();
  std::vector<std::shared_ptr<DeferredCopy>> pending_;
  std::vector<std::unique_ptr<std::vector<std::byte>>> snapshots_;  // the device copies snapshot_to_host read from
};

// Host memory that counts what is allocated and freed in it.
class CountedHostMemory final : public HostVisibleMemory {
 public:
  Result<std::byte*> allocate(std::size_t n) override {
    ++allocated;
    return host_->allocate(n);
  }
  void free(std::byte* p, std::size_t n) override {
    ++freed;
    host_->free(p, n);
  }
  int allocated = 0, freed = 0;

 private:
  std::shared_ptr<Memory> host_ = host_memory();
};

constexpr int64_t kPage = 16;

// Writes position `pos` of `state` (every layer, head and dim of K and V) with values derived from
// `tag` and the position, as a forward pass would: reserve, write, advance.
inline void append(SequenceState& state, Memory& mem, int64_t n, uint16_t tag) {
  ASSERT_TRUE(state.reserve(n).is_ok());
  const KvLayout& l = state.pool()->layout();
  for (int64_t pos = state.position(); pos < state.position() + n; ++pos) {
    std::byte* page = state.page_data()[std::size_t(pos / kPage)];
    const int64_t slot = pos % kPage;
    for (int64_t layer = 0; layer < l.layers; ++layer) {
      for (int64_t h = 0; h < l.kv_heads; ++h) {
        for (int64_t d = 0; d < l.head_dim; ++d) {
          const uint16_t v = uint16_t(tag * 1000 + pos * 7 + layer * 3 + h + d);
          mem.from_host(page + l.k_offset(layer, h) + std::size_t((slot * l.head_dim + d) * 2), &v, 2);
          mem.from_host(page + l.v_offset(layer, h) + std::size_t((d * kPage + slot) * 2), &v, 2);
        }
      }
    }
  }
  state.advance(n);
}

// K and V of position `pos` of `state`, as bytes.
inline std::vector<std::byte> token_bytes(const SequenceState& state, int64_t pos) {
  const KvLayout& l = state.pool()->layout();
  const std::byte* page = state.pages()[std::size_t(pos / kPage)]->data();
  std::vector<std::byte> out;
  for (int64_t layer = 0; layer < l.layers; ++layer) {
    for (int64_t h = 0; h < l.kv_heads; ++h) {
      for (int64_t d = 0; d < l.head_dim; ++d) {
        const std::byte* k = page + l.k_offset(layer, h) + std::size_t(((pos % kPage) * l.head_dim + d) * 2);
        const std::byte* v = page + l.v_offset(layer, h) + std::size_t((d * kPage + pos % kPage) * 2);
        out.insert(out.end(), k, k + 2);
        out.insert(out.end(), v, v + 2);
      }
    }
  }
  return out;
}

// A pool of `pages` pages of 16 tokens (2 layers, 2 kv heads of 8 dims) in OffHostMemory.
struct Pools {
  explicit Pools(std::uint64_t pages = 64) : pool(*KvPool::create(layout, pages * layout.page_bytes(), mem)) {}
  std::shared_ptr<OffHostMemory> mem = std::make_shared<OffHostMemory>();
  KvLayout layout{2, 2, 8, kPage, KvDType::kBf16, {}};
  std::shared_ptr<KvPool> pool;
  SequenceState fresh() { return SequenceState("m", pool, {}, mem); }
  // As a GPU's memory copies pages out: into staging buffers, asynchronously.
  void copy_like_a_gpu() {
    mem->staging = std::make_shared<CountedHostMemory>();
    mem->deferred = true;
  }
};

}  // namespace ft::engine::testing
