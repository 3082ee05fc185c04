// The expert cache resized while a sequence decodes: an operator's new budget and another
// allocation on the same GPU (the elastic watcher giving way, then taking the memory back) change
// the slots, never the logits; below the cache's fewest slots the KV pool gives its free chunks.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "ft/engine/cuda_ops.h"
#include "ft/engine/elastic_gpu_memory.h"
#include "ft/engine/kv_pool.h"
#include "ft/engine/model.h"
#include "ft/engine/placement.h"
#include "ft/engine/random_checkpoint.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

using engine::LogitsMode;
using engine::ModelFamily;
using engine::SequenceState;
using Clock = std::chrono::steady_clock;

constexpr double kTolerance = 1e-4;  // as expert_offload_cuda_test: only the order experts are added in differs
constexpr int kSlots = 16;

std::unique_ptr<engine::Model> load(const TempDir& dir, int slots, std::uint64_t kv_budget = 64ull << 20) {
  engine::LoadOptions o;
  o.backend = engine::BackendKind::kCuda;
  o.kv_budget_bytes = kv_budget;
  o.threads = 2;
  o.expert_slots = slots;
  o.moe_policy = *engine::parse_moe_policy("ratio:0.5");
  auto m = engine::load_model(dir.path(), o);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

int32_t argmax(const std::vector<float>& row) {
  return int32_t(std::max_element(row.begin(), row.end()) - row.begin());
}

// Waits up to `within` for `ok`.
template <typename F>
bool eventually(F ok, std::chrono::milliseconds within) {
  for (const auto until = Clock::now() + within; Clock::now() < until;
       std::this_thread::sleep_for(std::chrono::milliseconds(20)))
    if (ok()) return true;
  return ok();
}

class ElasticGpuMemoryCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    FT_SKIP_UNLESS_RUNNABLE(engine::BackendKind::kCuda);
    ASSERT_TRUE(engine::write_random_checkpoint(dir_.path(), tiny_spec(ModelFamily::kQwen3Moe, false)).is_ok());
    resident_ = load(dir_, 0);
    ASSERT_TRUE(resident_);
    rs_ = std::make_unique<SequenceState>(resident_->new_state());
    m_ = load(dir_, kSlots);
    ASSERT_TRUE(m_);
    s_ = std::make_unique<SequenceState>(m_->new_state());
    const auto prompt = test_tokens(30, m_->vocab_size(), 3);
    std::vector<float> want(std::size_t(m_->vocab_size())), got(want.size());
    ASSERT_TRUE(resident_->forward(*rs_, prompt, want.data(), LogitsMode::kLast).is_ok());
    ASSERT_TRUE(m_->forward(*s_, prompt, got.data(), LogitsMode::kLast).is_ok());
    next_ = argmax(want);
  }

  // `n` greedy steps on both models: the offloaded one's logits equal the resident one's.
  void decode(int n, const char* when) {
    const std::size_t V = std::size_t(m_->vocab_size());
    for (int i = 0; i < n; ++i) {
      std::vector<float> want(V), got(V);
      ASSERT_TRUE(resident_->forward(*rs_, {&next_, 1}, want.data(), LogitsMode::kLast).is_ok());
      ASSERT_TRUE(m_->forward(*s_, {&next_, 1}, got.data(), LogitsMode::kLast).is_ok()) << when;
      EXPECT_LT(rel_l2(got.data(), want.data(), V), kTolerance) << when << ", step " << i;
      next_ = argmax(want);
    }
  }

  int slots() const { return int(m_->placement().expert_slots); }

  TempDir dir_;
  std::unique_ptr<engine::Model> resident_, m_;
  std::unique_ptr<SequenceState> rs_, s_;
  int32_t next_ = 0;
};

TEST_F(ElasticGpuMemoryCuda, ANewBudgetResizesTheCacheAndKeepsTheLogits) {
  decode(3, "before");
  const engine::PlacementPlan before = m_->placement();
  ASSERT_EQ(before.expert_slots, uint64_t(kSlots));
  // Eight slots fewer: the cache frees whole chunks (two slots each here).
  auto smaller = m_->resize_gpu_memory(before.total_bytes() - 8 * before.expert_slot_bytes);
  ASSERT_TRUE(smaller.is_ok()) << smaller.status().to_string();
  EXPECT_EQ(smaller->expert_slots, uint64_t(kSlots - 8));
  EXPECT_EQ(smaller->budget_bytes, smaller->total_bytes());
  EXPECT_EQ(m_->expert_offload_stats()->slots, kSlots - 8);
  decode(4, "after shrinking");
  // Below the fewest slots beside the least workspace: refused, nothing changes.
  auto tiny = m_->resize_gpu_memory(before.total_bytes() - before.expert_cache_bytes() -
                                    (before.workspace_bytes - before.least_workspace_bytes));
  ASSERT_FALSE(tiny.is_ok());
  EXPECT_EQ(tiny.status().code(), ErrorCode::kInvalidArgument) << tiny.status().message();
  EXPECT_EQ(slots(), kSlots - 8);
  EXPECT_EQ(m_->placement().workspace_bytes, before.workspace_bytes);
  auto back = m_->resize_gpu_memory(before.total_bytes());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->expert_slots, uint64_t(kSlots));
  decode(4, "after growing");
}

// Past the cache's fewest slots the workspace gives way, down to a prefill pass of 256 rows (the
// pass size follows it); prefills and decode steps still give the resident logits, and a larger
// budget brings the workspace back first.
TEST_F(ElasticGpuMemoryCuda, PastTheFewestSlotsTheWorkspaceGivesWayAndComesBackFirst) {
  const engine::PlacementPlan before = m_->placement();
  ASSERT_GT(before.least_workspace_bytes, 0u);
  ASSERT_LT(before.least_workspace_bytes, before.workspace_bytes);
  const std::uint64_t fewest = std::uint64_t(m_->expert_offload_stats()->min_slots) * before.expert_slot_bytes;
  const std::uint64_t no_cache = before.total_bytes() - before.expert_cache_bytes() + fewest;
  const std::uint64_t spare = before.workspace_bytes - before.least_workspace_bytes;
  const std::size_t V = std::size_t(m_->vocab_size());
  for (const std::uint64_t given : {spare / 2, spare}) {
    SCOPED_TRACE("workspace given: " + std::to_string(given >> 20) + " MiB");
    auto now = m_->resize_gpu_memory(no_cache - given);
    ASSERT_TRUE(now.is_ok()) << now.status().to_string();
    EXPECT_LE(now->workspace_bytes, before.workspace_bytes - given);
    EXPECT_GT(now->workspace_bytes + 256, before.workspace_bytes - given) << "whole units of 256 bytes";
    EXPECT_LE(now->pass_rows, before.pass_rows);
    EXPECT_LE(now->expert_slots * before.expert_slot_bytes, fewest + 2 * before.expert_slot_bytes) << "chunks of two";
    EXPECT_EQ(now->budget_bytes, now->total_bytes());
    decode(3, "with less workspace");
    // A pass as long as the least workspace holds, on a new sequence of each model: it fits.
    const auto prompt = test_tokens(256, m_->vocab_size(), 7);
    SequenceState rs = resident_->new_state(), s = m_->new_state();
    std::vector<float> want(V), got(V);
    ASSERT_TRUE(resident_->forward(rs, prompt, want.data(), LogitsMode::kLast).is_ok());
    ASSERT_TRUE(m_->forward(s, prompt, got.data(), LogitsMode::kLast).is_ok());
    EXPECT_LT(rel_l2(got.data(), want.data(), V), kTolerance);
    EXPECT_EQ(m_->expert_offload_stats()->workspace_overflow_bytes, 0u);
  }
  EXPECT_EQ(m_->placement().pass_rows, 256u) << "the least workspace holds passes of 256 rows";
  auto back = m_->resize_gpu_memory(before.total_bytes());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->workspace_bytes, before.workspace_bytes);
  EXPECT_EQ(back->pass_rows, before.pass_rows);
  EXPECT_EQ(back->expert_slots, uint64_t(kSlots));
  decode(3, "after growing back");
}

// Below what the cache can give, the KV pool gives its free chunks (256 MiB each; the sequence's
// pages are in the first), and takes them back first when the budget grows again.
TEST(ElasticGpuMemoryCudaKv, TheKvPoolGivesItsFreeChunksAfterTheCache) {
  FT_SKIP_UNLESS_RUNNABLE(engine::BackendKind::kCuda);
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(ModelFamily::kQwen3Moe, false)).is_ok());
  auto m = load(dir, kSlots, 3ull << 30);
  ASSERT_TRUE(m);
  SequenceState s = m->new_state();
  std::vector<float> logits(std::size_t(m->vocab_size()));
  ASSERT_TRUE(m->forward(s, test_tokens(100, m->vocab_size(), 5), logits.data(), LogitsMode::kLast).is_ok());
  const engine::PlacementPlan full = m->placement();
  const std::uint64_t page = full.kv_page_bytes, chunk = engine::KvPool::kChunkBytes / page * page;
  const std::uint64_t kv_full = full.kv_pages * page;
  ASSERT_EQ(kv_full, (3ull << 30) / page * page);
  const std::uint64_t fixed = full.total_bytes() - full.expert_cache_bytes() - kv_full;
  const std::uint64_t fewest = std::uint64_t(m->expert_offload_stats()->min_slots) * full.expert_slot_bytes;

  // Room for the fewest slots, a few more, and one chunk of pages.
  const std::uint64_t budget = fixed + fewest + 4 * full.expert_slot_bytes + chunk;
  auto small = m->resize_gpu_memory(budget);
  ASSERT_TRUE(small.is_ok()) << small.status().to_string();
  EXPECT_EQ(small->kv_pages * page, chunk);
  EXPECT_EQ(m->kv_stats().pages_total, small->kv_pages);
  EXPECT_EQ(m->kv_stats().pages_max, full.kv_pages);
  EXPECT_LT(small->expert_slots, uint64_t(kSlots));
  // The cache gives whole allocations back while what stays holds the slots asked for, so it may
  // keep a few more than the budget's (the plan then says what it takes).
  EXPECT_GE(small->expert_slots * full.expert_slot_bytes, fewest + 4 * full.expert_slot_bytes);
  EXPECT_EQ(small->budget_bytes, small->total_bytes());
  std::vector<float> more(std::size_t(m->vocab_size()));
  const int32_t next = argmax(logits);
  EXPECT_TRUE(m->forward(s, {&next, 1}, more.data(), LogitsMode::kLast).is_ok()) << "the sequence's pages stayed";

  auto back = m->resize_gpu_memory(full.total_bytes());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->kv_pages, full.kv_pages);
  EXPECT_EQ(back->expert_slots, uint64_t(kSlots));
  EXPECT_EQ(back->total_bytes(), full.total_bytes());
}

TEST_F(ElasticGpuMemoryCuda, AnotherAllocationMakesTheCacheGiveWayAndItComesBack) {
  engine::ElasticGpuMemory elastic(*m_, {std::uint64_t(256) << 20, std::chrono::milliseconds(50)});
  decode(2, "before");
  const auto device = m_->device_memory();
  ASSERT_TRUE(device);
  // Leave less than the headroom free, as another process filling the GPU would.
  const std::uint64_t take = device->free_bytes - (std::uint64_t(100) << 20);
  auto hog = engine::cuda::DeviceBuffer::allocate(take);
  ASSERT_TRUE(hog.is_ok()) << hog.status().to_string();
  // The fewest slots, rounded up to whole chunks (two slots here): what the cache can shrink to.
  const int fewest = (m_->expert_offload_stats()->min_slots + 1) / 2 * 2;
  EXPECT_TRUE(eventually([&] { return slots() == fewest; }, std::chrono::milliseconds(2000)))
      << "slots " << slots() << ", fewest " << fewest;
  EXPECT_GE(elastic.stats().shrinks, 1u);
  decode(4, "while the other allocation holds the GPU");
  hog = engine::cuda::DeviceBuffer();  // let go
  EXPECT_TRUE(eventually([&] { return slots() == kSlots; }, std::chrono::milliseconds(2000))) << "slots " << slots();
  EXPECT_GE(elastic.stats().grows, 1u);
  decode(4, "after it let go");
}

// A prefill after the cache shrank: its rounds must find slots at every size. Sixteen MoE layers
// of 64 experts and 560 slots, shrunk to 140: a cache that kept the 128 transient slots and the
// per-layer floors (2) of its first size had 12 slots and 30 floor slots, and a prefill round found
// none (what a server at 16 GiB did when another process took its memory).
TEST(ElasticGpuMemoryCudaPrefill, APrefillAfterEveryResizeMatchesTheResidentModel) {
  FT_SKIP_UNLESS_RUNNABLE(engine::BackendKind::kCuda);
  TempDir dir;
  engine::RandomCheckpointSpec spec = tiny_spec(ModelFamily::kQwen3Moe, false);
  spec.num_layers = 16;
  spec.mlp_only_layers = {};
  spec.num_experts = 64;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), spec).is_ok());
  auto resident = load(dir, 0), m = load(dir, 560);
  ASSERT_TRUE(resident && m);
  const std::size_t V = std::size_t(m->vocab_size());
  const auto prompt = test_tokens(40, m->vocab_size(), 5);
  std::vector<float> want(V);
  SequenceState rs = resident->new_state();
  ASSERT_TRUE(resident->forward(rs, prompt, want.data(), LogitsMode::kLast).is_ok());
  const engine::PlacementPlan full = m->placement();
  const int fewest = m->expert_offload_stats()->min_slots;
  for (const int slots : {560, 140, fewest, 560}) {
    auto now = m->resize_gpu_memory(full.total_bytes() - full.expert_cache_bytes() +
                                    std::uint64_t(slots) * full.expert_slot_bytes);
    ASSERT_TRUE(now.is_ok()) << slots << ": " << now.status().to_string();
    EXPECT_GE(now->expert_slots, std::uint64_t(slots));
    EXPECT_LT(now->expert_slots, std::uint64_t(slots + 70)) << "chunks of 70 slots";
    SequenceState s = m->new_state();
    std::vector<float> got(V);
    ASSERT_TRUE(m->forward(s, prompt, got.data(), LogitsMode::kLast).is_ok()) << now->expert_slots << " slots";
    EXPECT_LT(rel_l2(got.data(), want.data(), V), kTolerance) << now->expert_slots << " slots";
  }
}

}  // namespace
}  // namespace ft::test
