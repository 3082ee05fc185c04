// Copies of experts grouped into strided runs (expert offload's copies into GPU slots): experts
// stacked in one tensor a matrix, as a GGUF file keeps them, going into slots the same distance
// apart cross as one copy a matrix; anything else starts a new run. Each case also performs the
// runs as strided copies between real buffers and checks every slot got exactly its expert.
#include "ft/engine/expert_copy_runs.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace ft::test {
namespace {

using engine::expert_copy_runs;
using engine::ExpertCopy;
using engine::ExpertCopyRun;

// A layer's experts stacked a matrix at a time (gate of every expert, then up, then down), and
// slots of `slot_bytes` each holding gate | up | down.
struct Layer {
  static constexpr std::size_t kExperts = 8, kGate = 96, kUp = 96, kDown = 160;
  std::vector<std::byte> host;
  std::vector<std::byte> slots;
  std::size_t slot_bytes;

  explicit Layer(std::size_t slot_count, std::size_t slot_bytes = 384)
      : host(kExperts * (kGate + kUp + kDown)), slots(slot_count * slot_bytes), slot_bytes(slot_bytes) {
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = std::byte(i * 7 + 3);
  }
  ExpertCopy copy(std::size_t expert, std::size_t slot) {
    const std::size_t sizes[3] = {kGate, kUp, kDown};
    const std::size_t starts[3] = {0, kExperts * kGate, kExperts * (kGate + kUp)};
    ExpertCopy c;
    std::size_t in_slot = 0;
    for (int m = 0; m < 3; ++m) {
      c.src[m] = host.data() + starts[m] + expert * sizes[m];
      c.bytes[m] = sizes[m];
      c.dst[m] = slots.data() + slot * slot_bytes + in_slot;
      in_slot += sizes[m];
    }
    return c;
  }
};

// Performs the runs as a strided copy would, then checks each copy's bytes at its destination.
void expect_runs_copy_everything(const std::vector<ExpertCopy>& copies, const std::vector<ExpertCopyRun>& runs) {
  std::size_t covered = 0;
  for (const ExpertCopyRun& r : runs) {
    ASSERT_EQ(r.first, covered) << "runs must cover the list in order";
    covered += r.count;
    const ExpertCopy& head = copies[r.first];
    for (int m = 0; m < 3; ++m)
      for (std::size_t i = 0; i < r.count; ++i)
        std::memcpy(head.dst[m] + i * r.dst_pitch, head.src[m] + i * head.bytes[m], head.bytes[m]);
  }
  ASSERT_EQ(covered, copies.size());
  for (const ExpertCopy& c : copies)
    for (int m = 0; m < 3; ++m) EXPECT_EQ(0, std::memcmp(c.dst[m], c.src[m], c.bytes[m]));
}

TEST(ExpertCopyRuns, ConsecutiveExpertsIntoConsecutiveSlotsAreOneRun) {
  Layer l(8);
  std::vector<ExpertCopy> copies;
  for (std::size_t e = 2; e < 7; ++e) copies.push_back(l.copy(e, e - 1));
  const auto runs = expert_copy_runs(copies);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].count, 5u);
  EXPECT_EQ(runs[0].dst_pitch, l.slot_bytes);
  expect_runs_copy_everything(copies, runs);
}

TEST(ExpertCopyRuns, ASkippedExpertOrASlotBehindStartsANewRun) {
  Layer l(8);
  // Experts 0 1 | 3 (expert 2 was a hit) and 4 two slots on (a run of that pitch) | 5 6 back at
  // slot 0 (a run never goes backwards).
  const std::vector<ExpertCopy> copies = {l.copy(0, 2), l.copy(1, 3), l.copy(3, 4),
                                          l.copy(4, 6), l.copy(5, 0), l.copy(6, 1)};
  const auto runs = expert_copy_runs(copies);
  ASSERT_EQ(runs.size(), 3u);
  for (const ExpertCopyRun& r : runs) EXPECT_EQ(r.count, 2u);
  EXPECT_EQ(runs[0].dst_pitch, l.slot_bytes);
  EXPECT_EQ(runs[1].dst_pitch, 2 * l.slot_bytes);
  EXPECT_EQ(runs[2].dst_pitch, l.slot_bytes);
  expect_runs_copy_everything(copies, runs);
}

TEST(ExpertCopyRuns, ARunKeepsOnePitch) {
  Layer l(8);
  // Slots 0, 1 then 3: the third copy is two slots on, not one.
  const std::vector<ExpertCopy> copies = {l.copy(0, 0), l.copy(1, 1), l.copy(2, 3), l.copy(3, 5)};
  const auto runs = expert_copy_runs(copies);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].count, 2u);
  // Copies 2 and 3 are two slots apart each: a run of their own, with that pitch.
  EXPECT_EQ(runs[1].count, 2u);
  EXPECT_EQ(runs[1].dst_pitch, 2 * l.slot_bytes);
  expect_runs_copy_everything(copies, runs);
}

TEST(ExpertCopyRuns, DestinationsCloserThanAMatrixNeverMerge) {
  // "Slots" 64 bytes apart would overlap a 96-byte gate: each copy stands alone.
  Layer l(8, 384);
  std::vector<ExpertCopy> copies = {l.copy(0, 0), l.copy(1, 0)};
  for (int m = 0; m < 3; ++m) copies[1].dst[m] = copies[0].dst[m] + 64;
  const auto runs = expert_copy_runs(copies);
  EXPECT_EQ(runs.size(), 2u);
}

TEST(ExpertCopyRuns, MatricesThatDoNotFollowInHostMemoryStartANewRun) {
  Layer l(8);
  std::vector<ExpertCopy> copies = {l.copy(0, 0), l.copy(1, 1), l.copy(2, 2)};
  EXPECT_EQ(expert_copy_runs(copies).size(), 1u);
  const std::byte* moved = copies[2].src[1];
  copies[2].src[1] = l.host.data();  // its up not after expert 1's (separate tensors may be anywhere)
  EXPECT_EQ(expert_copy_runs(copies).size(), 2u);
  copies[2].src[1] = moved;
  copies[2].bytes[2] -= 32;  // another size
  EXPECT_EQ(expert_copy_runs(copies).size(), 2u);
}

TEST(ExpertCopyRuns, EmptyAndSingle) {
  EXPECT_TRUE(expert_copy_runs({}).empty());
  Layer l(2);
  const std::vector<ExpertCopy> one = {l.copy(5, 1)};
  const auto runs = expert_copy_runs(one);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].count, 1u);
  expect_runs_copy_everything(one, runs);
}

}  // namespace
}  // namespace ft::test
