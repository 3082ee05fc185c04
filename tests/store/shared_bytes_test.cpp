// What the RAM tier's budget and the write-behind queue count: memory several states view, once.
#include "ft/store/shared_bytes.h"

#include <gtest/gtest.h>

#include "store_test_util.h"

namespace ft::store {
namespace {

class Page final : public ChunkOwner {
 public:
  explicit Page(std::size_t n) : bytes_(n) {}
  std::span<const std::byte> view() const { return bytes_; }
  void wait_ready() const override { ADD_FAILURE() << "counting read the bytes"; }

 private:
  std::vector<std::byte> bytes_;
};

// Own bytes `own`, then views of `pages` (a page may appear twice: one state, one page, two chunks).
ModelState state(std::size_t own, const std::vector<std::shared_ptr<Page>>& pages) {
  ModelState s = testing::make_state(testing::model(1), 1, {own}, 7);
  for (std::size_t j = 0; j < pages.size(); ++j)
    s.chunks.push_back(testing::page_chunk(j, ChunkBytes::shared(pages[j]->view(), pages[j])));
  return s;
}

TEST(SharedBytes, FootprintNamesEachViewedMemoryOnce) {
  auto a = std::make_shared<Page>(4096), b = std::make_shared<Page>(512);
  const ModelState s = state(100, {a, b, a});
  const StateFootprint f = StateFootprint::of(s);
  EXPECT_EQ(f.own_bytes, 100u);
  ASSERT_EQ(f.shared.size(), 2u);
  EXPECT_EQ(f.shared[0].second + f.shared[1].second, 4096u + 512u);
}

TEST(SharedBytes, CountsSharedMemoryOnceWhileAnyHolderRemains) {
  auto p0 = std::make_shared<Page>(1000), p1 = std::make_shared<Page>(2000);
  const StateFootprint first = StateFootprint::of(state(10, {p0}));
  const StateFootprint second = StateFootprint::of(state(20, {p0, p1}));
  SharedBytes count;
  EXPECT_EQ(count.added_by(first), 1010u);
  count.add(first);
  EXPECT_EQ(count.added_by(second), 2020u);  // p0 is held already
  count.add(second);
  EXPECT_EQ(count.bytes(), 10u + 20 + 1000 + 2000);
  count.remove(first);  // p0 stays: the second holds it
  EXPECT_EQ(count.bytes(), 20u + 1000 + 2000);
  count.remove(second);
  EXPECT_EQ(count.bytes(), 0u);
  EXPECT_EQ(count.added_by(first), 1010u);  // p0 left with its last holder
}

}  // namespace
}  // namespace ft::store
