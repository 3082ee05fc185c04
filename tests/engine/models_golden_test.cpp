// Golden tests against HF transformers 5.x. For each family the lead generates, on a machine with
// torch, tests/fixtures/models/<name>/:
//   checkpoint/         config.json, generation_config.json, and the bf16 random weights as
//                       model.safetensors or as their recipe (weights.json: golden_weights.h
//                       rebuilds the same bytes)
//   golden.safetensors  input_ids I64 [T], logits F32 [T, vocab] (HF on the CPU in float32 from the
//                       bf16 weights), greedy_ids I64 [G] (HF greedy generate after input_ids)
// The fp32 reference backend must be within 1e-3 relative L2 of HF's logits at every position and
// give HF's greedy continuation. The CPU and CUDA runtime backends (bf16 activations in their
// products, bf16 KV) must be within 1e-2: of HF's logits up to the first position where rounding
// flipped a router's near-tie (a discontinuity every later position sees through attention), and
// of the reference's routed as the runtime was (Model::set_forced_routing: the experts, and the
// key positions DeepSeek sparse attention's indexer chose) at every position; the
// flips are counted and bounded (at most 5% of positions). Their greedy continuation equals HF's
// up to the first step routed differently and the reference's, routed alike and fed the same
// tokens, at every step. Every supported family has a fixture (tiny_models.h: fixture_names); a
// missing one fails its tests, saying how to make it.
#include <gtest/gtest.h>

#include <algorithm>

#include "ft/engine/model.h"
#include "ft/engine/sampling.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

struct Case {
  std::string fixture;
  engine::BackendKind backend;
  double tolerance;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.fixture << " on " << engine::backend_name(c.backend); }

class Golden : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    FT_SKIP_UNLESS_FAMILY_RUNS(GetParam().backend, fixture_family(GetParam().fixture));
    if (!fixture_present(GetParam().fixture)) {
      FAIL() << "fixture " << fixture_dir(GetParam().fixture).string()
             << " missing (needs checkpoint/config.json and golden.safetensors); make it on a machine with torch "
                "and transformers 5.x: python3 scripts/goldens/make_model_goldens.py --out tests/fixtures/models "
                "--only "
             << GetParam().fixture;
    }
    engine::LoadOptions options;
    options.backend = GetParam().backend;
    auto m = engine::load_model(fixture_checkpoint(GetParam().fixture), options);
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    model_ = std::move(m).value();
    golden_ = SafetensorsFile::read(fixture_dir(GetParam().fixture) / "golden.safetensors");
    ASSERT_TRUE(golden_.has("input_ids") && golden_.has("logits") && golden_.has("greedy_ids"));
  }
  // The fp32 reference backend's logits [T, vocab] and routing on `ids`; with `forced`, routed as
  // that trace records (Model::set_forced_routing).
  struct Run {
    std::vector<float> logits;
    engine::RoutingTrace routing;
  };
  std::unique_ptr<engine::Model> load_reference() {
    engine::LoadOptions reference;
    reference.backend = engine::BackendKind::kReference;
    auto ref = engine::load_model(fixture_checkpoint(GetParam().fixture), reference);
    EXPECT_TRUE(ref.is_ok()) << ref.status().to_string();
    return ref.is_ok() ? std::move(ref).value() : nullptr;
  }
  Run reference_run(const std::vector<int32_t>& ids, const engine::RoutingTrace* forced) {
    Run out;
    auto ref = load_reference();
    if (!ref) return out;
    out.logits.resize(ids.size() * std::size_t(ref->vocab_size()));
    EXPECT_TRUE(ref->set_forced_routing(forced));
    ref->set_routing_trace(&out.routing);
    engine::SequenceState s = ref->new_state();
    EXPECT_TRUE(ref->forward(s, ids, out.logits.data(), engine::LogitsMode::kAll).is_ok());
    return out;
  }
  static void or_into(std::vector<bool>& a, const std::vector<bool>& b) {
    for (std::size_t t = 0; t < a.size() && t < b.size(); ++t) a[t] = a[t] || b[t];
  }

  std::unique_ptr<engine::Model> model_;
  SafetensorsFile golden_;
};

// The reference backend against HF at every position. A runtime backend (bf16 products and KV)
// against HF up to the first position where rounding flipped a router's near-tie (a jump, and one
// every later position sees through attention), and at every position against the reference
// routed as it was: the same function, the same discrete choices. The flipped positions are
// counted and bounded.
TEST_P(Golden, LogitsMatchHfAtEveryPosition) {
  const auto ids = golden_.ids("input_ids");
  const auto want = golden_.f32("logits");
  const std::size_t V = std::size_t(model_->vocab_size()), T = ids.size();
  ASSERT_EQ(want.size(), T * V) << "golden logits shape does not match [T, vocab]";
  std::vector<float> got(T * V);
  engine::RoutingTrace trace;
  model_->set_routing_trace(&trace);
  engine::SequenceState state = model_->new_state();
  ASSERT_TRUE(model_->forward(state, ids, got.data(), engine::LogitsMode::kAll).is_ok());
  model_->set_routing_trace(nullptr);
  const double tol = GetParam().tolerance;
  if (GetParam().backend == engine::BackendKind::kReference) {
    double worst = 0;
    for (std::size_t t = 0; t < T; ++t) {
      const double err = rel_l2(&got[t * V], &want[t * V], V);
      EXPECT_LT(err, tol) << "position " << t;
      worst = std::max(worst, err);
    }
    std::printf("[ %s on reference ] worst logits rel L2 %.3g of %zu positions\n", GetParam().fixture.c_str(), worst,
                T);
    return;
  }
  const std::size_t K = trace.top_k;
  const Run free = reference_run(ids, nullptr);
  std::vector<bool> diverged = routing_flips(T, free.routing.calls, trace.calls, K);
  // DeepSeek sparse attention's key choices are discrete too: a flipped one counts as a flip.
  const std::size_t S = trace.selection_k;
  or_into(diverged, routing_flips(T, free.routing.selections, trace.selections, S));
  const std::size_t first_flip = std::size_t(std::find(diverged.begin(), diverged.end(), true) - diverged.begin());
  const Run along = reference_run(ids, &trace);
  ASSERT_EQ(along.logits.size(), T * V);
  EXPECT_TRUE(routing_flips(T, along.routing.calls, trace.calls, K) == std::vector<bool>(T, false))
      << "forced routing not followed";
  // Where the reference itself would have chosen otherwise on the same input: a root flip (those
  // that only follow from an earlier one are not counted again).
  EXPECT_TRUE(routing_flips(T, along.routing.selections, trace.selections, S) == std::vector<bool>(T, false))
      << "forced key selection not followed";
  const std::vector<bool> flipped = routing_flips(T, along.routing.unforced, trace.calls, K);
  const std::size_t flips = std::size_t(std::count(flipped.begin(), flipped.end(), true));
  // The indexer's choices flip far more often than a router's (each query keeps 16 of up to 100
  // positions whose scores crowd near zero under the ReLU): counted on their own.
  const std::vector<bool> reselected = routing_flips(T, along.routing.unforced_selections, trace.selections, S);
  const std::size_t reselections = std::size_t(std::count(reselected.begin(), reselected.end(), true));
  double worst_hf = 0, worst_along = 0;
  for (std::size_t t = 0; t < T; ++t) {
    if (t < first_flip) {
      const double err = rel_l2(&got[t * V], &want[t * V], V);
      EXPECT_LT(err, tol) << "position " << t << " against HF";
      worst_hf = std::max(worst_hf, err);
    }
    const double err = rel_l2(&got[t * V], &along.logits[t * V], V);
    EXPECT_LT(err, tol) << "position " << t << " against the reference routed alike";
    worst_along = std::max(worst_along, err);
  }
  EXPECT_LE(flips * 20, T) << flips << " of " << T << " positions routed differently from the reference";
  // An indexer picks 16 of up to 100 keys by scores that round alike: more near-ties than a router's
  // top-k (6 of 100 positions on the DSA goldens' 16-head indexers), bounded at 10%.
  EXPECT_LE(reselections * 10, T) << reselections << " of " << T << " positions chose other keys than the reference";
  std::printf(
      "[ %s on %s ] worst logits rel L2 %.3g against HF (positions before the first flip, %zu), %.3g against "
      "the reference routed alike; %zu of %zu positions routed differently, %zu with other key positions chosen\n",
      GetParam().fixture.c_str(), engine::backend_name(GetParam().backend), worst_hf, std::min(first_flip, T),
      worst_along, flips, T, reselections);
}

// Exactly as many tokens as HF produced, without stopping at eos (if HF stopped at an eos, ours
// must too). The reference: identical to HF. A runtime backend: identical to HF up to the step
// where rounding first flipped a router's choice (as in the logits test), and at every step
// identical to the reference routed as it was, fed the same tokens.
TEST_P(Golden, GreedyContinuationMatchesHf) {
  const auto ids = golden_.ids("input_ids");
  const auto want = golden_.ids("greedy_ids");
  engine::RoutingTrace trace;
  model_->set_routing_trace(&trace);
  const std::vector<int32_t> got = greedy_steps(*model_, ids, want.size(), nullptr);
  model_->set_routing_trace(nullptr);
  if (GetParam().backend == engine::BackendKind::kReference) {
    EXPECT_EQ(got, want);
    return;
  }

  auto ref = load_reference();
  ASSERT_TRUE(ref);
  engine::RoutingTrace free;
  ref->set_routing_trace(&free);
  greedy_steps(*ref, ids, want.size(), &got);  // the reference's own choices on the same tokens
  ASSERT_EQ(free.calls.size(), trace.calls.size());
  // The MoE calls (and indexer calls) of step i: each pass makes the same number of calls.
  const auto first_divergence = [&](const std::vector<std::vector<int32_t>>& mine,
                                    const std::vector<std::vector<int32_t>>& theirs, std::size_t k) {
    const std::size_t per_step = theirs.size() / want.size();
    for (std::size_t c = 0; c < theirs.size() && c < mine.size(); ++c) {
      std::vector<int32_t> a = mine[c], b = theirs[c];
      for (std::size_t r = 0; r * k < a.size(); ++r) {
        std::sort(a.begin() + std::ptrdiff_t(r * k), a.begin() + std::ptrdiff_t((r + 1) * k));
        std::sort(b.begin() + std::ptrdiff_t(r * k), b.begin() + std::ptrdiff_t((r + 1) * k));
      }
      if (a != b) return c / per_step;
    }
    return want.size();
  };
  const std::size_t agree = std::min(first_divergence(free.calls, trace.calls, trace.top_k),
                                     first_divergence(free.selections, trace.selections, trace.selection_k));
  EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + std::ptrdiff_t(agree)),
            std::vector<int32_t>(want.begin(), want.begin() + std::ptrdiff_t(agree)))
      << "against HF, before the first step routed differently (" << agree << ")";
  ASSERT_TRUE(ref->set_forced_routing(&trace));
  EXPECT_EQ(greedy_steps(*ref, ids, want.size(), &got), got) << "against the reference routed alike";
  std::printf("[ %s on %s ] greedy: %zu of %zu steps routed as the reference\n", GetParam().fixture.c_str(),
              engine::backend_name(GetParam().backend), agree, want.size());
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const std::string& f : fixture_names()) {
    out.push_back({f, engine::BackendKind::kReference, 1e-3});
    out.push_back({f, engine::BackendKind::kCpu, 1e-2});
    out.push_back({f, engine::BackendKind::kCuda, 1e-2});  // skipped without a GPU
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden, ::testing::ValuesIn(cases()), [](const auto& info) {
  return info.param.fixture + "_" + engine::backend_name(info.param.backend);
});

}  // namespace
}  // namespace ft::test
