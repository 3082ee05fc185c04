#include "ft/engine/scratch.h"

#include <algorithm>
#include <cstdint>
#include <new>
#include <utility>

namespace ft::engine {

namespace {
constexpr std::size_t kAlign = 64;
constexpr std::size_t kMinBlock = std::size_t(16) << 20;
}  // namespace

void* Scratch::bytes(std::size_t n) {
  n = (std::max<std::size_t>(n, 1) + kAlign - 1) / kAlign * kAlign;
  // Block 0 ends at limit_ while its tail is lent.
  const auto size_of = [&](std::size_t b) { return b == 0 ? std::min(blocks_[0].size, limit_) : blocks_[b].size; };
  // Move on to the first later block with room; blocks already allocated are reused.
  while (block_ < blocks_.size() && used_ + n > size_of(block_)) {
    ++block_;
    used_ = 0;
  }
  if (block_ == blocks_.size()) {
    if (lent()) throw std::bad_alloc();  // the rest of the workspace is lent out
    const std::size_t size = std::max({n + kAlign, kMinBlock, blocks_.empty() ? 0 : 2 * blocks_.back().size});
    Block block;
    if (memory_) {
      auto got = MemoryBlock::allocate(memory_, size);
      if (!got) throw std::bad_alloc();  // the caller's pass cannot go on without its temporaries
      block.device = std::move(got).value();
      block.base = block.device.data();
    } else {
      block.host = std::make_unique_for_overwrite<std::byte[]>(size);
      block.base = block.host.get();
    }
    block.size = size;
    blocks_.push_back(std::move(block));
    used_ = 0;
  }
  Block& b = blocks_[block_];
  const auto base = reinterpret_cast<std::uintptr_t>(b.base);
  const std::size_t start = ((base + used_ + kAlign - 1) & ~std::uintptr_t(kAlign - 1)) - base;
  if (start + n > size_of(block_)) {  // alignment padding pushed it over: next block
    ++block_;
    used_ = 0;
    return bytes(n);
  }
  used_ = start + n;
  if (block_ == 0) peak_ = std::max(peak_, used_);
  return b.base + start;
}

std::span<std::byte> Scratch::lend_tail(std::size_t keep) {
  if (lent() || blocks_.size() != 1 || block_ != 0) return {};
  keep = (std::max(keep, used_) + kAlign - 1) / kAlign * kAlign;  // what is taken now stays
  if (keep >= blocks_[0].size) return {};
  limit_ = keep;
  return {blocks_[0].base + keep, blocks_[0].size - keep};
}

std::size_t Scratch::take_peak() { return std::exchange(peak_, std::size_t(0)); }

bool Scratch::reserve(std::size_t n) {
  if (capacity() >= n) return true;
  if (lent()) return false;
  try {
    blocks_.clear();
    block_ = used_ = 0;
    bytes(std::max(n, kMinBlock) - kAlign);  // allocates one block of that size
    block_ = used_ = 0;
    return true;
  } catch (const std::bad_alloc&) {
    return false;
  }
}

std::size_t Scratch::capacity() const {
  std::size_t n = 0;
  for (const Block& b : blocks_) n += b.size;
  return n;
}

std::size_t Scratch::available() const {
  std::size_t n = 0;
  for (std::size_t b = block_; b < blocks_.size(); ++b)
    n += (b == 0 ? std::min(blocks_[0].size, limit_) : blocks_[b].size) - (b == block_ ? used_ : 0);
  return n;
}

}  // namespace ft::engine
