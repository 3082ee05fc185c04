// The KV pool in chunks: pages go out lowest first, so the top chunks stay free; set_capacity gives
// back whole free chunks from the top (never one holding a page in use) and takes them again with
// new, zeroed pages; a pool at its capacity refuses more pages and recovers when they come back.
#include "ft/engine/kv_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "counting_memory.h"

namespace ft::engine {
namespace {

KvLayout small_layout() {
  KvLayout l;
  l.layers = 1;
  l.kv_heads = 1;
  l.head_dim = 32;
  l.page_tokens = 16;
  return l;  // 2 KiB a page
}

class KvPoolChunks : public ::testing::Test {
 protected:
  void SetUp() override {
    // 10 pages in chunks of 4: [0, 4) [4, 8) [8, 10).
    auto p = KvPool::create(layout_, 10 * layout_.page_bytes(), memory_, 4 * layout_.page_bytes());
    ASSERT_TRUE(p.is_ok()) << p.status().to_string();
    pool_ = *p;
    ASSERT_EQ(memory_->allocations, 3);
  }
  std::vector<KvPageRef> take(int n) {
    std::vector<KvPageRef> pages;
    for (int i = 0; i < n; ++i) {
      auto page = pool_->allocate();
      EXPECT_TRUE(page.is_ok()) << page.status().to_string();
      if (page.is_ok()) pages.push_back(*page);
    }
    return pages;
  }

  const KvLayout layout_ = small_layout();
  std::shared_ptr<CountingMemory> memory_ = std::make_shared<CountingMemory>();
  std::shared_ptr<KvPool> pool_;
};

TEST_F(KvPoolChunks, PagesGoOutLowestFirst) {
  auto pages = take(6);
  pages[1].reset();
  pages[4].reset();
  auto again = take(2);  // the two freed, lowest first, before any page never used
  EXPECT_EQ(again[0]->index(), 1u);
  EXPECT_EQ(again[1]->index(), 4u);
  EXPECT_EQ(take(1)[0]->index(), 6u);
  EXPECT_EQ(pool_->chunk_pages(), 4u);
}

TEST_F(KvPoolChunks, ShrinkingGivesBackTheFreeChunksFromTheTop) {
  auto pages = take(5);  // chunk 1 holds page 4
  EXPECT_EQ(pool_->set_capacity(1), 8u) << "chunk 1 is in use: only chunk 2 goes";
  EXPECT_EQ(memory_->frees, 1);
  EXPECT_EQ(pool_->stats().pages_total, 8u);
  EXPECT_EQ(pool_->stats().pages_max, 10u);
  pages[4].reset();
  EXPECT_EQ(pool_->set_capacity(1), 4u);  // chunk 0 stays, whatever is asked
  EXPECT_EQ(memory_->frees, 2);
  EXPECT_EQ(pool_->stats().pages_touched, 4u);

  // At its capacity the pool refuses, and a page coming back serves the next.
  auto refused = pool_->allocate();
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("all 4 pages"), std::string::npos) << refused.status().message();
  pages[2].reset();
  EXPECT_EQ(take(1)[0]->index(), 2u);
}

TEST_F(KvPoolChunks, GrowingTakesChunksAgainWithNewZeroedPages) {
  auto pages = take(8);
  for (auto& p : pages) std::memset(p->data(), 0x7f, layout_.page_bytes());
  pages.resize(4);  // pages 4..7 free again: chunk 1 can go
  EXPECT_EQ(pool_->set_capacity(4), 4u);
  EXPECT_EQ(memory_->frees, 2);
  EXPECT_EQ(pool_->set_capacity(100), 10u);  // clamped to the budget
  EXPECT_EQ(memory_->allocations, 5);
  auto fresh = take(6);  // 4..9
  ASSERT_EQ(fresh.size(), 6u);
  for (const auto& p : fresh) {
    EXPECT_GE(p->index(), 4u);
    for (std::size_t i = 0; i < layout_.page_bytes(); ++i) ASSERT_EQ(p->data()[i], std::byte{0}) << p->index();
  }
  EXPECT_FALSE(pool_->allocate().is_ok());
  EXPECT_EQ(pool_->stats().pages_used, 10u);
}

TEST(KvPool, ABudgetBelowAChunkIsOneChunk) {
  auto memory = std::make_shared<CountingMemory>();
  auto p = KvPool::create(small_layout(), 3 * small_layout().page_bytes(), memory);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(memory->allocations, 1);
  EXPECT_EQ((*p)->stats().pages_total, 3u);
  EXPECT_EQ((*p)->set_capacity(1), 3u);  // its only chunk stays
}

}  // namespace
}  // namespace ft::engine
