// The host-side parts of expert offload, which the GPU path is built on: the expert cache's
// bookkeeping (LRU, per-layer floor, the step's experts protected), the split planner's policies
// and cost model, and the CPU half of a layer (chosen experts only, the rest left to the GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "fixture_moe.h"
#include "ft/engine/backend.h"
#include "ft/engine/bf16.h"
#include "ft/engine/checkpoint.h"
#include "ft/engine/cpu_experts.h"
#include "ft/engine/expert_cache.h"
#include "ft/engine/moe_split.h"
#include "ft/engine/ops_moe.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

using engine::ExpertCache;

TEST(ExpertCache, HitsMissesAndLeastRecentlyUsedEviction) {
  ExpertCache c(3, 2, 8);
  EXPECT_FALSE(c.lookup(0, 1));
  for (int e : {1, 2, 3}) {
    auto a = c.admit(0, e);
    ASSERT_TRUE(a);
    EXPECT_FALSE(a->evicted);
  }
  EXPECT_EQ(c.resident(), 3);
  c.begin_step();
  ASSERT_TRUE(c.lookup(0, 1));  // 1 is now the most recently used; 2 the least
  c.begin_step();
  auto a = c.admit(1, 5);
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->evicted);
  EXPECT_EQ(a->evicted->expert, 2);
  EXPECT_FALSE(c.find(0, 2));
  EXPECT_EQ(c.find(1, 5), a->slot);
  EXPECT_EQ(c.layer_stats(0).hits, 1u);
  EXPECT_EQ(c.layer_stats(0).misses, 1u);
  EXPECT_EQ(c.layer_stats(0).resident, 2);
  EXPECT_EQ(c.layer_stats(1).resident, 1);
}

TEST(ExpertCache, TheStepsExpertsAreNeverEvicted) {
  ExpertCache c(2, 1, 8);
  ASSERT_TRUE(c.admit(0, 0));
  ASSERT_TRUE(c.admit(0, 1));
  // Both slots serve this step: a third expert finds none.
  EXPECT_FALSE(c.admit(0, 2));
  c.begin_step();
  ASSERT_TRUE(c.lookup(0, 1));
  auto a = c.admit(0, 2);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->evicted->expert, 0);
  EXPECT_FALSE(c.admit(0, 3));
}

TEST(ExpertCache, APerLayerFloorKeepsOtherLayersSlots) {
  ExpertCache c(4, 2, 8, /*floor_per_layer=*/2);
  ASSERT_TRUE(c.admit(0, 0));
  ASSERT_TRUE(c.admit(0, 1));
  ASSERT_TRUE(c.admit(1, 0));
  ASSERT_TRUE(c.admit(1, 1));
  c.begin_step();
  // Layer 1 may not take layer 0's slots (it holds only its floor), but may reuse its own.
  auto a = c.admit(1, 2);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->evicted->layer, 1);
  EXPECT_EQ(c.layer_stats(0).resident, 2);
  auto b = c.admit(1, 3);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->evicted->layer, 1);
  EXPECT_FALSE(c.admit(1, 4));  // its two slots serve this step; layer 0 is at its floor
}

TEST(ExpertCache, TwoProtectedStepsKeepThePreviousStepsExpertsToo) {
  ExpertCache c(3, 1, 8, 0, /*protected_steps=*/2);
  ASSERT_TRUE(c.admit(0, 0));
  c.begin_step();
  ASSERT_TRUE(c.admit(0, 1));
  ASSERT_TRUE(c.admit(0, 2));
  c.begin_step();
  ASSERT_TRUE(c.lookup(0, 2));
  // Expert 0 (two steps back) may go; 1 (the previous step's) may not.
  auto a = c.admit(0, 3);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->evicted->expert, 0);
  EXPECT_FALSE(c.admit(0, 4));
  c.begin_step();
  EXPECT_EQ(c.admit(0, 4)->evicted->expert, 1);
  EXPECT_FALSE(c.admit(0, 5));                   // 3 (the step before) and 4 (this one) are protected
  c.unprotect_earlier_steps();                   // the earlier steps' kernels are known to be done
  EXPECT_EQ(c.admit(0, 5)->evicted->expert, 2);  // least recently used first
  EXPECT_EQ(c.admit(0, 6)->evicted->expert, 3);
  EXPECT_FALSE(c.admit(0, 7));  // this step's stay protected
}

TEST(ExpertCache, DecodeAdmitsOnlyExpertsUsedMoreOftenThanTheirVictim) {
  ExpertCache c(2, 1, 8);
  ASSERT_TRUE(c.admit(0, 0));
  ASSERT_TRUE(c.admit(0, 1));
  for (int i = 0; i < 3; ++i) {
    c.begin_step();
    c.lookup(0, 0);
    c.lookup(0, 1);
  }
  // Expert 5, used as often as the residents, does not displace one (a layer cycling through more
  // experts than the cache holds keeps what it has instead of thrashing) ...
  for (int i = 0; i < 3; ++i) c.lookup(0, 5);
  c.begin_step();
  EXPECT_FALSE(c.admit(0, 5, ExpertCache::Admission::kIfHotter));
  // ... once used more often, it does; prefill admits regardless.
  c.lookup(0, 5);
  c.lookup(0, 5);
  EXPECT_GT(c.frequency(0, 5), c.frequency(0, 0));
  auto a = c.admit(0, 5, ExpertCache::Admission::kIfHotter);
  ASSERT_TRUE(a);
  c.begin_step();
  EXPECT_TRUE(c.admit(0, 6, ExpertCache::Admission::kAlways));
  // A free slot is always taken.
  ExpertCache d(2, 1, 8);
  EXPECT_TRUE(d.admit(0, 3, ExpertCache::Admission::kIfHotter));
}

// A prefill pass streams every expert of 6 layers (12) through 8 slots, one layer a step, as the
// backend's rounds do; returns the pass's hits.
std::uint64_t stream_pass(ExpertCache& c, ExpertCache::Admission admission) {
  const std::uint64_t before = c.hits();
  for (int layer = 0; layer < c.layers(); ++layer) {
    c.begin_step();
    for (int e = 0; e < c.experts(); ++e) {
      if (c.lookup(layer, e)) continue;
      EXPECT_TRUE(c.admit(layer, e, admission)) << layer << " " << e;
    }
  }
  return c.hits() - before;
}

TEST(ExpertCache, PrefillStreamsThroughAPoolOfItsOwnAndKeepsTheRest) {
  ExpertCache lru(8, 6, 2), streamed(8, 6, 2);
  ASSERT_EQ(streamed.stream_pool(), 4);  // min(3 layers' experts, half the slots)
  // Plain LRU over a cyclic scan larger than the cache: every expert is gone before it comes back.
  stream_pass(lru, ExpertCache::Admission::kAlways);
  EXPECT_EQ(stream_pass(lru, ExpertCache::Admission::kAlways), 0u);
  // Streamed: the first experts fill the slots beyond the pool and stay; the rest cycle through it.
  EXPECT_EQ(stream_pass(streamed, ExpertCache::Admission::kStream), 0u);
  for (int layer : {0, 1})
    for (int e : {0, 1}) {
      ASSERT_TRUE(streamed.find(layer, e));
      EXPECT_FALSE(streamed.streamed(*streamed.find(layer, e)));
    }
  EXPECT_EQ(stream_pass(streamed, ExpertCache::Admission::kStream), 4u);
  EXPECT_EQ(stream_pass(streamed, ExpertCache::Admission::kStream), 4u);

  // What decode admitted survives streaming; a stream whose slots all serve the current step
  // borrows the least recently used slot, which then belongs to the pool.
  ExpertCache c(4, 3, 2, 0, 1);
  ASSERT_EQ(c.stream_pool(), 2);
  ASSERT_TRUE(c.admit(2, 1, ExpertCache::Admission::kIfHotter));  // decode's
  c.begin_step();
  for (int e = 0; e < 2; ++e) ASSERT_TRUE(c.admit(0, e, ExpertCache::Admission::kStream));
  EXPECT_FALSE(c.streamed(*c.find(0, 0)));  // a free slot beyond the pool's: it stays
  EXPECT_TRUE(c.streamed(*c.find(0, 1)));
  c.begin_step();
  for (int e = 0; e < 2; ++e) ASSERT_TRUE(c.admit(1, e, ExpertCache::Admission::kStream));
  EXPECT_FALSE(c.find(0, 1));  // the last free slot, then the streamed one
  EXPECT_TRUE(c.find(0, 0));
  EXPECT_TRUE(c.find(2, 1));
  const auto a = c.admit(2, 0, ExpertCache::Admission::kStream);
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->evicted);
  EXPECT_EQ(a->evicted->layer, 2);
  EXPECT_EQ(a->evicted->expert, 1);
  EXPECT_TRUE(c.streamed(a->slot));
  EXPECT_TRUE(c.find(0, 0));
}

TEST(ExpertCache, ResizeGivesUpTheHighestSlots) {
  ExpertCache c(4, 1, 8);
  for (int e = 0; e < 4; ++e) ASSERT_EQ(c.admit(0, e)->slot, e);
  const auto lost = c.resize(2);
  ASSERT_EQ(lost.size(), 2u);
  EXPECT_EQ(lost[0].expert, 2);
  EXPECT_EQ(lost[1].expert, 3);
  EXPECT_EQ(c.slots(), 2);
  EXPECT_EQ(c.find(0, 1), 1);
  EXPECT_FALSE(c.find(0, 3));
  c.resize(3);
  c.begin_step();
  EXPECT_EQ(c.admit(0, 5)->slot, 2);  // the new free slot before any eviction
  c.clear();
  EXPECT_EQ(c.resident(), 0);
}

TEST(MoeSplit, PoliciesParseAndPrintTheirNames) {
  for (const char* name : {"adaptive", "fetch", "cpu", "ratio:0.25", "direct", "direct:0.6"}) {
    auto p = engine::parse_moe_policy(name);
    ASSERT_TRUE(p.is_ok()) << name;
    EXPECT_EQ(p->name(), name);
  }
  for (const char* bad : {"", "gpu", "ratio:", "ratio:1.5", "ratio:-0.1", "ratio:0.5x", "direct:", "direct:2"}) {
    auto p = engine::parse_moe_policy(bad);
    ASSERT_FALSE(p.is_ok()) << bad;
    EXPECT_NE(p.status().message().find("--moe-policy"), std::string::npos);
  }
}

std::vector<engine::SplitMiss> misses(std::initializer_list<int> tokens) {
  std::vector<engine::SplitMiss> out;
  int e = 10;
  for (int t : tokens) out.push_back({e++, t});
  return out;
}

TEST(MoeSplit, FixedPoliciesSplitAsTheySay) {
  const engine::SplitCosts c;
  const auto m = misses({1, 3, 1, 2});
  const std::size_t bytes = 9 << 20;
  auto fetch = engine::plan_split({engine::MoePolicy::Kind::kFetch}, c, m, bytes, 10);
  EXPECT_EQ(fetch.fetch.size(), 4u);
  EXPECT_TRUE(fetch.cpu.empty());
  // The fetch count is capped by the slots the step can take; the busiest are fetched first.
  auto capped = engine::plan_split({engine::MoePolicy::Kind::kFetch}, c, m, bytes, 2);
  EXPECT_EQ(capped.fetch, (std::vector<int>{11, 13}));
  EXPECT_EQ(capped.cpu, (std::vector<int>{10, 12}));
  auto cpu = engine::plan_split({engine::MoePolicy::Kind::kCpu}, c, m, bytes, 10);
  EXPECT_TRUE(cpu.fetch.empty());
  EXPECT_EQ(cpu.cpu.size(), 4u);
  auto ratio = engine::plan_split({engine::MoePolicy::Kind::kRatio, 0.25}, c, m, bytes, 10);
  EXPECT_EQ(ratio.fetch, (std::vector<int>{11}));
}

TEST(MoeSplit, AdaptiveBalancesThePathsByTheirRates) {
  const std::size_t bytes = 9'437'184;  // a Qwen3-30B-A3B expert in bf16
  engine::SplitCosts c;
  c.fetch_overhead_s = 0;
  c.cpu_overhead_s = 0;
  c.pcie_gbps = 50;
  c.cpu_gbps = 50;
  const auto m = misses({1, 1, 1, 1, 1, 1, 1, 1});
  // Equal rates: half and half.
  auto even = engine::plan_split({}, c, m, bytes, 8);
  EXPECT_EQ(even.fetch.size(), 4u);
  // A CPU three times slower: ~3 in 4 fetched; the prediction is the slower path's time.
  c.cpu_gbps = 50.0 / 3;
  auto fast_pcie = engine::plan_split({}, c, m, bytes, 8);
  EXPECT_EQ(fast_pcie.fetch.size(), 6u);
  EXPECT_NEAR(fast_pcie.predicted_s, 6 * double(bytes) / 50e9, 1e-9);
  // Slots run out: the rest goes to the CPU whatever it costs.
  EXPECT_EQ(engine::plan_split({}, c, m, bytes, 2).fetch.size(), 2u);
  // With host memory shared, each path is slower while the other runs: the split follows the
  // shared rates, and no split at all can win when sharing costs more than it gives.
  c.cpu_gbps = 50;
  c.pcie_shared_gbps = 10;
  c.cpu_shared_gbps = 10;
  auto shared = engine::plan_split({}, c, m, bytes, 8);
  EXPECT_TRUE(shared.fetch.empty() || shared.cpu.empty());
  // Fetches already decided (experts the cache admits) take PCIe time first: more goes to the CPU.
  c.pcie_shared_gbps = 0;
  c.cpu_shared_gbps = 0;
  EXPECT_EQ(engine::plan_split({}, c, misses({1, 1, 1, 1}), bytes, 8, /*committed=*/4).fetch.size(), 0u);
  EXPECT_EQ(engine::plan_split({}, c, misses({1, 1, 1, 1, 1, 1}), bytes, 8, /*committed=*/2).fetch.size(), 2u);
  // Each expert costs more on the CPU the more tokens it has: the busy one is fetched.
  engine::SplitCosts t;
  t.cpu_token_s = 1e-3;
  auto busy = engine::plan_split({}, t, misses({1, 9, 1}), bytes, 1);
  EXPECT_EQ(busy.fetch, (std::vector<int>{11}));
}

TEST(MoeSplit, TheModelLearnsTheRatesItMeasures) {
  engine::SplitCosts c;
  c.fetch_overhead_s = 0;
  c.cpu_overhead_s = 0;
  c.pcie_gbps = 10;
  c.cpu_gbps = 10;
  engine::SplitModel model(c);
  for (int i = 0; i < 100; ++i) {
    model.observe_fetch(50'000'000, 5, 1e-3, false);  // 50 GB/s
    model.observe_cpu(30'000'000, 1e-3, false);       // 30 GB/s
  }
  EXPECT_NEAR(model.costs().pcie_gbps, 50, 0.5);
  EXPECT_NEAR(model.costs().cpu_gbps, 30, 0.5);
  model.observe_fetch(0, 0, 1e-3, false);  // nothing measured: nothing learned
  EXPECT_NEAR(model.costs().pcie_gbps, 50, 0.5);
}

// A small MoE layer in bf16, owned by the test.
struct Layer {
  std::vector<Bf16Matrix> store;
  engine::MoeWeights w;
  // A view of a new matrix (its data stays put when `store` grows: the vectors move).
  engine::Matrix mat(int64_t rows, int64_t cols, std::mt19937& rng) {
    return store.emplace_back(rows, cols, rng).view();
  }
  Layer(int64_t H, int64_t I, int64_t E, std::size_t K, std::mt19937& rng) {
    w.hidden = H;
    w.router_spec.num_experts = std::size_t(E);
    w.router_spec.top_k = K;
    w.router = mat(E, H, rng);
    for (int64_t e = 0; e < E; ++e) {
      engine::SwiGluMatrices m;
      m.gate = mat(I, H, rng);
      m.up = mat(I, H, rng);
      m.down = mat(H, I, rng);
      w.experts.push_back(m);
    }
  }
};

TEST(CpuExperts, ComputesTheChosenExpertsAndLeavesTheRest) {
  std::mt19937 rng(7);
  const int64_t H = 64, I = 32, E = 8;
  const std::size_t K = 3, T = 5;
  Layer layer(H, I, E, K, rng);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(T * std::size_t(H));
  for (float& v : x) v = n(rng);
  // The reference's routing and layer output.
  engine::BackendOptions ro;
  ro.kind = engine::BackendKind::kReference;
  auto ref = engine::make_backend(ro);
  ASSERT_TRUE(ref.is_ok());
  std::vector<float> logits(T * std::size_t(E)), want(x.size());
  ASSERT_TRUE((*ref)->execute([&] {
    (*ref)->linear(x.data(), T, layer.w.router, nullptr, logits.data());
    (*ref)->moe(layer.w, x.data(), T, want.data(), nullptr);
  }));
  std::vector<int32_t> chosen(T * K);
  std::vector<float> weights(T * K);
  engine::ref::route_top_k(logits.data(), T, layer.w.router_spec, chosen.data(), weights.data());

  engine::CpuExperts cpu(2);
  std::vector<float> all(x.size());
  cpu.run(layer.w, x.data(), T, K, chosen.data(), weights.data(), all.data());
  EXPECT_LT(rel_l2(all.data(), want.data(), all.size()), 1e-5);
  // Two disjoint shares (every other choice) add up to the whole; no share is all zeros.
  std::vector<int32_t> even = chosen, odd = chosen;
  for (std::size_t i = 0; i < chosen.size(); ++i) (i % 2 ? even : odd)[i] = -1;
  std::vector<float> a(x.size(), 1.f), b(x.size(), 1.f);
  std::vector<float> sum(a.size(), 0.f);
  cpu.run(layer.w, x.data(), T, K, even.data(), weights.data(), a.data());
  cpu.run(layer.w, x.data(), T, K, odd.data(), weights.data(), b.data());
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = a[i] + b[i];
  EXPECT_LT(rel_l2(sum.data(), all.data(), sum.size()), 1e-6);
  EXPECT_GT(rel_l2(a.data(), all.data(), a.size()), 0.1);
  // Submitted, it runs on the arena's threads while this one goes on; drain waits for it.
  std::vector<float> async(x.size(), 7.f);
  std::atomic<bool> other_thread{false};
  const auto caller = std::this_thread::get_id();
  cpu.submit([&] {
    other_thread = std::this_thread::get_id() != caller;
    cpu.run(layer.w, x.data(), T, K, chosen.data(), weights.data(), async.data());
  });
  cpu.drain();
  EXPECT_TRUE(other_thread);
  EXPECT_EQ(async, all);
  // Timed phase by phase, the same bits; the phases add up to no more than the call, and the threads'
  // busy time inside the loops to no more than the loops' time on every thread.
  engine::CpuMoePhases phases;
  std::vector<float> timed(x.size());
  const auto t0 = std::chrono::steady_clock::now();
  cpu.run(layer.w, x.data(), T, K, chosen.data(), weights.data(), timed.data(), &phases);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(timed, all);
  EXPECT_EQ(phases.calls, 1u);
  EXPECT_EQ(phases.threads, 2);
  EXPECT_GT(phases.gate_up, 0.0);
  EXPECT_GT(phases.down, 0.0);
  EXPECT_GT(phases.busy, 0.0);
  EXPECT_LE(phases.prepare + phases.gate_up + phases.down + phases.finish, wall);
  EXPECT_LE(phases.busy, (phases.gate_up + phases.down) * phases.threads);
  // Nothing chosen here: zeros.
  std::vector<int32_t> none(chosen.size(), -1);
  cpu.run(layer.w, x.data(), T, K, none.data(), weights.data(), a.data());
  for (float v : a) ASSERT_EQ(v, 0.f);
}

// Warmed threads spin until the next run's loops begin, not for their whole horizon, and the run gives
// the bits it gives unwarmed; threads warmed with no run after them end at their horizon.
TEST(CpuExperts, WarmedThreadsTakeTheNextRunAndOtherwiseEndAtTheirHorizon) {
  std::mt19937 rng(5);
  const int64_t H = 64, I = 32, E = 8;
  const std::size_t K = 2, T = 1;
  Layer layer(H, I, E, K, rng);
  std::vector<float> x(static_cast<std::size_t>(H));
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float& v : x) v = n(rng);
  std::vector<int32_t> chosen = {1, 6};
  std::vector<float> weights = {0.25f, 0.75f};
  engine::CpuExperts cpu(3);
  std::vector<float> cold(x.size()), warmed(x.size());
  cpu.run(layer.w, x.data(), T, K, chosen.data(), weights.data(), cold.data());

  using Clock = std::chrono::steady_clock;
  const auto until_idle = [&](Clock::duration limit) {
    const auto t0 = Clock::now();
    while (cpu.warming() > 0 && Clock::now() - t0 < limit) std::this_thread::yield();
    return cpu.warming() == 0;
  };
  cpu.warm(std::chrono::seconds(30));  // far longer than the test may take
  EXPECT_EQ(cpu.warming(), 2) << "all but the caller's thread";
  cpu.run(layer.w, x.data(), T, K, chosen.data(), weights.data(), warmed.data());
  EXPECT_TRUE(until_idle(std::chrono::seconds(10))) << "the run did not end the warmed threads' wait";
  EXPECT_EQ(warmed, cold);

  cpu.warm(std::chrono::milliseconds(20));
  EXPECT_TRUE(until_idle(std::chrono::seconds(10))) << "with no run, the warmed threads outlived their horizon";
  cpu.warm(std::chrono::seconds(30));
  cpu.warm(std::chrono::seconds(30));  // while two wait, no more are woken
  EXPECT_LE(cpu.warming(), 2);
  cpu.run(layer.w, x.data(), T, K, chosen.data(), weights.data(), warmed.data());
  EXPECT_TRUE(until_idle(std::chrono::seconds(10)));
  // A run with nothing to compute (every choice another device's) has no loops: it ends them too.
  const std::vector<int32_t> none = {-1, -1};
  cpu.warm(std::chrono::seconds(30));
  cpu.run(layer.w, x.data(), T, K, none.data(), weights.data(), warmed.data());
  EXPECT_TRUE(until_idle(std::chrono::seconds(10))) << "a run without loops did not end the wait";
}

// The GGUF fixture's Q4_K / Q6_K experts (the integer block products) at decode sizes: three
// threads compute one thread's bits, and a share of the choices is a share of the whole.
TEST(CpuExperts, BlockExpertsGiveTheSameBitsOnAnyThreadCount) {
  auto ckpt = engine::Checkpoint::open(mixed_gguf_fixture());
  ASSERT_TRUE(ckpt.is_ok());
  const engine::MoeWeights w = fixture_moe(*ckpt);
  ASSERT_EQ(w.experts[0].gate.dtype, engine::DType::kQ4_K);
  ASSERT_EQ(w.experts[0].down.dtype, engine::DType::kQ6_K);
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const std::size_t K = 2;
  engine::CpuExperts three(3), one(1);
  for (std::size_t T : {1u, 3u}) {
    std::vector<float> x(T * 256);
    for (float& v : x) v = n(rng);
    std::vector<int32_t> chosen(T * K), first(T * K, -1);
    std::vector<float> weights(T * K, 0.5f);
    for (std::size_t t = 0; t < T; ++t) {
      chosen[t * K] = int32_t(t % 4);
      chosen[t * K + 1] = int32_t((t + 2) % 4);
      first[t * K] = chosen[t * K];
    }
    std::vector<float> on_three(x.size()), on_one(x.size()), part(x.size()), rest(x.size());
    three.run(w, x.data(), T, K, chosen.data(), weights.data(), on_three.data());
    one.run(w, x.data(), T, K, chosen.data(), weights.data(), on_one.data());
    EXPECT_EQ(on_three, on_one) << T << " tokens";
    EXPECT_TRUE(std::any_of(on_three.begin(), on_three.end(), [](float v) { return std::abs(v) > 1e-3f; }));
    std::vector<int32_t> second = chosen;
    for (std::size_t i = 0; i < chosen.size(); ++i)
      if (first[i] >= 0) second[i] = -1;
    three.run(w, x.data(), T, K, first.data(), weights.data(), part.data());
    three.run(w, x.data(), T, K, second.data(), weights.data(), rest.data());
    for (std::size_t i = 0; i < part.size(); ++i) part[i] += rest[i];
    EXPECT_LT(rel_l2(part.data(), on_three.data(), part.size()), 1e-6) << T << " tokens";
  }
}

// The same experts against the plain reference (each chosen expert's products on the dequantised
// rows, SwiGLU, weighted sum), and each token computed alone gives its row of the batch bit for bit:
// a token's int8 planes are quantised once for all its choices and read through the assignments'
// index, and a lone token's fp32 row (the fused kernels) at stride 0, where a batch copies rows.
TEST(CpuExperts, BlockExpertsFollowTheReferenceAndATokenAloneGivesItsBatchRow) {
  auto ckpt = engine::Checkpoint::open(mixed_gguf_fixture());
  ASSERT_TRUE(ckpt.is_ok());
  const engine::MoeWeights w = fixture_moe(*ckpt);
  const std::size_t H = 256, I = std::size_t(w.experts[0].inter()), K = 2, T = 6;
  std::mt19937 rng(23);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(T * H);
  for (float& v : x) v = n(rng);
  // Every pair of distinct experts once (4 experts), so experts have 1-3 tokens each.
  const std::vector<int32_t> chosen = {0, 1, 0, 2, 0, 3, 1, 2, 1, 3, 2, 3};
  const std::vector<float> weights = {0.7f, 0.3f, 0.4f, 0.6f, 0.5f, 0.5f, 0.2f, 0.8f, 0.9f, 0.1f, 0.35f, 0.65f};

  engine::BackendOptions ro;
  ro.kind = engine::BackendKind::kReference;
  auto ref = engine::make_backend(ro);
  ASSERT_TRUE(ref.is_ok());
  std::vector<float> want(T * H, 0.0f);
  ASSERT_TRUE((*ref)->execute([&] {
    std::vector<float> g(I), u(I), h(I), y(H);
    for (std::size_t t = 0; t < T; ++t) {
      for (std::size_t k = 0; k < K; ++k) {
        const engine::SwiGluMatrices& m = w.experts[std::size_t(chosen[t * K + k])];
        (*ref)->linear(x.data() + t * H, 1, m.gate, nullptr, g.data());
        (*ref)->linear(x.data() + t * H, 1, m.up, nullptr, u.data());
        for (std::size_t i = 0; i < I; ++i) h[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
        (*ref)->linear(h.data(), 1, m.down, nullptr, y.data());
        for (std::size_t d = 0; d < H; ++d) want[t * H + d] += weights[t * K + k] * y[d];
      }
    }
  }));

  engine::CpuExperts cpu(3);
  std::vector<float> batch(T * H), alone(H);
  cpu.run(w, x.data(), T, K, chosen.data(), weights.data(), batch.data());
  // Two int8-plane products in a row (x into gate/up, h into down; ~3e-5 each, h's larger after the
  // GLU): 1.6e-4 on AVX2 here. A wrong expert or row would be ~1.
  EXPECT_LT(rel_l2(batch.data(), want.data(), batch.size()), 5e-4);
  for (std::size_t t = 0; t < T; ++t) {
    cpu.run(w, x.data() + t * H, 1, K, chosen.data() + t * K, weights.data() + t * K, alone.data());
    EXPECT_EQ(0, std::memcmp(alone.data(), batch.data() + t * H, H * sizeof(float))) << "token " << t;
  }
}

}  // namespace
}  // namespace ft::test
