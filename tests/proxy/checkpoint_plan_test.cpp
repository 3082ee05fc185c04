// Which prefixes the proxy looks up and asks the engine to save, and the per-tenant pin ledger.
#include <gtest/gtest.h>

#include "../../proxy/src/checkpoint_plan.h"

namespace ft::proxy {
namespace {

std::vector<PrefixCut> cuts_at(std::vector<std::size_t> positions) {
  std::vector<PrefixCut> out;
  for (std::size_t p : positions) out.push_back({p, PrefixKey{7, p}});
  return out;
}

std::vector<int64_t> positions(const std::vector<protocol::engine::SnapshotRequest>& s) {
  std::vector<int64_t> out;
  for (const auto& r : s) out.push_back(r.position);
  return out;
}

TEST(CheckpointPlan, LookupLeavesAtLeastOneTokenToCompute) {
  auto cuts = cuts_at({10, 50, 99, 100});
  auto keys = lookup_keys(cuts, 100);
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys.back(), (PrefixKey{7, 99}));
}

TEST(CheckpointPlan, FirstCutTailAndStride) {
  CheckpointPolicy p;
  p.tail = 2;
  p.stride = 1000;
  auto cuts = cuts_at({300, 700, 1200, 1500, 2600, 2700, 2750, 2800});
  auto plan = plan_snapshots(cuts, 0, 2810, p);
  // 300 (system+tools), 1500 (>= 1000 after 300), 2600 (>= 1000 after 1500), 2750 + 2800 (tail).
  EXPECT_EQ(positions(plan), (std::vector<int64_t>{300, 1500, 2600, 2750, 2800}));
  // The tail is pinned (the session's newest checkpoints), nothing else.
  for (std::size_t i = 0; i < plan.size(); ++i) EXPECT_EQ(plan[i].pin, i + 2 >= plan.size()) << i;

  // Restored at 2600: only what lies beyond, and the first cut is not re-saved.
  auto later = plan_snapshots(cuts, 2600, 2810, p);
  EXPECT_EQ(positions(later), (std::vector<int64_t>{2750, 2800}));
  EXPECT_TRUE(plan_snapshots(cuts, 2800, 2810, p).empty());
  // A short prompt (a side call) is snapshotted but pins nothing.
  p.min_pin_tokens = 5000;
  for (const auto& s : plan_snapshots(cuts, 0, 2810, p)) EXPECT_FALSE(s.pin);
}

TEST(PinLedger, SupersedesTheRestoredGroupAndCapsSessionsPerTenant) {
  PinLedger ledger(2);
  const PrefixKey a{1, 1}, a2{1, 11}, b{1, 2}, b2{1, 12}, c{1, 3}, d{1, 4};
  EXPECT_TRUE(ledger.update("t", std::nullopt, {a, a2}).empty());
  // The conversation moved on from its group (restored a2, pins b and b2): a and a2 are unpinned.
  auto moved = ledger.update("t", a2, {b, b2});
  std::sort(moved.begin(), moved.end());
  EXPECT_EQ(moved, (std::vector<PrefixKey>{a, a2}));
  // Another session, another tenant: independent.
  EXPECT_TRUE(ledger.update("t", std::nullopt, {c}).empty());
  EXPECT_TRUE(ledger.update("u", std::nullopt, {a}).empty());
  // A third live session in "t" pushes out the oldest group (b, b2).
  auto capped = ledger.update("t", std::nullopt, {d});
  std::sort(capped.begin(), capped.end());
  EXPECT_EQ(capped, (std::vector<PrefixKey>{b, b2}));
  // A short side call that restores a session's key but pins nothing leaves it pinned.
  EXPECT_TRUE(ledger.update("t", c, {}).empty());
  // A key pinned again by the new group is not unpinned.
  EXPECT_TRUE(ledger.update("t", d, {d}).empty());
}

// Callers cycling through keys (each a tenant) cannot grow the ledger without end: the least
// recently active tenants are forgotten, a recently active one is kept.
TEST(PinLedger, RemembersABoundedNumberOfTenants) {
  PinLedger ledger(4, 8);
  ledger.update("kept", std::nullopt, {PrefixKey{9, 9}});
  for (std::uint64_t i = 0; i < 1000; ++i) {
    ledger.update("key-" + std::to_string(i), std::nullopt, {PrefixKey{1, i}});
    if (i % 4 == 0) ledger.update("kept", std::nullopt, {PrefixKey{9, 100 + i}});
    EXPECT_LE(ledger.tenants(), 8u);
  }
  // "kept" is still known: its next group supersedes the one it restores.
  const auto moved = ledger.update("kept", PrefixKey{9, 100 + 996}, {PrefixKey{9, 1}});
  EXPECT_EQ(moved, (std::vector<PrefixKey>{PrefixKey{9, 100 + 996}}));
}

}  // namespace
}  // namespace ft::proxy
