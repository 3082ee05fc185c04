// The pass allocator: frames give back what they took, blocks are kept between passes, and a
// workspace reserved up front serves passes up to its size without growing.
#include <gtest/gtest.h>

#include <cstdint>

#include "ft/engine/scratch.h"

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

}  // namespace
}  // namespace ft::engine
