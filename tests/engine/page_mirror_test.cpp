// Checkpoints of KV pages that live off the host (VRAM): each page is copied to the host once its
// tokens are all there and shared by every later checkpoint of the sequence (KvPageMirror), only
// the page a checkpoint ends in is copied again; a restore into the same pool takes the live page
// itself, and copy on write keeps both sequences right. Linear-attention states, which the next pass
// rewrites in place, are copied as they were when the checkpoint was taken. The "device" here is
// host RAM behind the Memory interface with is_host() false, so the off-host path runs in CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "ft/engine/kv_pool.h"
#include "ft/engine/sequence_state.h"
#include "ft/engine/state_checkpoint.h"
#include "ft/store/host_ram_tier.h"
#include "off_host_pools.h"

namespace ft::engine {
namespace {

using testing::append;
using testing::CountedHostMemory;
using testing::kPage;
using testing::OffHostMemory;
using testing::Pools;
using testing::token_bytes;

TEST(PageMirrors, CheckpointsOfAGrowingSequenceCopyOnlyThePageTheyEndIn) {
  Pools p;
  const ModelFingerprint fp{1, 2};
  SequenceState s = p.fresh();
  append(s, *p.mem, 40, 1);  // pages 0, 1 full, page 2 holds 8 tokens
  const store::ModelState first = to_model_state(s, fp);
  EXPECT_EQ(p.pool->stats().mirrored, 3u);
  EXPECT_EQ(p.mem->read_bytes, 3 * p.layout.page_bytes());

  append(s, *p.mem, 30, 1);  // page 2 fills, page 3 full, page 4 holds 6 tokens
  const store::ModelState second = to_model_state(s, fp);
  EXPECT_EQ(p.pool->stats().mirrored, 6u) << "pages 0 and 1 are shared, not copied again";
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(second.chunks[i].data.owner(), first.chunks[i].data.owner());
  EXPECT_NE(second.chunks[2].data.owner(), first.chunks[2].data.owner());
  const store::ModelState again = to_model_state(s, fp);  // nothing new: nothing copied
  EXPECT_EQ(p.pool->stats().mirrored, 6u);
  EXPECT_EQ(again.chunks[4].data.owner(), second.chunks[4].data.owner());

  // Into another pool: the bytes come back, the first 40 positions as they were written.
  Pools other;
  SequenceState r = other.fresh();
  ASSERT_TRUE(restore_from_model_state(first, r).is_ok());
  EXPECT_EQ(r.position(), 40);
  for (int64_t pos = 0; pos < 40; ++pos) ASSERT_EQ(token_bytes(r, pos), token_bytes(s, pos)) << pos;
}

TEST(PageMirrors, ARestoreIntoTheSamePoolTakesTheLivePagesAndCopiesOnWrite) {
  Pools p;
  const ModelFingerprint fp{1, 2};
  SequenceState s = p.fresh();
  append(s, *p.mem, 40, 1);
  const store::ModelState at40 = to_model_state(s, fp);
  append(s, *p.mem, 10, 1);  // the original goes on writing into page 2
  const uint64_t used = p.pool->stats().pages_used;

  SequenceState r = p.fresh();
  ASSERT_TRUE(restore_from_model_state(at40, r).is_ok());
  EXPECT_EQ(p.pool->stats().pages_used, used) << "no page allocated: the live ones are shared";
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(r.pages()[i]->data(), s.pages()[i]->data());

  // The restored sequence diverges at position 40, inside shared page 2: it writes into a copy.
  append(r, *p.mem, 5, 2);
  EXPECT_NE(r.pages()[2]->data(), s.pages()[2]->data());
  for (int64_t pos = 0; pos < 40; ++pos) ASSERT_EQ(token_bytes(r, pos), token_bytes(s, pos)) << pos;
  Pools check;  // the original's positions 40..49 are still its own
  SequenceState o = check.fresh();
  ASSERT_TRUE(restore_from_model_state(to_model_state(s, fp), o).is_ok());
  for (int64_t pos = 40; pos < 50; ++pos) EXPECT_EQ(token_bytes(o, pos), token_bytes(s, pos)) << pos;
  for (int64_t pos = 40; pos < 45; ++pos) EXPECT_NE(token_bytes(r, pos), token_bytes(s, pos)) << pos;
}

// With staging memory (page-locked host memory on a GPU) the mirrors are the pool's buffers from
// it: one a mirror held, handed back when the last checkpoint holding a mirror lets go and taken
// again by the next, freed once the pool and every mirror are gone. The bytes are the same.
TEST(PageMirrors, MirrorsReuseTheStagingBuffersTheirCheckpointsLetGo) {
  auto staging = std::make_shared<CountedHostMemory>();
  const ModelFingerprint fp{1, 2};
  {
    Pools p;
    p.mem->staging = staging;
    SequenceState s = p.fresh();
    append(s, *p.mem, 40, 1);  // pages 0, 1 full, page 2 holds 8 tokens
    auto first = std::make_unique<store::ModelState>(to_model_state(s, fp));
    EXPECT_EQ(p.pool->mirror_buffers(), 3u);
    EXPECT_EQ(staging->allocated, 3);

    append(s, *p.mem, 4, 1);  // page 2 grows: its mirror is copied again while `first` holds the old
    auto second = std::make_unique<store::ModelState>(to_model_state(s, fp));
    EXPECT_EQ(p.pool->mirror_buffers(), 4u);
    first.reset();  // page 2's first mirror: no holder left, its buffer back on the free list
    append(s, *p.mem, 4, 1);
    const store::ModelState third = to_model_state(s, fp);
    EXPECT_EQ(p.pool->mirror_buffers(), 4u) << "the buffer the first checkpoint let go is taken again";
    EXPECT_EQ(staging->allocated, 4);

    Pools other;  // the bytes come back through the staging buffers as they were written
    SequenceState r = other.fresh();
    ASSERT_TRUE(restore_from_model_state(third, r).is_ok());
    EXPECT_EQ(r.position(), 48);
    for (int64_t pos = 0; pos < 48; ++pos) ASSERT_EQ(token_bytes(r, pos), token_bytes(s, pos)) << pos;
    EXPECT_EQ(staging->freed, 0);
  }
  EXPECT_EQ(staging->freed, staging->allocated) << "every buffer freed with the pool and its mirrors";
}

// A reserve made at load (one block, touched) serves the first checkpoints; once it is taken,
// buffers are made one by one; every one comes back to the free list, and all are freed with the pool.
TEST(PageMirrors, AReserveIsOneBlockTakenBeforeAnyOtherBuffer) {
  auto staging = std::make_shared<CountedHostMemory>();
  const ModelFingerprint fp{1, 2};
  {
    Pools p;
    p.mem->staging = staging;
    ASSERT_TRUE(p.pool->reserve_mirror_buffers(4).is_ok());
    EXPECT_EQ(staging->allocated, 1) << "one block";
    EXPECT_EQ(p.pool->mirror_buffers(), 4u);
    EXPECT_EQ(p.pool->free_mirror_buffers(), 4u);
    {
      SequenceState s = p.fresh();
      append(s, *p.mem, 40, 1);  // 3 pages: 3 buffers of the reserve
      const store::ModelState at40 = to_model_state(s, fp);
      EXPECT_EQ(staging->allocated, 1);
      EXPECT_EQ(p.pool->free_mirror_buffers(), 1u);
      append(s, *p.mem, 40, 1);  // 5 pages, 3 of them new: the last of the reserve, then 2 more
      const store::ModelState at80 = to_model_state(s, fp);
      EXPECT_EQ(staging->allocated, 3);
      EXPECT_EQ(p.pool->mirror_buffers(), 6u);
      Pools other;  // the bytes are right
      SequenceState r = other.fresh();
      ASSERT_TRUE(restore_from_model_state(at80, r).is_ok());
      for (int64_t pos = 0; pos < 80; ++pos) ASSERT_EQ(token_bytes(r, pos), token_bytes(s, pos)) << pos;
    }
    EXPECT_EQ(p.pool->free_mirror_buffers(), 6u) << "the checkpoints' buffers came back";
  }
  EXPECT_EQ(staging->freed, staging->allocated) << "the block and the others freed with the pool";
}

// On a GPU a checkpoint's page copies run beside the next pass: to_model_state only issues them,
// a save into the RAM tier does not wait for them, whoever reads the bytes does, and a page
// released and reused meanwhile is zeroed only after its copy (so the checkpoint keeps its bytes).
TEST(PageMirrors, CheckpointCopiesRunBesideTheNextPassAndReadersWaitForThem) {
  Pools p;
  p.copy_like_a_gpu();
  const ModelFingerprint fp{1, 2};
  store::HostRamTier ram(1ull << 30);
  const store::StoreKey key{"t", fp, store::PrefixKey{1, 1}};
  std::vector<std::vector<std::byte>> written;
  {
    SequenceState s = p.fresh();
    append(s, *p.mem, 40, 1);
    ASSERT_TRUE(ram.save_shared(key, std::make_shared<const store::ModelState>(to_model_state(s, fp))).is_ok());
    EXPECT_EQ(p.pool->stats().mirrored, 3u);
    EXPECT_EQ(p.mem->read_bytes, 0u) << "copies issued, none waited for";
    append(s, *p.mem, 10, 1);  // the next pass writes on into page 2
    for (int64_t pos = 0; pos < 40; ++pos) written.push_back(token_bytes(s, pos));
  }  // the sequence ends: its pages go back to the pool, the checkpoint's copies still pending
  SequenceState other = p.fresh();
  append(other, *p.mem, 40, 2);  // takes the released pages (zeroed) and writes other keys
  EXPECT_EQ(p.mem->read_bytes, 3 * p.layout.page_bytes()) << "the copies ran before the pages were zeroed";

  Pools elsewhere;
  SequenceState r = elsewhere.fresh();
  std::shared_ptr<const store::ModelState> saved = ram.find_shared(key);
  ASSERT_TRUE(saved);
  ASSERT_TRUE(restore_from_model_state(*saved, r).is_ok());
  for (int64_t pos = 0; pos < 40; ++pos) ASSERT_EQ(token_bytes(r, pos), written[std::size_t(pos)]) << pos;
}

// A copy still arriving writes into its mirror's buffer: a checkpoint let go before anyone read it
// waits for its copies before the buffers go back (to be taken again, or freed with the pool).
TEST(PageMirrors, AMirrorLetGoWaitsForItsCopyBeforeItsBufferGoesBack) {
  Pools p;
  p.copy_like_a_gpu();
  SequenceState s = p.fresh();
  append(s, *p.mem, 40, 1);
  std::optional<store::ModelState> at40 = to_model_state(s, ModelFingerprint{1, 2});
  EXPECT_EQ(p.mem->read_bytes, 0u);
  s.reset();     // the pages let their mirrors go
  at40.reset();  // and so does the checkpoint: nobody read it
  EXPECT_EQ(p.mem->read_bytes, 3 * p.layout.page_bytes()) << "the copies ran before the buffers went back";
}

// A reader of a chunk waits for its copy: a restore while the copies are pending.
TEST(PageMirrors, ARestoreWaitsForTheCopiesItReads) {
  Pools p;
  p.copy_like_a_gpu();
  SequenceState s = p.fresh();
  append(s, *p.mem, 70, 3);
  const store::ModelState at70 = to_model_state(s, ModelFingerprint{1, 2});
  EXPECT_EQ(p.mem->read_bytes, 0u);
  Pools elsewhere;
  SequenceState r = elsewhere.fresh();
  ASSERT_TRUE(restore_from_model_state(at70, r).is_ok());
  EXPECT_EQ(p.mem->read_bytes, 5 * p.layout.page_bytes());
  for (int64_t pos = 0; pos < 70; ++pos) ASSERT_EQ(token_bytes(r, pos), token_bytes(s, pos)) << pos;
}

// Two linear-attention layers' states (conv and recurrent) in `mem`, with no attention pool.
SequenceState linear_sequence(std::shared_ptr<Memory> mem) {
  std::vector<LinearState> linear(2);
  for (int i = 0; i < 2; ++i) {
    linear[std::size_t(i)].layer = 2 * i;
    linear[std::size_t(i)].conv_shape = {6, 3};
    linear[std::size_t(i)].recurrent_shape = {2, 4, 5};
  }
  return SequenceState("m", nullptr, std::move(linear), std::move(mem));
}

// A pass over the linear states: every value of them from `tag`, written in place.
void rewrite_linear(SequenceState& s, Memory& mem, float tag) {
  ASSERT_TRUE(s.reserve(1).is_ok());
  for (const LinearState& l : s.linear()) {
    for (auto [block, n] : {std::pair{&l.conv, l.conv_floats()}, std::pair{&l.recurrent, l.recurrent_floats()}}) {
      std::vector<float> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = tag + float(l.layer) * 100.f + float(i);
      mem.from_host(block->data(), v.data(), n * sizeof(float));
    }
  }
  s.advance(1);
}

std::vector<float> chunk_floats(const store::StateChunk& c) {
  std::vector<float> v(c.data.size() / sizeof(float));
  std::memcpy(v.data(), c.data.data(), c.data.size());
  return v;
}

TEST(LinearStateSnapshots, ACheckpointKeepsTheStateOfItsMomentWhileTheNextPassRewritesIt) {
  auto mem = std::make_shared<OffHostMemory>();
  mem->deferred = true;  // as a GPU's memory: the copies out run beside the next pass
  SequenceState s = linear_sequence(mem);
  rewrite_linear(s, *mem, 1000.f);
  const store::ModelState cp = to_model_state(s, ModelFingerprint{1, 2});
  ASSERT_EQ(cp.chunks.size(), 4u);
  EXPECT_EQ(mem->read_bytes, 0u) << "the checkpoint waited for its copies";

  rewrite_linear(s, *mem, 2000.f);  // the next pass, at once
  SequenceState want = linear_sequence(host_memory());
  rewrite_linear(want, *host_memory(), 1000.f);
  const store::ModelState expected = to_model_state(want, ModelFingerprint{1, 2});
  for (std::size_t i = 0; i < cp.chunks.size(); ++i) {
    EXPECT_EQ(chunk_floats(cp.chunks[i]), chunk_floats(expected.chunks[i])) << "chunk " << i;
  }

  // Restored into another sequence, the states are those of the checkpoint's moment.
  SequenceState r = linear_sequence(mem);
  ASSERT_TRUE(restore_from_model_state(cp, r).is_ok());
  const store::ModelState back = to_model_state(r, ModelFingerprint{1, 2});
  for (std::size_t i = 0; i < back.chunks.size(); ++i) {
    EXPECT_EQ(chunk_floats(back.chunks[i]), chunk_floats(expected.chunks[i])) << "chunk " << i;
  }
}

TEST(LinearStateSnapshots, AStateThatNeverRanIsSavedAsZerosWithoutACopy) {
  auto mem = std::make_shared<OffHostMemory>();
  mem->deferred = true;
  SequenceState s = linear_sequence(mem);
  const store::ModelState cp = to_model_state(s, ModelFingerprint{1, 2});
  ASSERT_EQ(cp.chunks.size(), 4u);
  for (const store::StateChunk& c : cp.chunks) {
    const std::vector<float> v = chunk_floats(c);
    EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](float x) { return x == 0.f; }));
  }
  EXPECT_EQ(mem->read_bytes, 0u);
}

}  // namespace
}  // namespace ft::engine
