// The pass allocator: frames give back what they took, blocks are kept between passes, and a
// workspace reserved up front serves passes up to its size without growing.
#include "ft/engine/scratch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <new>
#include <span>

namespace ft::engine {
namespace {

TEST(Scratch, FramesGiveBackWhatTheyTookAndPointersAreAligned) {
  Scratch s;
  float* first = nullptr;
  {
    Scratch::Frame f(s);
    first = s.floats(1000);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % 64, 0u);
    float* second = s.floats(3);
    EXPECT_GE(second, first + 1000);
  }
  Scratch::Frame f(s);
  EXPECT_EQ(s.floats(10), first);  // the same memory again
}

TEST(Scratch, AReservedWorkspaceServesPassesUpToItsSizeWithoutGrowing) {
  Scratch s;
  ASSERT_TRUE(s.reserve(std::size_t(64) << 20));
  const std::size_t held = s.capacity();
  EXPECT_GE(held, std::size_t(64) << 20);
  EXPECT_LT(held, std::size_t(65) << 20);  // one block of about that size, not a doubling chain
  for (int pass = 0; pass < 3; ++pass) {
    Scratch::Frame f(s);
    for (int i = 0; i < 60; ++i) s.take<std::byte>(std::size_t(1) << 20);
    EXPECT_EQ(s.capacity(), held);
  }
  {
    Scratch::Frame f(s);
    s.take<std::byte>(std::size_t(80) << 20);  // beyond the workspace: it grows
    EXPECT_GT(s.capacity(), held);
  }
  EXPECT_TRUE(s.reserve(std::size_t(1) << 20));  // already held: nothing changes
}

TEST(Scratch, ALentTailIsNotTakenUntilItComesBack) {
  Scratch s;
  const std::size_t MiB = std::size_t(1) << 20;
  ASSERT_TRUE(s.reserve(64 * MiB));
  std::byte* base = nullptr;
  {
    Scratch::Frame f(s);
    base = s.take<std::byte>(MiB);
    s.take<std::byte>(3 * MiB);
    // What is taken stays: lending 1 MiB keeps the 4 taken.
    const std::span<std::byte> t = s.lend_tail(MiB);
    ASSERT_FALSE(t.empty());
    EXPECT_GE(t.data(), base + 4 * MiB);
    EXPECT_THROW(s.take<std::byte>(MiB), std::bad_alloc);
    s.reclaim_tail();
  }
  EXPECT_GE(s.take_peak(), 4 * MiB);
  const std::span<std::byte> tail = s.lend_tail(16 * MiB);
  ASSERT_FALSE(tail.empty());
  EXPECT_TRUE(s.lent());
  EXPECT_EQ(tail.size(), s.capacity() - 16 * MiB);  // the block past the kept 16 MiB
  EXPECT_GE(tail.data() + 64, base + 16 * MiB);     // (the first take was the block's start, aligned)
  EXPECT_LE(tail.data(), base + 16 * MiB);
  EXPECT_TRUE(s.lend_tail(8 * MiB).empty());  // once
  const std::size_t held = s.capacity();
  {
    Scratch::Frame f(s);
    EXPECT_LE(s.available(), 16 * MiB);
    for (int i = 0; i < 15; ++i) {
      std::byte* p = s.take<std::byte>(MiB);
      EXPECT_LT(p + MiB, tail.data() + 1);  // never inside the lent memory
    }
    EXPECT_THROW(s.take<std::byte>(2 * MiB), std::bad_alloc);  // no growing either
    EXPECT_EQ(s.capacity(), held);
  }
  EXPECT_FALSE(s.reserve(128 * MiB));
  s.reclaim_tail();
  EXPECT_FALSE(s.lent());
  Scratch::Frame f(s);
  for (int i = 0; i < 60; ++i) s.take<std::byte>(MiB);  // the whole workspace again
  EXPECT_EQ(s.capacity(), held);
}

}  // namespace
}  // namespace ft::engine
