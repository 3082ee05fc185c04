#include "ft/engine/scratch.h"

#include <algorithm>
#include <cstdint>

namespace ft::engine {

namespace {
constexpr std::size_t kAlign = 64;
constexpr std::size_t kMinBlock = std::size_t(16) << 20;
}  // namespace

void* Scratch::bytes(std::size_t n) {
  n = (std::max<std::size_t>(n, 1) + kAlign - 1) / kAlign * kAlign;
  // Move on to the first later block with room; blocks already allocated are reused.
  while (block_ < blocks_.size() && used_ + n > blocks_[block_].size) {
    ++block_;
    used_ = 0;
  }
  if (block_ == blocks_.size()) {
    const std::size_t size = std::max({n + kAlign, kMinBlock, blocks_.empty() ? 0 : 2 * blocks_.back().size});
    blocks_.push_back({std::make_unique_for_overwrite<std::byte[]>(size), size});
    used_ = 0;
  }
  Block& b = blocks_[block_];
  const auto base = reinterpret_cast<std::uintptr_t>(b.data.get());
  const std::size_t start = ((base + used_ + kAlign - 1) & ~std::uintptr_t(kAlign - 1)) - base;
  if (start + n > b.size) {  // alignment padding pushed it over: next block
    ++block_;
    used_ = 0;
    return bytes(n);
  }
  used_ = start + n;
  return b.data.get() + start;
}

std::size_t Scratch::capacity() const {
  std::size_t n = 0;
  for (const Block& b : blocks_) n += b.size;
  return n;
}

}  // namespace ft::engine
