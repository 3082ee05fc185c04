// The placement plan a model reports at load: weights by kind add up to the checkpoint, the KV
// pool's pages and tokens agree with its budget, and on the GPU a budget too small for the
// weights is refused up front, saying how much is needed.
#include <gtest/gtest.h>

#include "ft/engine/checkpoint.h"
#include "ft/engine/engine_status.h"
#include "ft/engine/model.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

using engine::BackendKind;
using engine::ModelFamily;

uint64_t checkpoint_bytes(const std::filesystem::path& dir) {
  auto ckpt = engine::Checkpoint::open(dir);
  EXPECT_TRUE(ckpt.is_ok());
  uint64_t n = 0;
  for (const std::string& name : ckpt->tensor_names()) n += ckpt->tensor(name)->nbytes;
  return n;
}

class Placement : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override { FT_SKIP_UNLESS_RUNNABLE(GetParam()); }
};

TEST_P(Placement, WeightsByKindAddUpAndTheKvPoolMatchesItsBudget) {
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(ModelFamily::kQwen3Next, false)).is_ok());
  engine::LoadOptions o;
  o.backend = GetParam();
  o.kv_budget_bytes = 64ull << 20;
  auto m = engine::load_model(dir.path(), o);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const engine::PlacementPlan& p = (*m)->placement();
  EXPECT_EQ(p.weight_bytes(), checkpoint_bytes(dir.path()));
  EXPECT_GT(p.embedding_bytes, 0u);
  EXPECT_GT(p.dense_bytes, 0u);
  EXPECT_GT(p.routed_expert_bytes, 0u);
  const engine::KvLayout kv = *(*m)->kv_layout();
  EXPECT_EQ(p.kv_page_bytes, kv.page_bytes());
  EXPECT_EQ(p.kv_pages, (64ull << 20) / kv.page_bytes());
  EXPECT_EQ(p.kv_tokens, p.kv_pages * uint64_t(kv.page_tokens));
  EXPECT_GT(p.linear_state_bytes, 0u);  // qwen3_next has DeltaNet layers
  const std::string text = p.to_text();
  for (const char* row : {"embeddings", "dense weights", "routed experts", "KV pages", "linear state", "total"})
    EXPECT_NE(text.find(row), std::string::npos) << row << " missing from:\n" << text;
  if (GetParam() == BackendKind::kCuda) {
    EXPECT_NE(p.device.find("cuda:0"), std::string::npos) << p.device;
    EXPECT_GT(p.budget_bytes, p.total_bytes());
    EXPECT_GT(p.workspace_bytes, 0u);
  } else {
    EXPECT_EQ(p.budget_bytes, 0u);
    EXPECT_EQ(p.linear_state_sequences, 0u);  // host RAM: taken as sequences start, no room kept
    EXPECT_EQ(engine::placement_json(**m)["linear_state_bytes"], 0);
  }
  EXPECT_EQ(engine::placement_json(**m)["linear_state_bytes_per_sequence"], p.linear_state_bytes);
  EXPECT_EQ(engine::placement_json(**m)["kv"]["stats"]["pages_max"], p.kv_pages);  // nothing given back
}

// The engine's --ctx reaches the pool: with no --kv-budget it holds at least one whole context
// (on the host also where that is more than the default quarter of RAM).
TEST_P(Placement, TheDefaultKvPoolHoldsOneWholeContext) {
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(ModelFamily::kQwen3Moe, false)).is_ok());
  engine::LoadOptions o;
  o.backend = GetParam();
  o.context_tokens = 100000;
  if (GetParam() != BackendKind::kCuda) {
    auto by_default = engine::load_model(dir.path(), o);
    ASSERT_TRUE(by_default.is_ok()) << by_default.status().to_string();
    o.context_tokens = int64_t(2 * (*by_default)->placement().kv_tokens);
  }
  auto m = engine::load_model(dir.path(), o);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const engine::PlacementPlan& p = (*m)->placement();
  EXPECT_EQ(p.context_tokens, uint64_t(o.context_tokens));
  EXPECT_GE(p.kv_tokens, p.context_tokens);
  EXPECT_EQ(p.to_text().find("fewer than one --ctx"), std::string::npos) << p.to_text();
}

// Loading reports its progress: after each layer, bytes placed never going back, then once done;
// the matrices are nearly all of the checkpoint (the rest are norms and small vectors).
TEST_P(Placement, LoadingReportsProgressLayerByLayer) {
  TempDir dir;
  const auto spec = tiny_spec(ModelFamily::kQwen3Moe, false);
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), spec).is_ok());
  struct Call {
    std::uint64_t placed, total;
    bool done;
  };
  std::vector<Call> calls;
  engine::LoadOptions o;
  o.backend = GetParam();
  o.kv_budget_bytes = 64ull << 20;
  o.progress = [&](std::uint64_t placed, std::uint64_t total, bool done) { calls.push_back({placed, total, done}); };
  auto m = engine::load_model(dir.path(), o);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  ASSERT_EQ(calls.size(), std::size_t(spec.num_layers) + 1);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].total, checkpoint_bytes(dir.path()));
    EXPECT_EQ(calls[i].done, i + 1 == calls.size());
    if (i > 0 && !calls[i].done) {
      EXPECT_GT(calls[i].placed, calls[i - 1].placed) << "call " << i;  // a layer adds its weights
    } else if (i > 0) {
      EXPECT_GE(calls[i].placed, calls[i - 1].placed);  // the head, unless tied to the embedding
    }
  }
  EXPECT_LE(calls.back().placed, calls.back().total);
  EXPECT_GT(double(calls.back().placed), 0.9 * double(calls.back().total));
}

TEST_P(Placement, AGpuBudgetTooSmallIsRefusedSayingHowMuchIsNeeded) {
  if (GetParam() != BackendKind::kCuda) GTEST_SKIP() << "a GPU budget only";
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(ModelFamily::kQwen3Moe, false)).is_ok());
  engine::LoadOptions o;
  o.backend = BackendKind::kCuda;
  o.gpu_mem_bytes = 1ull << 30;  // below the 2 GiB workspace alone
  auto m = engine::load_model(dir.path(), o);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(m.status().message().find("the model needs"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("the budget allows 1.0 GiB"), std::string::npos) << m.status().message();

  o.gpu_mem_bytes = 5ull << 30;
  o.kv_budget_bytes = 4ull << 30;  // more than 5 GiB leaves after 2 GiB of workspace, even with experts offloaded
  auto k = engine::load_model(dir.path(), o);
  ASSERT_FALSE(k.is_ok());
  EXPECT_NE(k.status().message().find("--kv-budget"), std::string::npos) << k.status().message();

  o.gpu_mem_bytes = uint64_t(1) << 40;  // more than any GPU has: refused, naming the flag
  auto r = engine::load_model(dir.path(), o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("more than the GPU has free"), std::string::npos) << r.status().message();

  o.gpu_mem_bytes = 5ull << 30;
  o.kv_budget_bytes = 0;  // the rest of the budget becomes KV pages
  auto ok = engine::load_model(dir.path(), o);
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  const engine::PlacementPlan& p = (*ok)->placement();
  EXPECT_EQ(p.budget_bytes, 5ull << 30);
  EXPECT_LE(p.total_bytes(), p.budget_bytes);
  EXPECT_GT(p.total_bytes() + p.kv_page_bytes, p.budget_bytes);  // the pages fill what is left
}

// A DeltaNet model whose KV pool takes all the GPU has free still starts as many sequences as it
// was loaded for: their recurrent state lives outside the pool, in room the plan kept.
TEST_P(Placement, AFullGpuStillHoldsTheLinearStateOfEverySequence) {
  if (GetParam() != BackendKind::kCuda) GTEST_SKIP() << "a GPU budget only";
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(ModelFamily::kQwen3Next, false)).is_ok());
  engine::LoadOptions o;
  o.backend = BackendKind::kCuda;
  o.state_sequences = 6;
  auto m = engine::load_model(dir.path(), o);  // no --gpu-mem: the pool fills what is free
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const engine::PlacementPlan p = (*m)->placement();
  EXPECT_EQ(p.linear_state_sequences, 6u);
  EXPECT_LE(p.total_bytes(), p.budget_bytes);
  EXPECT_NE(p.to_text().find("room for 6 sequences"), std::string::npos) << p.to_text();
  const nlohmann::json j = engine::placement_json(**m);
  EXPECT_EQ(j["linear_state_sequences"], 6);
  EXPECT_EQ(j["linear_state_bytes"], 6 * p.linear_state_bytes);
  EXPECT_EQ(j["total_bytes"], p.total_bytes());
  // The six states come out of that room: the GPU's free memory does not move.
  const auto before = (*m)->device_memory();
  ASSERT_TRUE(before.has_value());
  std::vector<engine::SequenceState> states;
  for (int i = 0; i < 6; ++i) {
    states.push_back((*m)->new_state());
    const Status s = states.back().reserve(1);
    ASSERT_TRUE(s) << "sequence " << i << ": " << s.to_string();
  }
  EXPECT_EQ((*m)->device_memory()->free_bytes, before->free_bytes);
}

INSTANTIATE_TEST_SUITE_P(Backends, Placement, ::testing::Values(BackendKind::kCpu, BackendKind::kCuda),
                         [](const auto& info) { return std::string(engine::backend_name(info.param)); });

}  // namespace
}  // namespace ft::test

namespace ft::test {
namespace {

// The Qwen3-30B-A3B shape in bf16: 48 MoE layers of 128 experts of 9 MiB.
engine::PlacementPlan qwen3_30b_plan() {
  engine::PlacementPlan p;
  p.embedding_bytes = 2ull * 151936 * 2048 * 2;
  p.dense_bytes = 1836000000ull;
  p.moe_layers = 48;
  p.experts_per_layer = 128;
  p.routed_expert_bytes = 48ull * 128 * 3 * 2048 * 768 * 2;
  p.kv_page_bytes = 64ull * 48 * 4 * 128 * 2 * 2;
  return p;
}

TEST(GpuPlan, AModelThatFitsStaysResident) {
  engine::PlacementPlan p = qwen3_30b_plan();
  ASSERT_TRUE(engine::plan_gpu_memory(p, {80ull << 30}).is_ok());
  EXPECT_FALSE(p.experts_on_host);
  EXPECT_EQ(p.workspace_bytes, 4ull << 30);
  EXPECT_EQ(p.device_weight_bytes(), p.weight_bytes());
}

// Q4_K_M stores some layers' downs in Q6_K: a slot holds the largest layer's expert, not the average.
TEST(GpuPlan, ASlotHoldsTheLargestLayersExpert) {
  engine::PlacementPlan p = qwen3_30b_plan();
  const uint64_t q4k = 2ull * 768 * 2048 / 256 * 144, q6k = 2048ull * 768 / 256 * 210;
  p.routed_expert_bytes = 48ull * 128 * (q4k + 768ull * 2048 / 256 * 144) / 2 + 48ull * 128 * (q4k + q6k) / 2;
  p.largest_expert_bytes = q4k + q6k;
  ASSERT_TRUE(engine::plan_gpu_memory(p, {8ull << 30}).is_ok());
  ASSERT_TRUE(p.experts_on_host);
  EXPECT_GE(p.expert_slot_bytes, p.largest_expert_bytes + 3 * 256);
  EXPECT_LT(p.expert_slot_bytes, p.largest_expert_bytes + 5 * 256);
}

TEST(GpuPlan, ExpertsMoveToHostRamAndTheRestBecomesSlots) {
  for (uint64_t gib : {8ull, 12ull, 24ull}) {
    SCOPED_TRACE(std::to_string(gib) + " GiB");
    engine::PlacementPlan p = qwen3_30b_plan();
    const uint64_t budget = gib << 30;
    ASSERT_TRUE(engine::plan_gpu_memory(p, {budget}).is_ok());
    EXPECT_TRUE(p.experts_on_host);
    EXPECT_EQ(p.workspace_bytes, gib < 24 ? 2ull << 30 : 4ull << 30);
    EXPECT_EQ(p.expert_slot_bytes, 3ull * 2048 * 768 * 2 + 768);  // an expert, its three matrices aligned
    EXPECT_EQ(p.device_weight_bytes(), p.embedding_bytes + p.dense_bytes);
    const uint64_t room = budget - p.device_weight_bytes() - p.workspace_bytes;
    EXPECT_EQ(p.kv_budget_bytes, room / 4);  // the KV pool: a quarter of the room
    // The slots fill the rest, less than one slot left over.
    const uint64_t cache_room = room - p.kv_budget_bytes;
    EXPECT_LE(p.expert_cache_bytes(), cache_room);
    EXPECT_GT(p.expert_cache_bytes() + p.expert_slot_bytes, cache_room);
    p.kv_pages = p.kv_budget_bytes / p.kv_page_bytes;
    EXPECT_LE(p.total_bytes(), budget);
    EXPECT_NE(p.to_text().find("expert cache"), std::string::npos);
  }
  // 8 GiB: ~267 slots, 4% of the 6,144 experts.
  engine::PlacementPlan p = qwen3_30b_plan();
  ASSERT_TRUE(engine::plan_gpu_memory(p, {8ull << 30}).is_ok());
  EXPECT_GT(p.expert_slots, 250u);
  EXPECT_LT(p.expert_slots, 300u);
}

// Elastic VRAM shrinks an offloaded plan's workspace, last, to a pass of 256 rows: the plan says
// how far, and the pass size follows the workspace (a multiple of 256 rows, from 256 to 8,192).
TEST(GpuPlan, OffloadedTheWorkspaceMayShrinkToAPassOf256Rows) {
  constexpr uint64_t row = 420000, fixed = 600ull << 20;
  EXPECT_EQ(engine::least_workspace(row, fixed), (fixed + 256 * row + 255) / 256 * 256);
  EXPECT_EQ(engine::pass_rows_for(engine::least_workspace(row, fixed), row, fixed), 256u);
  EXPECT_EQ(engine::pass_rows_for(fixed + 1000 * row, row, fixed), 768u);  // whole steps of 256 that fit
  EXPECT_EQ(engine::pass_rows_for(fixed + 100000 * row, row, fixed), 8192u);
  EXPECT_EQ(engine::pass_rows_for(fixed / 2, row, fixed), 256u);  // never fewer than one step
  engine::PlacementPlan p = qwen3_30b_plan();
  ASSERT_TRUE(engine::plan_gpu_memory(p, {.budget_bytes = 8ull << 30, .pass_row_bytes = row, .pass_fixed_bytes = fixed})
                  .is_ok());
  EXPECT_EQ(p.least_workspace_bytes, engine::least_workspace(row, fixed));
  EXPECT_LT(p.least_workspace_bytes, p.workspace_bytes / 2);
  EXPECT_EQ(p.pass_rows, engine::pass_rows_for(p.workspace_bytes, row, fixed));
  // Resident, or with no row size known: a fixed workspace.
  engine::PlacementPlan resident = qwen3_30b_plan();
  ASSERT_TRUE(
      engine::plan_gpu_memory(resident, {.budget_bytes = 80ull << 30, .pass_row_bytes = row, .pass_fixed_bytes = fixed})
          .is_ok());
  EXPECT_EQ(resident.least_workspace_bytes, 0u);
  engine::PlacementPlan unknown = qwen3_30b_plan();
  ASSERT_TRUE(engine::plan_gpu_memory(unknown, {8ull << 30}).is_ok());
  EXPECT_EQ(unknown.least_workspace_bytes, 0u);
}

// Offloaded, every pass of a prompt streams the experts the cache lacks: the workspace grows (out
// of the cache's room, up to a third of the budget) to hold long passes, and the plan says how
// many rows one may take.
TEST(GpuPlan, OffloadedTheWorkspaceHoldsLongPrefillPasses) {
  constexpr uint64_t row = 420000, fixed = 600ull << 20;  // about a 30B-A3B's (decoder.cpp)
  for (uint64_t gib : {8ull, 12ull, 24ull}) {
    SCOPED_TRACE(std::to_string(gib) + " GiB");
    engine::PlacementPlan p = qwen3_30b_plan();
    const uint64_t budget = gib << 30;
    ASSERT_TRUE(
        engine::plan_gpu_memory(p, {.budget_bytes = budget, .pass_row_bytes = row, .pass_fixed_bytes = fixed}).is_ok());
    ASSERT_TRUE(p.experts_on_host);
    EXPECT_GE(p.workspace_bytes, gib < 24 ? 2ull << 30 : 4ull << 30);  // never below the fixed size
    EXPECT_LE(p.workspace_bytes, std::max<uint64_t>(budget / 3, 4ull << 30));
    EXPECT_EQ(p.pass_rows % 256, 0u);
    EXPECT_LE(p.pass_rows, 8192u);
    EXPECT_LE(fixed + p.pass_rows * row, p.workspace_bytes);  // a pass of pass_rows fits
    if (p.pass_rows < 8192) {
      EXPECT_GT(fixed + (p.pass_rows + 256) * row, p.workspace_bytes);  // the most that fit
    }
    // Out of the expert cache's room: the KV pool is the one planned without it.
    engine::PlacementPlan fixed_ws = qwen3_30b_plan();
    ASSERT_TRUE(engine::plan_gpu_memory(fixed_ws, {budget}).is_ok());
    EXPECT_EQ(p.kv_budget_bytes, fixed_ws.kv_budget_bytes);
    EXPECT_LE(p.expert_slots, fixed_ws.expert_slots);
    EXPECT_GE(p.expert_cache_bytes(), fixed_ws.expert_cache_bytes() / 2);
    p.kv_pages = p.kv_budget_bytes / p.kv_page_bytes;
    EXPECT_LE(p.total_bytes(), budget);
    EXPECT_NE(p.to_text().find("prefill passes of " + std::to_string(p.pass_rows) + " rows"), std::string::npos);
  }
  engine::PlacementPlan eight = qwen3_30b_plan();
  ASSERT_TRUE(
      engine::plan_gpu_memory(eight, {.budget_bytes = 8ull << 30, .pass_row_bytes = row, .pass_fixed_bytes = fixed})
          .is_ok());
  EXPECT_EQ(eight.workspace_bytes, (8ull << 30) / 3 / 256 * 256);  // a pass of 8,192 would want 3.8 GiB
  EXPECT_EQ(eight.pass_rows, 5120u);                   // a 4,096-token prompt in one pass
  engine::PlacementPlan big = qwen3_30b_plan();
  ASSERT_TRUE(
      engine::plan_gpu_memory(big, {.budget_bytes = 24ull << 30, .pass_row_bytes = row, .pass_fixed_bytes = fixed})
          .is_ok());
  EXPECT_EQ(big.pass_rows, 8192u);
  EXPECT_EQ(big.workspace_bytes, 4ull << 30);  // 8,192 rows fit the fixed 4 GiB

  // Resident: the fixed workspace, and the passes it holds. With no row size known, no pass size.
  engine::PlacementPlan resident = qwen3_30b_plan();
  ASSERT_TRUE(
      engine::plan_gpu_memory(resident, {.budget_bytes = 80ull << 30, .pass_row_bytes = row, .pass_fixed_bytes = fixed})
          .is_ok());
  EXPECT_FALSE(resident.experts_on_host);
  EXPECT_EQ(resident.pass_rows, 8192u);
  EXPECT_EQ(resident.workspace_bytes, 4ull << 30);
  engine::PlacementPlan wide = qwen3_30b_plan();  // rows twice as wide: (4 GiB - 600 MiB) / 840,000
  ASSERT_TRUE(
      engine::plan_gpu_memory(wide, {.budget_bytes = 80ull << 30, .pass_row_bytes = 2 * row, .pass_fixed_bytes = fixed})
          .is_ok());
  EXPECT_EQ(wide.pass_rows, 4352u);
  engine::PlacementPlan unknown = qwen3_30b_plan();
  ASSERT_TRUE(engine::plan_gpu_memory(unknown, {8ull << 30}).is_ok());
  EXPECT_EQ(unknown.pass_rows, 0u);
  EXPECT_EQ(unknown.workspace_bytes, 2ull << 30);

  // A budget that barely holds the least offload plan (here: a large --kv-budget) still plans: the
  // workspace grows only into what is left over.
  engine::PlacementPlan tight = qwen3_30b_plan();
  const uint64_t slot = 3ull * 2048 * 768 * 2 + 768, budget = 9ull << 30;
  const uint64_t kv = budget - (tight.embedding_bytes + tight.dense_bytes + (2ull << 30) + 4 * slot);
  ASSERT_TRUE(
      engine::plan_gpu_memory(
          tight, {.budget_bytes = budget, .kv_budget_bytes = kv, .pass_row_bytes = row, .pass_fixed_bytes = fixed})
          .is_ok());
  EXPECT_TRUE(tight.experts_on_host);
  EXPECT_GT(tight.workspace_bytes, 2ull << 30);
  EXPECT_LE(tight.workspace_bytes, (2ull << 30) + slot);
  EXPECT_GE(tight.expert_slots, 3u);
}

// An agent's context (32k tokens: 3 GiB of this model's KV) comes before expert slots, and the
// rest goes to them: at 12 and 24 GiB the pool is the context (a quarter of the room would be 1.9
// and 4.4 GiB); at 8 GiB it takes 3/4 of the room and the plan says how short of a context it falls.
TEST(GpuPlan, WithAContextTheKvPoolIsOneContextAndTheRestExpertSlots) {
  const uint64_t context = 32768, kv_bytes = context / 64 * qwen3_30b_plan().kv_page_bytes;
  ASSERT_EQ(kv_bytes, 3ull << 30);
  for (uint64_t gib : {8ull, 12ull, 24ull}) {
    SCOPED_TRACE(std::to_string(gib) + " GiB");
    engine::PlacementPlan p = qwen3_30b_plan();
    ASSERT_TRUE(engine::plan_gpu_memory(p, {.budget_bytes = gib << 30, .context_kv_bytes = kv_bytes}).is_ok());
    ASSERT_TRUE(p.experts_on_host);
    const uint64_t room = (gib << 30) - p.device_weight_bytes() - p.workspace_bytes;
    const uint64_t want = gib == 8 ? room - room / 4 : kv_bytes;
    EXPECT_EQ(p.kv_budget_bytes, want);
    EXPECT_LE(p.expert_cache_bytes() + p.kv_budget_bytes, room);
    p.kv_pages = p.kv_budget_bytes / p.kv_page_bytes;
    p.kv_tokens = p.kv_pages * 64;
    p.context_tokens = context;
    const bool short_of_context = p.to_text().find("fewer than one --ctx of 32768") != std::string::npos;
    EXPECT_EQ(short_of_context, gib == 8) << p.to_text();
  }
  // A budget with room for little more than three slots still plans: the context gives way.
  engine::PlacementPlan tight = qwen3_30b_plan();
  const uint64_t slot = 3ull * 2048 * 768 * 2 + 768, fixed = tight.embedding_bytes + tight.dense_bytes + (2ull << 30);
  ASSERT_TRUE(engine::plan_gpu_memory(tight, {.budget_bytes = fixed + 4 * slot, .context_kv_bytes = kv_bytes}).is_ok());
  EXPECT_GE(tight.expert_slots, 3u);
  // --kv-budget wins over the context.
  engine::PlacementPlan k = qwen3_30b_plan();
  ASSERT_TRUE(engine::plan_gpu_memory(k, {12ull << 30, 1ull << 30, kv_bytes}).is_ok());
  EXPECT_EQ(k.kv_budget_bytes, 1ull << 30);
}

// Resident only when a whole context fits beside the weights: 62 GiB holds this model's 56 GiB
// and workspace with 1.8 GiB of KV, so a 3 GiB context offloads experts to make room. A dense
// model cannot: it stays resident with the KV it can have.
TEST(GpuPlan, AContextThatDoesNotFitBesideTheWeightsOffloadsExperts) {
  const uint64_t kv_bytes = 3ull << 30;
  engine::PlacementPlan p = qwen3_30b_plan();
  ASSERT_TRUE(engine::plan_gpu_memory(p, {62ull << 30}).is_ok());
  EXPECT_FALSE(p.experts_on_host);
  engine::PlacementPlan q = qwen3_30b_plan();
  ASSERT_TRUE(engine::plan_gpu_memory(q, {.budget_bytes = 62ull << 30, .context_kv_bytes = kv_bytes}).is_ok());
  EXPECT_TRUE(q.experts_on_host);
  EXPECT_EQ(q.kv_budget_bytes, kv_bytes);
  EXPECT_GT(q.expert_slots, 5000u);  // most of the 6,144 experts still in VRAM
  engine::PlacementPlan d;
  d.dense_bytes = 10ull << 30;
  d.kv_page_bytes = 1 << 20;
  ASSERT_TRUE(engine::plan_gpu_memory(d, {.budget_bytes = 13ull << 30, .context_kv_bytes = kv_bytes}).is_ok());
  EXPECT_FALSE(d.experts_on_host);
}

TEST(GpuPlan, KvBudgetAndSlotCountsAreHonouredOrRefused) {
  engine::PlacementPlan p = qwen3_30b_plan();
  ASSERT_TRUE(engine::plan_gpu_memory(p, {12ull << 30, 1ull << 30}).is_ok());
  EXPECT_EQ(p.kv_budget_bytes, 1ull << 30);
  // Slots asked for: offloaded even where everything would fit.
  engine::PlacementPlan q = qwen3_30b_plan();
  ASSERT_TRUE(engine::plan_gpu_memory(q, {.budget_bytes = 100ull << 30, .expert_slots = 16}).is_ok());
  EXPECT_TRUE(q.experts_on_host);
  EXPECT_EQ(q.expert_slots, 16u);
  // Too small a budget: refused, saying how much is needed.
  engine::PlacementPlan r = qwen3_30b_plan();
  const Status s = engine::plan_gpu_memory(r, {4ull << 30});
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable);
  EXPECT_NE(s.message().find("needs at least 4.9 GiB"), std::string::npos) << s.message();
  // A KV pool that leaves no room for two slots.
  engine::PlacementPlan k = qwen3_30b_plan();
  const Status ks = engine::plan_gpu_memory(k, {8ull << 30, 6ull << 30});
  ASSERT_FALSE(ks.is_ok());
  EXPECT_NE(ks.message().find("--kv-budget 6.0 GiB"), std::string::npos) << ks.message();
  // A dense model cannot offload anything.
  engine::PlacementPlan d;
  d.dense_bytes = 10ull << 30;
  d.kv_page_bytes = 1 << 20;
  const Status ds = engine::plan_gpu_memory(d, {8ull << 30});
  ASSERT_FALSE(ds.is_ok());
  EXPECT_NE(ds.message().find("the model needs 12.0 GiB"), std::string::npos) << ds.message();
}

}  // namespace
}  // namespace ft::test
