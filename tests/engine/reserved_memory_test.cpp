// ReservedMemory: blocks come out of the one reservation while it lasts, a freed block serves the
// next block of its size (zeroed again), and past the reservation the memory underneath serves.
#include "ft/engine/reserved_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "counting_memory.h"

namespace ft::engine {
namespace {

TEST(ReservedMemory, BlocksComeFromTheReservationUntilItIsSpent) {
  auto under = std::make_shared<CountingMemory>();
  auto m = ReservedMemory::create(under, 3 * 512);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  ASSERT_EQ(under->allocations, 1);  // the reservation itself
  const std::byte* base = under->blocks[0];
  std::byte* a = *(*m)->allocate(500);  // 512 once aligned
  std::byte* b = *(*m)->allocate(512);
  std::byte* c = *(*m)->allocate(300);  // 512 too
  EXPECT_EQ(a, base);
  EXPECT_EQ(b, base + 512);
  EXPECT_EQ(c, base + 1024);
  EXPECT_EQ((*m)->bytes_in_use(), 3u * 512);
  EXPECT_EQ(under->allocations, 1);
  std::byte* d = *(*m)->allocate(100);  // spent: from underneath
  EXPECT_EQ(under->allocations, 2);
  EXPECT_TRUE(d < base || d >= base + 3 * 512);
  (*m)->free(d, 100);
  EXPECT_EQ(under->frees, 1);
  EXPECT_EQ((*m)->bytes_in_use(), 3u * 512);
}

TEST(ReservedMemory, AFreedBlockServesTheNextOfItsSizeZeroed) {
  auto under = std::make_shared<CountingMemory>();
  auto m = ReservedMemory::create(under, 4096);
  ASSERT_TRUE(m.is_ok());
  std::byte* small = *(*m)->allocate(256);
  std::byte* big = *(*m)->allocate(1024);
  std::memset(big, 0x5a, 1024);
  (*m)->free(big, 1024);
  EXPECT_EQ((*m)->bytes_in_use(), 256u);
  EXPECT_EQ(*(*m)->allocate(256), small + 256 + 1024);  // another size: a new block
  std::byte* again = *(*m)->allocate(1000);             // 1024 once aligned: the freed one
  EXPECT_EQ(again, big);
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(again[i], std::byte{0}) << i;
  EXPECT_EQ(under->allocations, 1);
  EXPECT_EQ(under->frees, 0);
}

TEST(ReservedMemory, AnEmptyReservationPassesEverythingThrough) {
  auto under = std::make_shared<CountingMemory>();
  auto m = ReservedMemory::create(under, 0);
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(under->allocations, 0);
  std::byte* p = *(*m)->allocate(64);
  EXPECT_EQ(p, under->blocks[0]);
  (*m)->free(p, 64);
  EXPECT_EQ(under->frees, 1);
  EXPECT_TRUE((*m)->is_host());
}

}  // namespace
}  // namespace ft::engine
