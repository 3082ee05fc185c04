// Blocks carved out of one reservation made up front: the GPU's room for the sequences' linear
// state (placement.h), taken from the budget at load so that the KV pool can fill the rest and a
// sequence starting later still finds its state's memory, without a cudaMalloc (which waits for the
// whole device) in the middle of other sequences' decode. A freed block is kept for the next block
// of its size (every sequence's state has the same few sizes); once the reservation is spent,
// blocks come from the memory underneath. Copies, fills and snapshots are the underlying memory's.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "ft/engine/memory.h"

namespace ft::engine {

class ReservedMemory final : public Memory {
 public:
  // Blocks are aligned to (and sized in multiples of) this many bytes.
  static constexpr std::size_t kAlign = 256;
  static std::size_t aligned(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

  static Result<std::shared_ptr<ReservedMemory>> create(std::shared_ptr<Memory> under, std::size_t bytes);

  std::size_t reserved_bytes() const { return reservation_.size(); }
  // Bytes of the reservation in blocks handed out now (for tests and the status page).
  std::size_t bytes_in_use() const;

  bool is_host() const override { return under_->is_host(); }
  Result<std::byte*> allocate(std::size_t n) override;
  void free(std::byte* p, std::size_t n) override;
  void zero(std::byte* p, std::size_t n) override { under_->zero(p, n); }
  void copy(std::byte* dst, const std::byte* src, std::size_t n) override { under_->copy(dst, src, n); }
  void to_host(void* dst, const std::byte* src, std::size_t n) override { under_->to_host(dst, src, n); }
  void from_host(std::byte* dst, const void* src, std::size_t n) override { under_->from_host(dst, src, n); }
  std::shared_ptr<const CopyFence> to_host_async(void* dst, const std::byte* src, std::size_t n) override {
    return under_->to_host_async(dst, src, n);
  }
  std::shared_ptr<const CopyFence> snapshot_to_host(void* dst, const std::byte* src, std::size_t n) override {
    return under_->snapshot_to_host(dst, src, n);
  }
  std::shared_ptr<Memory> staging_memory() override { return under_->staging_memory(); }

 private:
  explicit ReservedMemory(std::shared_ptr<Memory> under) : under_(std::move(under)) {}
  bool owns(const std::byte* p) const {
    return p >= reservation_.data() && p < reservation_.data() + reservation_.size();
  }

  std::shared_ptr<Memory> under_;
  MemoryBlock reservation_;
  mutable std::mutex mu_;
  std::size_t next_ = 0;                          // first never-used byte of the reservation
  std::multimap<std::size_t, std::byte*> freed_;  // aligned size -> freed block of the reservation
  std::size_t in_use_ = 0;
};

}  // namespace ft::engine
