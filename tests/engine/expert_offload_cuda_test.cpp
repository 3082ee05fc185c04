// Routed experts kept in host RAM with a small GPU expert cache give the logits of the model with
// every expert in VRAM, under every policy for the misses (all fetched, all on the CPU, a fixed
// share, the adaptive split, every miss read in place from host memory), in prefill (experts streamed through the slots
// in rounds) and in decode; restore + suffix equals the whole sequence, and a batch equals its sequences alone. Skips
// without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "ft/engine/engine_status.h"
#include "ft/engine/model.h"
#include "ft/engine/scheduler.h"
#include "ft/engine/state_checkpoint.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

using engine::BatchSlice;
using engine::LogitsMode;
using engine::ModelFamily;
using engine::SequenceState;

constexpr double kTolerance = 1e-4;  // the same kernels but for the order a token's experts are added in
// Decode steps against a prefill of the same tokens: gemv kernels on fp32 rows against GEMMs on
// split bf16 halves, per-row against tiled attention (sequence_state_test's GPU tolerance; the
// sandwich-normed afmoe measured 3.6e-4 here, llama4_text 1.4e-4, the others below 1e-4).
constexpr double kDecodeVsPrefill = 2e-3;

constexpr std::uint64_t kKvBudget = 64ull << 20;

std::unique_ptr<engine::Model> load(const TempDir& dir, int slots, const char* policy = "adaptive") {
  engine::LoadOptions o;
  o.backend = engine::BackendKind::kCuda;
  o.kv_budget_bytes = kKvBudget;
  o.threads = 2;
  o.expert_slots = slots;
  auto p = engine::parse_moe_policy(policy);
  EXPECT_TRUE(p.is_ok());
  o.moe_policy = *p;
  auto m = engine::load_model(dir.path(), o);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

int32_t argmax(const float* row, std::size_t n) { return int32_t(std::max_element(row, row + n) - row); }

class ExpertOffloadCuda : public ::testing::TestWithParam<ModelFamily> {
 protected:
  void SetUp() override {
    FT_SKIP_UNLESS_FAMILY_RUNS(engine::BackendKind::kCuda, GetParam());
    ASSERT_TRUE(engine::write_random_checkpoint(dir_.path(), tiny_spec(GetParam(), false)).is_ok());
  }
  TempDir dir_;
};

TEST_P(ExpertOffloadCuda, EveryPolicyGivesTheResidentLogits) {
  auto resident = load(dir_, 0);
  ASSERT_TRUE(resident);
  EXPECT_FALSE(resident->placement().experts_on_host);
  EXPECT_FALSE(resident->expert_offload_stats());
  const std::size_t V = std::size_t(resident->vocab_size());
  const auto prompt = test_tokens(40, resident->vocab_size(), 5);  // > 16 rows: the prefill path
  SequenceState rs = resident->new_state();
  std::vector<float> want_prefill(prompt.size() * V);
  ASSERT_TRUE(resident->forward(rs, prompt, want_prefill.data(), LogitsMode::kAll).is_ok());
  // Decode steps on tokens of their own, not greedy ones: a random model's greedy tokens repeat, so
  // its steps route to the experts already cached and a family with one MoE layer (ernie4_5_moe's
  // tiny spec) would see too few misses for the splits below to show.
  const auto tokens = test_tokens(6, resident->vocab_size(), 9);
  std::vector<std::vector<float>> want_steps;
  for (const int32_t token : tokens) {
    std::vector<float> l(V);
    ASSERT_TRUE(resident->forward(rs, {&token, 1}, l.data(), LogitsMode::kLast).is_ok());
    want_steps.push_back(l);
  }

  // (".../hash": the CPU's share fixed per expert by a hash, FT_CUDA_SPLIT=hash, instead of each
  // layer's misses split by the share on the device)
  // ("direct:1": every miss the CPU's, where direct:auto may go)
  for (const char* entry :
       {"fetch", "cpu", "ratio:0.5", "adaptive", "direct", "direct:0.5", "direct:1", "direct:0.5/hash"}) {
    SCOPED_TRACE(entry);
    std::string policy_name = entry;
    const bool by_hash = policy_name.ends_with("/hash");
    if (by_hash) policy_name.resize(policy_name.size() - 5);
    ScopedEnv split("FT_CUDA_SPLIT", by_hash ? "hash" : nullptr);
    const char* policy = policy_name.c_str();
    // 5 slots for 8 experts a layer (3 of them transient, for a token's 3 choices): prefill in
    // rounds of 2, misses in decode.
    auto m = load(dir_, 5, policy);
    ASSERT_TRUE(m);
    const engine::PlacementPlan& plan = m->placement();
    EXPECT_TRUE(plan.experts_on_host);
    EXPECT_EQ(plan.expert_slots, 5u);
    EXPECT_EQ(plan.moe_policy, policy);
    engine::OpProfile profile;
    profile.time_ops = false;  // counts passes only: op timing would run every step as it is
    m->set_profile(&profile);
    SequenceState s = m->new_state();
    std::vector<float> got(prompt.size() * V);
    ASSERT_TRUE(m->forward(s, prompt, got.data(), LogitsMode::kAll).is_ok());
    EXPECT_LT(rel_l2(got.data(), want_prefill.data(), got.size()), kTolerance);
    const auto after_prefill = m->expert_offload_stats();
    ASSERT_TRUE(after_prefill);
    EXPECT_GT(after_prefill->fetched, 0u);  // prefill streams every missing expert
    EXPECT_EQ(after_prefill->cpu_computed, 0u);
    for (int step = 0; step < 6; ++step) {
      std::vector<float> l(V);
      const Status st = m->forward(s, {&tokens[std::size_t(step)], 1}, l.data(), LogitsMode::kLast);
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      EXPECT_LT(rel_l2(l.data(), want_steps[std::size_t(step)].data(), V), kTolerance) << "step " << step;
    }
    m->set_profile(nullptr);
    const auto st = m->expert_offload_stats();
    ASSERT_TRUE(st);
    EXPECT_EQ(st->policy, policy);
    EXPECT_GT(st->hits + st->misses, 0u);
    const std::string name = policy;
    if (name == "fetch") {
      EXPECT_EQ(st->cpu_computed, 0u);
      EXPECT_GT(st->fetched, after_prefill->fetched);
    } else if (name == "cpu") {
      EXPECT_GT(st->cpu_computed, 0u);
      EXPECT_EQ(st->fetched, after_prefill->fetched);
    } else if (name == "ratio:0.5") {
      // A top-1 family's decode step has at most one miss a layer, and half of one rounds to a
      // fetch: only top-k > 1 splits a step's misses.
      if (tiny_spec(GetParam(), false).top_k > 1) {
        EXPECT_GT(st->cpu_computed, 0u);
      }
      EXPECT_GT(st->fetched, after_prefill->fetched);
    } else if (name.starts_with("direct")) {
      // Misses read from host memory by the kernels (direct:0.5: half the uncached experts on the
      // CPU instead, which the GPU waits for on a flag); nothing in the step waits for the host,
      // so the decode steps record as a graph and replay (the last steps ran from the recording,
      // their choices copied out for the cache and the CPU as the recording left them).
      if (name == "direct") {
        EXPECT_GT(st->read_in_place, 0u);
        EXPECT_EQ(st->cpu_computed, 0u);
      } else if (name == "direct:1") {
        // Every miss the split sees is the CPU's; the host's count of the GPU's reads (the missed
        // experts not among the choices published to the CPU) is taken from its own view of the
        // cache and may still count a few.
        EXPECT_GT(st->cpu_computed, st->read_in_place);
      } else {
        EXPECT_GT(st->read_in_place, 0u);
        EXPECT_GT(st->cpu_computed, 0u);
      }
      if (!decode_host_synced(GetParam())) {
        EXPECT_GT(profile.replayed_passes, 0u);
      }
      // Every miss was read in place or computed on the CPU; the CPU also takes an admitted
      // expert whose copy into its slot has not landed (the cache counts it a hit).
      const std::uint64_t misses = st->misses - after_prefill->misses;
      EXPECT_LE(st->read_in_place, misses);
      EXPECT_GE(st->read_in_place + st->cpu_computed, misses);
    } else {
      EXPECT_EQ(st->read_in_place, 0u);
      EXPECT_EQ(profile.replayed_passes, 0u);
    }
    EXPECT_EQ(st->layer_hit_rate.size(), plan.moe_layers);
  }
}

// The policies that take each layer's choices to the host copy the next layer's predicted experts
// ahead (its router on this layer's input) into transient slots; the next layer reads the ones it
// chose there. 14 slots, 12 of them transient: two cached experts for the 16 of the two MoE layers,
// so decode misses, and room for a layer's own fetches and the next layer's copies side by side.
TEST_P(ExpertOffloadCuda, ExpertsCopiedAheadGiveTheResidentLogits) {
  auto resident = load(dir_, 0);
  ASSERT_TRUE(resident);
  const std::size_t V = std::size_t(resident->vocab_size());
  const auto prompt = test_tokens(24, resident->vocab_size(), 5);
  const auto tokens = test_tokens(6, resident->vocab_size(), 9);
  SequenceState rs = resident->new_state();
  std::vector<float> want_prefill(prompt.size() * V);
  ASSERT_TRUE(resident->forward(rs, prompt, want_prefill.data(), LogitsMode::kAll).is_ok());
  std::vector<std::vector<float>> want_steps;
  for (const int32_t token : tokens) {
    std::vector<float> l(V);
    ASSERT_TRUE(resident->forward(rs, {&token, 1}, l.data(), LogitsMode::kLast).is_ok());
    want_steps.push_back(l);
  }
  ScopedEnv transient("FT_CUDA_TRANSIENT_SLOTS", "12");
  // (in place, "direct...": the SMs copy the next layer's predicted misses on a side stream, opt-in)
  for (const char* policy : {"fetch", "ratio:0.5", "adaptive", "adaptive/off", "direct", "direct:0.5", "direct:1"}) {
    SCOPED_TRACE(policy);
    std::string name = policy;
    const bool off = name.ends_with("/off"), in_place = name.starts_with("direct");
    if (off) name.resize(name.size() - 4);
    ScopedEnv prefetch("FT_CUDA_PREFETCH", off ? "0" : in_place ? "direct" : "1");
    auto m = load(dir_, 14, name.c_str());
    ASSERT_TRUE(m);
    SequenceState s = m->new_state();
    std::vector<float> got(prompt.size() * V);
    ASSERT_TRUE(m->forward(s, prompt, got.data(), LogitsMode::kAll).is_ok());
    EXPECT_LT(rel_l2(got.data(), want_prefill.data(), got.size()), kTolerance);
    for (std::size_t step = 0; step < tokens.size(); ++step) {
      std::vector<float> l(V);
      const Status st = m->forward(s, {&tokens[step], 1}, l.data(), LogitsMode::kLast);
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      EXPECT_LT(rel_l2(l.data(), want_steps[step].data(), V), kTolerance) << "step " << step;
    }
    const auto st = m->expert_offload_stats();
    ASSERT_TRUE(st);
    EXPECT_LE(st->prefetch_used, st->prefetched);
    if (in_place) {
      if (m->placement().moe_layers >= 2 && GetParam() != ModelFamily::kDeepseekV4) {
        EXPECT_GT(st->staged_ahead_layers, 0u);
      }
      continue;
    }
    if (off || m->placement().moe_layers < 2 || GetParam() == ModelFamily::kDeepseekV4) {
      // (no next MoE layer to copy ahead for; or, DeepSeek-V4, routing chosen on the host)
      if (off) {
        EXPECT_EQ(st->prefetched, 0u);
      }
      continue;
    }
    EXPECT_GT(st->prefetched, 0u);
    EXPECT_GT(st->prefetch_used, 0u);  // the steps above read experts from the copies ahead
  }
}

// Decode steps record as graphs under the in-place policies: a policy set between steps (with or
// without the CPU's share, or one that syncs every layer) must run its own work, not a recording
// made under another.
TEST_P(ExpertOffloadCuda, SwitchingPoliciesBetweenStepsKeepsTheResidentLogits) {
  auto resident = load(dir_, 0);
  ASSERT_TRUE(resident);
  const std::size_t V = std::size_t(resident->vocab_size());
  const auto prompt = test_tokens(40, resident->vocab_size(), 11);
  const std::vector<const char*> order{"direct",   "direct",     "direct", "direct:0.5", "direct:0.5",
                                       "adaptive", "direct:0.5", "direct", "direct:0.5"};
  SequenceState rs = resident->new_state();
  std::vector<float> last(prompt.size() * V);
  ASSERT_TRUE(resident->forward(rs, prompt, last.data(), LogitsMode::kAll).is_ok());
  std::vector<int32_t> tokens{argmax(last.data() + (prompt.size() - 1) * V, V)};
  std::vector<std::vector<float>> want;
  for (std::size_t step = 0; step < order.size(); ++step) {
    std::vector<float> l(V);
    ASSERT_TRUE(resident->forward(rs, {&tokens.back(), 1}, l.data(), LogitsMode::kLast).is_ok());
    want.push_back(l);
    tokens.push_back(argmax(l.data(), V));
  }
  auto m = load(dir_, 5, "direct");
  ASSERT_TRUE(m);
  engine::OpProfile profile;
  profile.time_ops = false;
  m->set_profile(&profile);
  SequenceState s = m->new_state();
  ASSERT_TRUE(m->forward(s, prompt, nullptr, LogitsMode::kNone).is_ok());
  for (std::size_t step = 0; step < order.size(); ++step) {
    SCOPED_TRACE(order[step]);
    m->set_moe_policy(*engine::parse_moe_policy(order[step]));
    std::vector<float> l(V);
    const Status st = m->forward(s, {&tokens[step], 1}, l.data(), LogitsMode::kLast);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_LT(rel_l2(l.data(), want[step].data(), V), kTolerance) << "step " << step;
    EXPECT_EQ(argmax(l.data(), V), tokens[step + 1]) << "step " << step;
  }
  m->set_profile(nullptr);
  // The third direct step, and the last two (a family whose steps sync inside runs them as they are).
  if (!decode_host_synced(GetParam())) {
    EXPECT_GE(profile.replayed_passes, 3u);
  }
  const auto st = m->expert_offload_stats();
  ASSERT_TRUE(st);
  EXPECT_GT(st->cpu_computed, 0u);
}

// direct:auto moves the CPU's share between windows of decode steps (share_tuner.h): every step
// keeps the resident logits whatever the share, and the share seen in the stats moves.
TEST_P(ExpertOffloadCuda, DirectAutoMovesItsShareAndKeepsTheResidentLogits) {
  auto resident = load(dir_, 0);
  ASSERT_TRUE(resident);
  const std::size_t V = std::size_t(resident->vocab_size());
  const auto prompt = test_tokens(24, resident->vocab_size(), 13);
  constexpr int kSteps = 40;  // five windows of eight
  SequenceState rs = resident->new_state();
  std::vector<float> last(prompt.size() * V);
  ASSERT_TRUE(resident->forward(rs, prompt, last.data(), LogitsMode::kAll).is_ok());
  std::vector<int32_t> tokens{argmax(last.data() + (prompt.size() - 1) * V, V)};
  std::vector<std::vector<float>> want;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<float> l(V);
    ASSERT_TRUE(resident->forward(rs, {&tokens.back(), 1}, l.data(), LogitsMode::kLast).is_ok());
    want.push_back(l);
    tokens.push_back(argmax(l.data(), V));
  }
  auto m = load(dir_, 5, "direct:auto");
  ASSERT_TRUE(m);
  SequenceState s = m->new_state();
  ASSERT_TRUE(m->forward(s, prompt, nullptr, LogitsMode::kNone).is_ok());
  std::set<double> shares;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<float> l(V);
    const Status st = m->forward(s, {&tokens[std::size_t(step)], 1}, l.data(), LogitsMode::kLast);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_LT(rel_l2(l.data(), want[std::size_t(step)].data(), V), kTolerance) << "step " << step;
    EXPECT_EQ(argmax(l.data(), V), tokens[std::size_t(step) + 1]) << "step " << step;
    const auto stats = m->expert_offload_stats();
    ASSERT_TRUE(stats);
    EXPECT_EQ(stats->policy, "direct:auto");
    EXPECT_GE(stats->cpu_share, 0.0);
    EXPECT_LE(stats->cpu_share, 1.0);
    shares.insert(stats->cpu_share);
  }
  EXPECT_GE(shares.size(), 2u) << "the share never moved";
  EXPECT_GT(m->expert_offload_stats()->cpu_computed, 0u);
}

TEST_P(ExpertOffloadCuda, RestorePlusSuffixEqualsTheWholeSequence) {
  auto m = load(dir_, 5, "ratio:0.5");
  ASSERT_TRUE(m);
  const std::size_t V = std::size_t(m->vocab_size());
  const auto ids = test_tokens(52, m->vocab_size(), 9);
  SequenceState whole = m->new_state();
  std::vector<float> want(ids.size() * V);
  ASSERT_TRUE(m->forward(whole, ids, want.data(), LogitsMode::kAll).is_ok());

  const std::size_t cut = 37;
  SequenceState prefix = m->new_state();
  ASSERT_TRUE(m->forward(prefix, std::span(ids).first(cut), nullptr, LogitsMode::kNone).is_ok());
  const auto fp = engine::store_fingerprint(*m);
  const store::ModelState saved = engine::to_model_state(prefix, fp);
  SequenceState restored = m->new_state();
  ASSERT_TRUE(engine::restore_from_model_state(saved, restored).is_ok());
  // The suffix one token at a time (decode's split) and then the rest in one pass.
  std::vector<float> got((ids.size() - cut) * V);
  for (std::size_t i = cut; i < ids.size(); ++i) {
    ASSERT_TRUE(m->forward(restored, {&ids[i], 1}, got.data() + (i - cut) * V, LogitsMode::kLast).is_ok());
  }
  EXPECT_LT(rel_l2(got.data(), want.data() + cut * V, got.size()), kDecodeVsPrefill);
}

TEST_P(ExpertOffloadCuda, ABatchEqualsItsSequencesAlone) {
  auto m = load(dir_, 6, "ratio:0.5");
  ASSERT_TRUE(m);
  const std::size_t V = std::size_t(m->vocab_size());
  std::vector<SequenceState> batch, alone;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 3; ++i) {
    prompts.push_back(test_tokens(20 + std::size_t(i) * 7, m->vocab_size(), 20 + uint64_t(i)));
    for (auto* v : {&batch, &alone}) {
      v->push_back(m->new_state());
      ASSERT_TRUE(m->forward(v->back(), prompts.back(), nullptr, LogitsMode::kNone).is_ok());
    }
  }
  for (int step = 0; step < 3; ++step) {
    std::vector<float> together(3 * V), one(3 * V);
    std::vector<int32_t> next{int32_t(step + 1), int32_t(step + 50), int32_t(step + 99)};
    std::vector<BatchSlice> slices;
    for (std::size_t i = 0; i < 3; ++i)
      slices.push_back({&batch[i], {&next[i], 1}, together.data() + i * V, LogitsMode::kLast});
    ASSERT_TRUE(m->forward_batch(slices).is_ok());
    for (std::size_t i = 0; i < 3; ++i)
      ASSERT_TRUE(m->forward(alone[i], {&next[i], 1}, one.data() + i * V, LogitsMode::kLast).is_ok());
    EXPECT_LT(rel_l2(together.data(), one.data(), together.size()), kTolerance) << "step " << step;
  }
}

TEST_P(ExpertOffloadCuda, TheEngineStatusShowsTheCacheAndTheSplit) {
  if (GetParam() != ModelFamily::kQwen3Moe) GTEST_SKIP() << "one family is enough";
  auto m = load(dir_, 5, "ratio:0.5");
  ASSERT_TRUE(m);
  SequenceState s = m->new_state();
  const auto ids = test_tokens(30, m->vocab_size(), 2);
  ASSERT_TRUE(m->forward(s, ids, nullptr, LogitsMode::kNone).is_ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(m->forward(s, {&ids[std::size_t(i)], 1}, nullptr, LogitsMode::kNone).is_ok());
  engine::Scheduler scheduler(*m, nullptr, {});
  const nlohmann::json j = engine::engine_status(scheduler, nullptr);
  const nlohmann::json& x = j["placement"]["experts"];
  EXPECT_EQ(x["slots"], 5);
  EXPECT_EQ(x["policy"], "ratio:0.5");
  EXPECT_TRUE(x["in_host_ram"].get<bool>());
  const nlohmann::json& st = x["stats"];
  EXPECT_GT(st["hits"].get<uint64_t>() + st["misses"].get<uint64_t>(), 0u);
  EXPECT_GT(st["fetched"].get<uint64_t>(), 0u);
  EXPECT_GT(st["cpu_computed"].get<uint64_t>(), 0u);
  EXPECT_EQ(st["layer_hit_rate"].size(), m->placement().moe_layers);
  EXPECT_GT(st["split"]["pcie_gbps"].get<double>(), 0.0);
}

// Under a budget (no --expert-slots), the workspace past what decode steps take is lent to the
// cache after a few decode steps and taken back by the next prefill chunk: the logits stay the
// resident model's throughout, decode in the lent slots included.
TEST_P(ExpertOffloadCuda, TheWorkspaceLentToTheCacheKeepsTheResidentLogits) {
  auto resident = load(dir_, 0);
  ASSERT_TRUE(resident);
  const std::size_t V = std::size_t(resident->vocab_size());
  const auto prompt = test_tokens(40, resident->vocab_size(), 5);
  const auto more = test_tokens(20, resident->vocab_size(), 6);
  const auto tokens = test_tokens(24, resident->vocab_size(), 9);
  // prompt, 12 steps, the 20-token chunk, 12 steps.
  const auto run = [&](engine::Model& m, std::vector<std::vector<float>>& out) {
    SequenceState s = m.new_state();
    std::vector<float> l(prompt.size() * V);
    ASSERT_TRUE(m.forward(s, prompt, l.data(), LogitsMode::kAll).is_ok());
    out.push_back(l);
    for (int half = 0; half < 2; ++half) {
      if (half == 1) {
        std::vector<float> c(more.size() * V);
        ASSERT_TRUE(m.forward(s, more, c.data(), LogitsMode::kAll).is_ok());
        out.push_back(c);
      }
      for (int step = 0; step < 12; ++step) {
        std::vector<float> d(V);
        const Status st = m.forward(s, {&tokens[std::size_t(half * 12 + step)], 1}, d.data(), LogitsMode::kLast);
        ASSERT_TRUE(st.is_ok()) << st.to_string();
        out.push_back(d);
      }
    }
  };
  std::vector<std::vector<float>> want;
  ASSERT_NO_FATAL_FAILURE(run(*resident, want));

  // A budget for the weights without their experts, the KV pages, the 2 GiB workspace of budgets
  // below 24 GiB (placement.cpp) and 6 slots.
  auto sized = load(dir_, 5);
  ASSERT_TRUE(sized);
  const engine::PlacementPlan p5 = sized->placement();
  sized.reset();
  // (The KV budget asked, not the pool it gave: the pool rounds down to whole pages, and slots of a
  // tiny model are ~10 KB, so the pool's rounding moved the cache by slots.)
  const std::uint64_t budget =
      p5.device_weight_bytes() + p5.linear_state_room() + kKvBudget + (2ull << 30) + 6 * p5.expert_slot_bytes;
  for (const char* policy : {"adaptive", "direct"}) {
    SCOPED_TRACE(policy);
    engine::LoadOptions o;
    o.backend = engine::BackendKind::kCuda;
    o.kv_budget_bytes = kKvBudget;
    o.threads = 2;
    o.gpu_mem_bytes = budget;
    o.moe_policy = *engine::parse_moe_policy(policy);
    auto loaded = engine::load_model(dir_.path(), o);
    ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
    auto m = std::move(loaded).value();
    ASSERT_TRUE(m->placement().experts_on_host);
    const int planned = int(m->placement().expert_slots);
    ASSERT_GE(planned, 3);
    std::vector<std::vector<float>> got;
    ASSERT_NO_FATAL_FAILURE(run(*m, got));
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_LT(rel_l2(got[i].data(), want[i].data(), got[i].size()), kTolerance) << "pass " << i;
    // The last 12 steps ran with the workspace lent again (after the chunk took it back).
    const auto st = m->expert_offload_stats();
    ASSERT_TRUE(st);
    EXPECT_GT(st->slots, planned);
    EXPECT_EQ(m->placement().expert_slots, uint64_t(planned));  // the plan counts the cache's own memory
    // A prefill-sized pass takes it back.
    SequenceState s = m->new_state();
    std::vector<float> l(V);
    ASSERT_TRUE(m->forward(s, prompt, l.data(), LogitsMode::kLast).is_ok());
    EXPECT_EQ(m->expert_offload_stats()->slots, planned);
  }
}

// An offload plan sets a prefill pass size (the workspace grown to hold it); a pass of that many
// rows keeps its temporaries inside the workspace and gives the resident logits.
TEST(ExpertOffloadCudaPass, APassOfThePlannedRowsStaysInsideTheWorkspace) {
  FT_SKIP_UNLESS_FAMILY_RUNS(engine::BackendKind::kCuda, ModelFamily::kQwen3Moe);
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(ModelFamily::kQwen3Moe, false)).is_ok());
  auto m = load(dir, 5);
  ASSERT_TRUE(m);
  const engine::PlacementPlan plan = m->placement();
  ASSERT_TRUE(plan.experts_on_host);
  EXPECT_EQ(m->pass_rows(), int64_t(plan.pass_rows));
  ASSERT_GE(m->pass_rows(), 256);
  EXPECT_NE(plan.to_text().find("prefill passes of"), std::string::npos);
  const auto prompt = test_tokens(std::size_t(m->pass_rows()), m->vocab_size(), 31);
  const std::size_t V = std::size_t(m->vocab_size());
  std::vector<float> got(V), want(V);
  SequenceState s = m->new_state();
  ASSERT_TRUE(m->forward(s, prompt, got.data(), LogitsMode::kLast).is_ok());
  EXPECT_EQ(m->expert_offload_stats()->workspace_overflow_bytes, 0u);

  auto resident = load(dir, 0);
  ASSERT_TRUE(resident);
  SequenceState r = resident->new_state();
  ASSERT_TRUE(resident->forward(r, prompt, want.data(), LogitsMode::kLast).is_ok());
  EXPECT_LT(rel_l2(got.data(), want.data(), V), kTolerance);
}

// Misses read in place, staged (FT_CUDA_STAGE_MISSES=1, read when the model loads): a kernel copies
// each step's uncached experts into staging slots by wide loads over PCIe and the expert kernels read
// them there. Prefill and every decode step give the resident logits, with the GPU reading all the
// misses (direct) and half of them (direct:0.5, the CPU the rest); the steps replay as graphs.
// Qwen3-MoE (softmax, top-k 3 of 8) and gpt-oss (biases, the clamped GLU, top-k 2).
TEST(ExpertOffloadCudaStaged, StagedMissesGiveTheResidentLogits) {
  for (const ModelFamily family : {ModelFamily::kQwen3Moe, ModelFamily::kGptOss}) {
    SCOPED_TRACE(engine::model_family_name(family));
    FT_SKIP_UNLESS_FAMILY_RUNS(engine::BackendKind::kCuda, family);
    TempDir dir;
    ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(family, false)).is_ok());
    auto resident = load(dir, 0);
    ASSERT_TRUE(resident);
    const std::size_t V = std::size_t(resident->vocab_size());
    const auto prompt = test_tokens(40, resident->vocab_size(), 5);
    const auto tokens = test_tokens(8, resident->vocab_size(), 9);
    SequenceState rs = resident->new_state();
    std::vector<float> want_prefill(V);
    ASSERT_TRUE(resident->forward(rs, prompt, want_prefill.data(), LogitsMode::kLast).is_ok());
    std::vector<std::vector<float>> want_steps;
    for (const int32_t token : tokens) {
      std::vector<float> l(V);
      ASSERT_TRUE(resident->forward(rs, {&token, 1}, l.data(), LogitsMode::kLast).is_ok());
      want_steps.push_back(l);
    }
    // (the split on the device stages only the GPU's misses: the CPU's stay the zero expert, whose
    // address tells the kernels to skip its biases, gpt-oss's)
    for (const char* entry : {"direct", "direct:0.5", "direct:0.5/hash"}) {
      SCOPED_TRACE(entry);
      std::string policy = entry;
      const bool by_hash = policy.ends_with("/hash");
      if (by_hash) policy.resize(policy.size() - 5);
      const ScopedEnv split("FT_CUDA_SPLIT", by_hash ? "hash" : nullptr);
      const ScopedEnv staged("FT_CUDA_STAGE_MISSES", "1");
      auto m = load(dir, 5, policy.c_str());
      ASSERT_TRUE(m);
      SequenceState s = m->new_state();
      std::vector<float> got(V);
      ASSERT_TRUE(m->forward(s, prompt, got.data(), LogitsMode::kLast).is_ok());
      EXPECT_LT(rel_l2(got.data(), want_prefill.data(), V), kTolerance);
      for (std::size_t step = 0; step < tokens.size(); ++step) {
        ASSERT_TRUE(m->forward(s, {&tokens[step], 1}, got.data(), LogitsMode::kLast).is_ok());
        EXPECT_LT(rel_l2(got.data(), want_steps[step].data(), V), kTolerance) << "step " << step;
      }
      const auto st = m->expert_offload_stats();
      ASSERT_TRUE(st);
      EXPECT_GT(st->read_in_place, 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ExpertOffloadCuda, ::testing::ValuesIn(engine::model_families()),
                         [](const auto& info) { return std::string(engine::model_family_name(info.param)); });

}  // namespace
}  // namespace ft::test
