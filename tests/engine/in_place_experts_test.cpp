// The bookkeeping behind misses read in place (policy direct): which memory the GPU's table names
// for each expert as the cache admits and evicts, and when a copy into a slot may be read.
#include "ft/engine/in_place_experts.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "ops/pair_hash.h"

namespace ft::test {
namespace {

using engine::ExpertAddress;
using engine::ExpertCache;
using engine::InPlaceExperts;

constexpr int kLayers = 2, kExperts = 4;

// Fake addresses: host memory at 0x1000 + ..., slots at 0x100000 + ...; only compared, never read.
const std::byte* at(std::uintptr_t a) { return reinterpret_cast<const std::byte*>(a); }
ExpertAddress host(int layer, int e) {
  const std::uintptr_t b = 0x1000 + std::uintptr_t(layer * kExperts + e) * 0x30;
  return {at(b), at(b + 0x10), at(b + 0x20)};
}
ExpertAddress slot(int, int s) {
  const std::uintptr_t b = 0x100000 + std::uintptr_t(s) * 0x30;
  return {at(b), at(b + 0x10), at(b + 0x20)};
}

class InPlaceExpertsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int l = 0; l < kLayers; ++l)
      for (int e = 0; e < kExperts; ++e) ip.set_host(l, e, host(l, e));
  }
  // The table's gate pointer for (layer, expert), after a refresh.
  const std::byte* gate(int layer, int e) const { return table[std::size_t(layer * 3 * kExperts + e)]; }
  const std::byte* down(int layer, int e) const { return table[std::size_t(layer * 3 * kExperts + 2 * kExperts + e)]; }
  bool refresh() { return ip.refresh(cache, slot, table); }

  ExpertCache cache{2, kLayers, kExperts};
  InPlaceExperts ip{kLayers, kExperts};
  std::vector<const std::byte*> table = std::vector<const std::byte*>(ip.table_size());
};

TEST_F(InPlaceExpertsTest, EveryExpertIsReadFromHostMemoryUntilItsCopyHasLanded) {
  EXPECT_TRUE(ip.knows(0));
  EXPECT_TRUE(refresh());
  for (int l = 0; l < kLayers; ++l)
    for (int e = 0; e < kExperts; ++e) {
      EXPECT_EQ(gate(l, e), host(l, e).gate);
      EXPECT_EQ(down(l, e), host(l, e).down);
    }
  EXPECT_FALSE(refresh());  // nothing changed: nothing to upload

  // A step chose experts 1 (two tokens) and 3 of layer 0: both miss, both fill free slots.
  cache.begin_step();
  int replacements = 0;  // free slots cost none
  const std::vector<int32_t> chosen{3, 1, 1};
  const InPlaceExperts::StepUse use = ip.after_step(cache, 0, chosen, replacements);
  EXPECT_EQ(use.hits, 0);
  EXPECT_EQ(use.misses, 2);
  ASSERT_EQ(use.admitted.size(), 2u);
  EXPECT_EQ(use.admitted[0].expert, 1);  // busiest first
  EXPECT_EQ(use.admitted[1].expert, 3);
  EXPECT_TRUE(ip.copies_pending());
  // The cache maps them already, but the copies have not landed: the table still says host.
  EXPECT_TRUE(refresh());
  EXPECT_EQ(gate(0, 1), host(0, 1).gate);
  EXPECT_EQ(gate(0, 3), host(0, 3).gate);
  ip.landed();
  EXPECT_FALSE(ip.copies_pending());
  EXPECT_TRUE(refresh());
  EXPECT_EQ(gate(0, 1), slot(0, use.admitted[0].slot).gate);
  EXPECT_EQ(down(0, 3), slot(0, use.admitted[1].slot).down);
  EXPECT_EQ(gate(1, 1), host(1, 1).gate);  // the other layer's expert 1 is untouched

  // The next step hits both.
  cache.begin_step();
  const InPlaceExperts::StepUse hit = ip.after_step(cache, 0, chosen, replacements);
  EXPECT_EQ(hit.hits, 2);
  EXPECT_EQ(hit.misses, 0);
  EXPECT_TRUE(hit.admitted.empty());
}

TEST_F(InPlaceExpertsTest, AnEvictedExpertGoesBackToHostMemoryAndReplacementsAreRationed) {
  int replacements = 0;
  const std::vector<int32_t> first{0, 1};
  for (int step = 0; step < 4; ++step) {  // the protected steps pass; 0 and 1 stay hot
    cache.begin_step();
    ip.after_step(cache, 0, first, replacements);
  }
  ip.landed();
  refresh();
  const std::byte* slot_of_0 = gate(0, 0);
  EXPECT_NE(slot_of_0, host(0, 0).gate);

  // Layer 1's expert 2, used much more often than layer 0's, still waits while no replacement is left.
  const std::vector<int32_t> hot{2};
  for (int step = 0; step < 12; ++step) {
    cache.begin_step();
    const InPlaceExperts::StepUse use = ip.after_step(cache, 1, hot, replacements);
    EXPECT_TRUE(use.admitted.empty());
  }
  EXPECT_EQ(gate(1, 2), host(1, 2).gate);
  replacements = 1;
  cache.begin_step();
  const InPlaceExperts::StepUse use = ip.after_step(cache, 1, hot, replacements);
  ASSERT_EQ(use.admitted.size(), 1u);
  EXPECT_EQ(replacements, 0);
  // Whichever of layer 0's experts lost its slot is read from host memory from the next step on,
  // before the copy into that slot has landed; layer 1's expert only once it has.
  EXPECT_TRUE(refresh());
  int on_host = 0;
  for (int e : {0, 1}) on_host += gate(0, e) == host(0, e).gate ? 1 : 0;
  EXPECT_EQ(on_host, 1);
  EXPECT_EQ(gate(1, 2), host(1, 2).gate);
  ip.landed();
  EXPECT_TRUE(refresh());
  EXPECT_EQ(gate(1, 2), slot(1, use.admitted[0].slot).gate);
}

// The hash behind the hashed share (and the GPU's dither, which the GPU tests cover) is
// splitmix64's: its first output from seed 0, and an input's high and low halves kept apart.
TEST(PairHash, IsSplitmix64sFinaliser) {
  EXPECT_EQ(engine::pair_hash(0, 0), 0xe220a8397b1dcdafull);
  EXPECT_NE(engine::pair_hash(1, 0), engine::pair_hash(0, 1));
}

TEST(InPlaceExpertsShare, TheCpuTakesAboutItsShareOfTheUncachedExpertsAndNoneWithASlot) {
  constexpr int L = 8, E = 128;
  ExpertCache cache(64, L, E);
  InPlaceExperts ip(L, E);
  for (int l = 0; l < L; ++l)
    for (int e = 0; e < E; ++e) ip.set_host(l, e, {at(0x1000 + std::uintptr_t(l * E + e) * 0x30), at(0x2), at(0x3)});
  // Layer 0's experts 0..63 in slots.
  for (int e = 0; e < 64; ++e) ASSERT_TRUE(cache.admit(0, e));
  const ExpertAddress zero{at(0xf00), at(0xf10), at(0xf20)};
  const auto slot_at = [&](int, int s) { return s < 0 ? zero : slot(0, s); };
  std::vector<const std::byte*> table(ip.table_size());
  std::vector<std::uint8_t> from_host(std::size_t(L) * E, 7);  // every entry is written
  ip.set_cpu_share(0.6);
  ASSERT_TRUE(ip.refresh(cache, slot_at, table, from_host));
  int on_cpu = 0, uncached = 0;
  for (int l = 0; l < L; ++l)
    for (int e = 0; e < E; ++e) {
      const std::byte* g = table[std::size_t(l * 3 * E + e)];
      const std::uint8_t read_from_host = from_host[std::size_t(l * E + e)];
      if (l == 0 && e < 64) {
        EXPECT_FALSE(ip.on_cpu(l, e));
        EXPECT_EQ(g, slot(0, *cache.find(0, e)).gate);
        EXPECT_EQ(read_from_host, 0);
        continue;
      }
      ++uncached;
      if (ip.on_cpu(l, e)) {
        ++on_cpu;
        EXPECT_EQ(g, zero.gate);  // the GPU reads zeros for it; the CPU's output is added
        EXPECT_EQ(read_from_host, 0);
      } else {
        EXPECT_NE(g, zero.gate);
        EXPECT_EQ(read_from_host, 1);  // the GPU reads it over PCIe (or stages it first)
      }
    }
  EXPECT_NEAR(double(on_cpu) / uncached, 0.6, 0.05);
  // No share: nothing on the CPU, and the change alone makes the table new.
  ip.set_cpu_share(0);
  ASSERT_TRUE(ip.refresh(cache, slot_at, table));
  for (int e = 64; e < E; ++e) EXPECT_FALSE(ip.on_cpu(0, e));
  // The share split on the device: the table names host memory for every uncached expert (the
  // GPU's split kernel picks the CPU's among them each step), and switching modes is a new table.
  ip.set_cpu_share(0.6, false);
  ASSERT_TRUE(ip.refresh(cache, slot_at, table, from_host));
  for (int l = 0; l < L; ++l)
    for (int e = 0; e < E; ++e) {
      const bool cached = l == 0 && e < 64;
      EXPECT_FALSE(ip.on_cpu(l, e));
      EXPECT_EQ(from_host[std::size_t(l * E + e)], cached ? 0 : 1);
      EXPECT_NE(table[std::size_t(l * 3 * E + e)], zero.gate);
      if (!cached) {
        EXPECT_EQ(table[std::size_t(l * 3 * E + e)], at(0x1000 + std::uintptr_t(l * E + e) * 0x30));
      }
    }
  ip.set_cpu_share(0.6, true);
  EXPECT_TRUE(ip.refresh(cache, slot_at, table, from_host));
}

TEST_F(InPlaceExpertsTest, ChoicesOutsideTheLayerAreIgnored) {
  cache.begin_step();
  int replacements = 0;
  const std::vector<int32_t> junk{-1, kExperts, 2};
  const InPlaceExperts::StepUse use = ip.after_step(cache, 0, junk, replacements);
  EXPECT_EQ(use.misses, 1);
  EXPECT_EQ(use.hits, 0);
}

}  // namespace
}  // namespace ft::test
