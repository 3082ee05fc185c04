// Decode steps replayed from a recorded CUDA graph give exactly what the same steps give run op by
// op: two models from one checkpoint, one with graphs off (FT_CUDA_GRAPHS=0 at load), decode the
// same tokens for two sequences, across a context bucket (256 -> 512 tokens: a new recording).
// DeepSeek sparse attention's indexer makes its top-k on the host in the middle of every pass, so
// those families' steps are never recorded: with graphs on they run op by op and must give the same.
// Op times taken with GPU events leave the steps as they are. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ft/engine/model.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

using engine::BatchSlice;
using engine::LogitsMode;
using engine::ModelFamily;
using engine::SequenceState;

std::unique_ptr<engine::Model> load_cuda(const TempDir& dir, bool graphs) {
  const ScopedEnv no_graphs("FT_CUDA_GRAPHS", graphs ? nullptr : "0");  // read at load
  engine::LoadOptions o;
  o.backend = engine::BackendKind::kCuda;
  o.kv_budget_bytes = 64ull << 20;
  auto m = engine::load_model(dir.path(), o);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

class DecodeGraphs : public ::testing::TestWithParam<ModelFamily> {
 protected:
  void SetUp() override { FT_SKIP_UNLESS_FAMILY_RUNS(engine::BackendKind::kCuda, GetParam()); }
};

TEST_P(DecodeGraphs, ReplayedStepsEqualStepsRunOpByOp) {
  const bool host_synced = decode_host_synced(GetParam());
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(GetParam(), false)).is_ok());
  auto plain = load_cuda(dir, false);
  auto graphed = load_cuda(dir, true);
  ASSERT_TRUE(plain && graphed);
  const std::size_t V = std::size_t(plain->vocab_size());
  const auto prompt = test_tokens(250, plain->vocab_size(), 3);
  const auto steps = test_tokens(12, plain->vocab_size(), 4);

  engine::OpProfile profile;
  profile.time_ops = false;
  graphed->set_profile(&profile);
  engine::RoutingTrace plain_routes, graphed_routes;  // copied out by the graphs too
  plain->set_routing_trace(&plain_routes);
  graphed->set_routing_trace(&graphed_routes);
  std::vector<SequenceState> states;
  for (auto* m : {plain.get(), graphed.get()}) {
    states.push_back(m->new_state());
    states.push_back(m->new_state());
    ASSERT_TRUE(m->forward(states[states.size() - 2], prompt, nullptr, LogitsMode::kNone).is_ok());
    ASSERT_TRUE(m->forward(states.back(), std::span(prompt).first(40), nullptr, LogitsMode::kNone).is_ok());
  }
  // The second sequence also draws its next token on the GPU (the draw's u changes every step).
  engine::SampleRequest draw{{.temperature = 0.9f, .top_k = 50, .top_p = 0.95f}, 0.0};
  for (std::size_t step = 0; step < steps.size(); ++step) {
    std::vector<float> want(2 * V), got(2 * V);
    int32_t want_token = -1, got_token = -1;
    draw.u = double(step) / double(steps.size());
    const int32_t a[1] = {steps[step]}, b[1] = {steps[(step + 5) % steps.size()]};
    const BatchSlice p[] = {{&states[0], a, want.data(), LogitsMode::kLast},
                            {&states[1], b, want.data() + V, LogitsMode::kLast, &draw, &want_token}};
    const BatchSlice g[] = {{&states[2], a, got.data(), LogitsMode::kLast},
                            {&states[3], b, got.data() + V, LogitsMode::kLast, &draw, &got_token}};
    ASSERT_TRUE(plain->forward_batch(p).is_ok());
    ASSERT_TRUE(graphed->forward_batch(g).is_ok());
    ASSERT_EQ(got, want) << "step " << step << " at " << states[2].position() << " tokens";
    ASSERT_GE(want_token, 0);
    ASSERT_EQ(got_token, want_token) << "step " << step;
  }
  graphed->set_profile(nullptr);
  plain->set_routing_trace(nullptr);
  graphed->set_routing_trace(nullptr);
  if (host_synced) {
    EXPECT_EQ(profile.replayed_passes, 0u);  // asked for graphs, ran every step as it is
    EXPECT_GE(profile.passes, steps.size());
    EXPECT_FALSE(plain_routes.selections.empty());
  } else {
    // 12 steps over two context buckets: each shape runs once, is recorded, then replayed.
    EXPECT_GE(profile.replayed_passes, 6u);
  }
  EXPECT_EQ(graphed_routes.calls, plain_routes.calls);
  EXPECT_EQ(graphed_routes.selections, plain_routes.selections);
  EXPECT_FALSE(plain_routes.calls.empty());
}

// Op times from GPU events (OpProfile::gpu_events): the steps run op by op, never replayed, and
// give what the same steps give unprofiled; every op kind the model runs has time, and the ops'
// times add up to no more than the passes took.
TEST(DecodeGraphsProfile, GpuEventOpTimesLeaveTheStepsAlone) {
  FT_SKIP_UNLESS_FAMILY_RUNS(engine::BackendKind::kCuda, ModelFamily::kQwen3Moe);
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(ModelFamily::kQwen3Moe, false)).is_ok());
  auto plain = load_cuda(dir, false);
  auto timed = load_cuda(dir, true);
  ASSERT_TRUE(plain && timed);
  const std::size_t V = std::size_t(plain->vocab_size());
  const auto prompt = test_tokens(100, plain->vocab_size(), 5);
  engine::OpProfile profile;
  profile.gpu_events = true;
  timed->set_profile(&profile);
  SequenceState a = plain->new_state(), b = timed->new_state();
  std::vector<float> want(V), got(V);
  ASSERT_TRUE(plain->forward(a, prompt, want.data(), LogitsMode::kLast).is_ok());
  ASSERT_TRUE(timed->forward(b, prompt, got.data(), LogitsMode::kLast).is_ok());
  EXPECT_EQ(got, want);
  for (int step = 0; step < 6; ++step) {
    const int32_t t[1] = {prompt[std::size_t(step)]};
    ASSERT_TRUE(plain->forward(a, t, want.data(), LogitsMode::kLast).is_ok());
    ASSERT_TRUE(timed->forward(b, t, got.data(), LogitsMode::kLast).is_ok());
    ASSERT_EQ(got, want) << "step " << step;
  }
  timed->set_profile(nullptr);
  EXPECT_EQ(profile.replayed_passes, 0u);
  EXPECT_GE(profile.passes, 7u);
  double ops = 0;
  for (const auto k :
       {engine::OpProfile::kLinear, engine::OpProfile::kMoe, engine::OpProfile::kAttention, engine::OpProfile::kNorm}) {
    EXPECT_GT(profile.calls[k], 0u) << engine::OpProfile::name(k);
    EXPECT_GT(profile.seconds[k], 0.0) << engine::OpProfile::name(k);
  }
  for (int k = 0; k < engine::OpProfile::kMoeRoute; ++k) ops += profile.seconds[k];
  EXPECT_LE(ops, profile.pass_seconds);
}

INSTANTIATE_TEST_SUITE_P(Families, DecodeGraphs, ::testing::ValuesIn(engine::model_families()),
                         [](const auto& info) { return std::string(engine::model_family_name(info.param)); });

}  // namespace
}  // namespace ft::test
