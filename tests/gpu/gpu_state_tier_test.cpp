// The GPU hot tier against the bytes it was given, as a tier in front of host RAM, and as the
// source of a model-state restore (restore + next token == the state that was saved). Skips,
// saying why, where no GPU is usable.
#include <gtest/gtest.h>

#include <cstring>

#include "ft/engine/device.h"
#include "gpu_test_util.h"
#include "ft/engine/gpu_state_tier.h"
#include "ft/engine/model.h"
#include "ft/engine/random_checkpoint.h"
#include "ft/engine/state_checkpoint.h"
#include "ft/store/host_ram_tier.h"
#include "ft/store/tier_chain.h"
#include "test_support.h"

namespace ft::engine {
namespace {

store::ModelState random_state(std::uint64_t seed, const std::vector<std::size_t>& sizes) {
  store::ModelState s;
  s.tokens = 7;
  s.model = {1, 2};
  std::uint64_t x = seed;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    store::StateChunk c;
    c.layer = std::uint32_t(i);
    c.kind = store::ChunkKind::kRecurrent;
    c.dtype = store::DType::kU8;
    c.shape = {sizes[i]};
    c.data.resize(sizes[i]);
    std::byte* d = c.data.mutable_data();
    for (std::size_t j = 0; j < sizes[i]; ++j) d[j] = std::byte((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 56);
    s.chunks.push_back(std::move(c));
  }
  return s;
}

std::vector<std::vector<std::byte>> read_back(store::StateTier& t, const store::StoreKey& k) {
  auto h = t.lookup_header(k);
  EXPECT_TRUE(h.is_ok()) << (h.is_ok() ? "" : h.status().message());
  std::vector<std::vector<std::byte>> chunks(h.is_ok() ? h->chunks.size() : 0);
  if (!h.is_ok()) return chunks;
  for (std::size_t i = 0; i < chunks.size(); ++i) chunks[i].resize(h->chunks[i].bytes);
  const Status st = t.read_chunks(k, *h, [&](const store::ChunkPiece& p) {
    std::memcpy(chunks[p.chunk_index].data() + p.offset, p.bytes.data(), p.bytes.size());
    return Status::ok();
  });
  EXPECT_TRUE(st.is_ok()) << st.message();
  return chunks;
}

TEST(GpuStateTier, HoldsExactBytesEvictsByBudgetAndNeverPinned) {
  FT_REQUIRE_GPU();
  auto gpu = make_gpu_state_tier(26u << 20);
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
  const auto state = random_state(1, {9u << 20, 1, 0, 3u << 20});  // pieces cross the 4 MiB unit
  const store::StoreKey a{"t", state.model, {0, 1}}, b{"t", state.model, {0, 2}}, c{"t", state.model, {0, 3}};
  ASSERT_TRUE((*gpu)->save(a, state).is_ok());
  const auto back = read_back(**gpu, a);
  ASSERT_EQ(back.size(), state.chunks.size());
  for (std::size_t i = 0; i < back.size(); ++i) EXPECT_EQ(back[i], state.chunks[i].data) << "chunk " << i;
  (*gpu)->pin(a);
  ASSERT_TRUE((*gpu)->save(b, state).is_ok());
  ASSERT_TRUE((*gpu)->save(c, state).is_ok());  // 3 x 12 MiB > 26 MiB: b goes, pinned a stays
  EXPECT_TRUE((*gpu)->contains(a));
  EXPECT_FALSE((*gpu)->contains(b));
  EXPECT_TRUE((*gpu)->contains(c));
  EXPECT_EQ((*gpu)->stats().evictions, 1u);
}

TEST(GpuStateTier, InFrontOfHostRamRestoresAModelStateExactly) {
  FT_REQUIRE_GPU();
  test::TempDir dir;
  RandomCheckpointSpec spec;
  spec.family = ModelFamily::kQwen3_5Moe;
  spec.vocab_size = 512;
  spec.hidden_size = 32;
  spec.num_layers = 4;
  spec.head_dim = 16;
  ASSERT_TRUE(write_random_checkpoint(dir.path(), spec));
  auto m = load_model(dir.path());
  ASSERT_TRUE(m.is_ok());
  const Model& model = **m;

  auto gpu = make_gpu_state_tier(256u << 20);
  ASSERT_TRUE(gpu.is_ok());
  auto ram = std::make_unique<store::HostRamTier>(256u << 20);
  store::HostRamTier* ram_ptr = ram.get();
  std::vector<std::unique_ptr<store::StateTier>> tiers;
  tiers.push_back(std::move(gpu).value());
  tiers.push_back(std::move(ram));
  store::TierChain chain(std::move(tiers), {256u << 20, 0});

  std::vector<int32_t> tokens;
  for (int i = 0; i < 50; ++i) tokens.push_back(i * 13 % 512);
  SequenceState s = model.new_state();
  ASSERT_TRUE(model.forward(s, tokens, nullptr, LogitsMode::kNone).is_ok());
  const ModelFingerprint fp = store_fingerprint(model);
  const store::StoreKey k{"t", fp, {9, 9}};
  ASSERT_TRUE(chain.save_deferred(k, std::make_shared<const store::ModelState>(to_model_state(s, fp))).is_ok());
  EXPECT_TRUE(chain.tier(0).contains(k) && ram_ptr->contains(k));

  SequenceState back = model.new_state();
  ASSERT_TRUE(restore_model_state(chain.tier(0), k, back).is_ok());  // read back from the GPU tier
  std::vector<float> a(512), b(512);
  const int32_t next[1] = {5};
  ASSERT_TRUE(model.forward(s, next, a.data(), LogitsMode::kLast).is_ok());
  ASSERT_TRUE(model.forward(back, next, b.data(), LogitsMode::kLast).is_ok());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace ft::engine
