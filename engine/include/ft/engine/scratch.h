// Temporaries of a forward pass without allocating on the hot path: a bump allocator whose frames
// return what they took when they end. Blocks of memory are kept between passes, so once a pass of
// a given size has run, the next one allocates nothing. The memory is host RAM, or a backend's
// (a GPU's) when one is given: then the pointers are for that backend's ops only.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "ft/engine/memory.h"

namespace ft::engine {

class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(std::shared_ptr<Memory> memory) : memory_(std::move(memory)) {}

  // Everything taken while a frame lives is given back when it ends (frames nest).
  class Frame {
   public:
    explicit Frame(Scratch& s) : s_(s), block_(s.block_), used_(s.used_) {}
    ~Frame() {
      s_.block_ = block_;
      s_.used_ = used_;
    }
    Frame(const Frame&) = delete;
    Frame& operator=(const Frame&) = delete;

   private:
    Scratch& s_;
    std::size_t block_, used_;
  };

  // n elements of T, 64-byte aligned, uninitialised, valid until the enclosing frame ends.
  template <typename T>
  T* take(std::size_t n) {
    return static_cast<T*>(bytes(n * sizeof(T)));
  }
  float* floats(std::size_t n) { return take<float>(n); }

  std::size_t capacity() const;   // bytes held
  std::size_t available() const;  // bytes that can be taken from now on without allocating
  // Holds at least `bytes` in one block from now on (call before the first pass: a workspace of a
  // known size instead of blocks grown pass by pass). Fails only when the memory does.
  bool reserve(std::size_t bytes);

  // Lends out the reserved block's memory past its first `keep` bytes (one block held; what is
  // taken now stays below): takes past that then fail (std::bad_alloc) instead of growing, until
  // reclaim_tail().
  // Empty when there is nothing to lend. The GPU backend lends its workspace to the expert cache
  // while passes are decode steps, which take little.
  std::span<std::byte> lend_tail(std::size_t keep);
  void reclaim_tail() { limit_ = kNoLimit; }
  bool lent() const { return limit_ != kNoLimit; }
  // The most bytes taken at once since the last call (what a lend must keep).
  std::size_t take_peak();

 private:
  static constexpr std::size_t kNoLimit = ~std::size_t(0);
  void* bytes(std::size_t n);
  struct Block {
    std::unique_ptr<std::byte[]> host;
    MemoryBlock device;
    std::byte* base = nullptr;
    std::size_t size = 0;
  };
  std::shared_ptr<Memory> memory_;  // null: host RAM
  std::vector<Block> blocks_;
  std::size_t block_ = 0;  // the block being filled
  std::size_t used_ = 0;   // bytes used in it
  std::size_t limit_ = kNoLimit;  // lend_tail's keep: block 0's usable bytes
  std::size_t peak_ = 0;          // the largest used_ of block 0 (take_peak)
};

}  // namespace ft::engine
