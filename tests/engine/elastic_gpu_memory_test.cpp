// How the expert cache gives GPU memory way to other processes and takes it back: the decision
// from the free memory the driver reports, and a model without an expert cache refusing a resize.
#include "ft/engine/elastic_gpu_memory.h"

#include <gtest/gtest.h>

#include "ft/engine/model.h"
#include "ft/engine/random_checkpoint.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

using engine::elastic_budget;
using engine::ElasticInputs;

constexpr std::uint64_t kGiB = 1ull << 30, kMiB = 1ull << 20;

ElasticInputs at(std::uint64_t free, std::uint64_t budget, std::uint64_t ceiling = 8 * kGiB) {
  ElasticInputs in;
  in.free_bytes = free;
  in.budget_bytes = budget;
  in.ceiling_bytes = ceiling;
  in.floor_bytes = 3 * kGiB;
  in.headroom_bytes = 512 * kMiB;
  in.step_bytes = 10 * kMiB;
  return in;
}

TEST(ElasticBudget, BelowTheHeadroomGivesBackUntilTwiceItIsFree) {
  // 100 MiB free: give back 924 MiB so 1 GiB is.
  EXPECT_EQ(elastic_budget(at(100 * kMiB, 8 * kGiB)), 8 * kGiB - 924 * kMiB);
  // Nothing free at all.
  EXPECT_EQ(elastic_budget(at(0, 8 * kGiB)), 8 * kGiB - kGiB);
}

TEST(ElasticBudget, NeverBelowTheFloor) {
  EXPECT_EQ(elastic_budget(at(0, 3 * kGiB + 100 * kMiB)), 3 * kGiB);
  EXPECT_EQ(elastic_budget(at(0, 3 * kGiB)), 3 * kGiB);
}

TEST(ElasticBudget, TheBandBetweenHeadroomAndThriceItChangesNothing) {
  for (std::uint64_t free : {512 * kMiB, kGiB, 1536 * kMiB})
    EXPECT_EQ(elastic_budget(at(free, 6 * kGiB)), 6 * kGiB) << free;
}

TEST(ElasticBudget, AboveThriceTheHeadroomGrowsBackTowardTheCeilingOnly) {
  // 2 GiB free: take 1 GiB, leaving 1 GiB free.
  EXPECT_EQ(elastic_budget(at(2 * kGiB, 6 * kGiB)), 7 * kGiB);
  // 40 GiB free: up to the ceiling, not beyond.
  EXPECT_EQ(elastic_budget(at(40 * kGiB, 6 * kGiB)), 8 * kGiB);
  // At the ceiling: stay, however much is free.
  EXPECT_EQ(elastic_budget(at(40 * kGiB, 8 * kGiB)), 8 * kGiB);
  // An operator lowered the ceiling: free memory alone does not take it back.
  EXPECT_EQ(elastic_budget(at(40 * kGiB, 5 * kGiB, 5 * kGiB)), 5 * kGiB);
}

TEST(ElasticBudget, ChangesSmallerThanASlotAreNotMade) {
  ElasticInputs in = at(40 * kGiB, 8 * kGiB - 4 * kMiB);
  EXPECT_EQ(elastic_budget(in), in.budget_bytes);
  in.step_bytes = 1;
  EXPECT_EQ(elastic_budget(in), 8 * kGiB);
}

TEST(ElasticBudget, NoHeadroomMeansAFixedBudget) {
  ElasticInputs in = at(0, 8 * kGiB);
  in.headroom_bytes = 0;
  EXPECT_EQ(elastic_budget(in), 8 * kGiB);
}

TEST(ElasticGpuMemory, AModelWithoutAnExpertCacheRefusesAResize) {
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(engine::ModelFamily::kQwen3Moe, false)).is_ok());
  auto m = engine::load_model(dir.path(), engine::LoadOptions{});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const auto r = (*m)->resize_gpu_memory(4 * kGiB);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(r.status().message().find("expert cache"), std::string::npos) << r.status().message();
  EXPECT_FALSE((*m)->device_memory());
}

}  // namespace
}  // namespace ft::test
