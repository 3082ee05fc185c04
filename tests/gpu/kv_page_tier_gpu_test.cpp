// The hot checkpoint tier on a GPU: a checkpoint keeps its KV pages in VRAM after its sequence
// ends, a restore through the tier chain takes them without allocating or copying a page, and the
// next token's logits equal those of the sequence that never stopped. Skips, saying why, where no
// GPU is usable.
#include <gtest/gtest.h>

#include "ft/engine/kv_page_tier.h"
#include "ft/engine/model.h"
#include "ft/engine/random_checkpoint.h"
#include "ft/engine/state_checkpoint.h"
#include "ft/store/host_ram_tier.h"
#include "ft/store/tier_chain.h"
#include "gpu_test_util.h"
#include "test_support.h"

namespace ft::engine {
namespace {

TEST(KvPageTierGpu, ARestoreTakesTheKeptPagesAndContinuesExactly) {
  FT_REQUIRE_GPU();
  test::TempDir dir;
  RandomCheckpointSpec spec;
  spec.family = ModelFamily::kQwen3_5Moe;  // attention and DeltaNet layers: pages and linear state
  spec.vocab_size = 512;
  spec.hidden_size = 32;
  spec.num_layers = 4;
  spec.head_dim = 32;
  ASSERT_TRUE(write_random_checkpoint(dir.path(), spec));
  LoadOptions o;
  o.backend = BackendKind::kCuda;
  o.kv_budget_bytes = 64ull << 20;
  auto m = load_model(dir.path(), o);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const Model& model = **m;
  ASSERT_TRUE(model.kv_pool() && !model.kv_pool()->memory().is_host());

  auto gpu = make_kv_page_tier(model.kv_pool(), 256u << 20);
  ASSERT_TRUE(gpu.is_ok());
  std::vector<std::unique_ptr<store::StateTier>> tiers;
  tiers.push_back(std::move(gpu).value());
  tiers.push_back(std::make_unique<store::HostRamTier>(256u << 20));
  store::TierChain chain(std::move(tiers), {256u << 20, 0});

  std::vector<int32_t> tokens;
  for (int i = 0; i < 150; ++i) tokens.push_back(i * 13 % 512);  // 3 pages of 64
  SequenceState s = model.new_state();
  ASSERT_TRUE(model.forward(s, tokens, nullptr, LogitsMode::kNone).is_ok());
  const ModelFingerprint fp = store_fingerprint(model);
  const store::StoreKey k{"t", fp, {9, 9}};
  ASSERT_TRUE(chain.save_deferred(k, std::make_shared<const store::ModelState>(to_model_state(s, fp))).is_ok());
  std::vector<float> want(512), got(512);
  const int32_t next[1] = {5};
  ASSERT_TRUE(model.forward(s, next, want.data(), LogitsMode::kLast).is_ok());  // writes into a copy of page 2
  s.reset();
  const std::uint64_t kept = model.kv_stats().pages_used;
  EXPECT_EQ(kept, 3u) << "the tier keeps the checkpoint's pages in VRAM";

  SequenceState back = model.new_state();
  ASSERT_TRUE(restore_model_state(chain, k, back).is_ok());
  EXPECT_EQ(model.kv_stats().pages_used, kept) << "the restore allocated no page";
  ASSERT_TRUE(model.forward(back, next, got.data(), LogitsMode::kLast).is_ok());
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace ft::engine
