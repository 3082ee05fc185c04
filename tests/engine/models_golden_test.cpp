// Golden tests against HF transformers 5.x. For each family the lead generates, on a machine with
// torch, tests/fixtures/models/<name>/:
//   checkpoint/         config.json, generation_config.json, model.safetensors (bf16, random init)
//   golden.safetensors  input_ids I64 [T], logits F32 [T, vocab] (HF on the CPU in float32 from the
//                       bf16 weights), greedy_ids I64 [G] (HF greedy generate after input_ids)
// Every position's logits must be within 1e-3 relative L2 of HF's, and the greedy continuation
// identical. A missing fixture skips its test, naming the directory.
#include <gtest/gtest.h>

#include "ft/engine/model.h"
#include "ft/engine/sampling.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

class Golden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!fixture_present(GetParam())) {
      GTEST_SKIP() << "fixture " << fixture_dir(GetParam()).string()
                   << " missing (needs checkpoint/config.json and golden.safetensors)";
    }
    auto m = engine::load_model(fixture_dir(GetParam()) / "checkpoint");
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    model_ = std::move(m).value();
    golden_ = SafetensorsFile::read(fixture_dir(GetParam()) / "golden.safetensors");
    ASSERT_TRUE(golden_.has("input_ids") && golden_.has("logits") && golden_.has("greedy_ids"));
  }
  std::unique_ptr<engine::Model> model_;
  SafetensorsFile golden_;
};

TEST_P(Golden, LogitsMatchHfAtEveryPosition) {
  const auto ids = golden_.ids("input_ids");
  const auto want = golden_.f32("logits");
  const std::size_t V = std::size_t(model_->vocab_size()), T = ids.size();
  ASSERT_EQ(want.size(), T * V) << "golden logits shape does not match [T, vocab]";
  std::vector<float> got(T * V);
  engine::SequenceState state = model_->new_state();
  ASSERT_TRUE(model_->forward(state, ids, got.data(), engine::LogitsMode::kAll).is_ok());
  double worst = 0;
  std::size_t worst_at = 0;
  for (std::size_t t = 0; t < T; ++t) {
    const double err = rel_l2(&got[t * V], &want[t * V], V);
    EXPECT_LT(err, 1e-3) << "position " << t;
    if (err > worst) worst = err, worst_at = t;
  }
  std::printf("[ %s ] worst logits rel L2 %.3g at position %zu of %zu\n", GetParam().c_str(), worst, worst_at, T);
}

TEST_P(Golden, GreedyContinuationMatchesHf) {
  const auto ids = golden_.ids("input_ids");
  const auto want = golden_.ids("greedy_ids");
  // Exactly as many tokens as HF produced, without stopping at eos: if HF stopped at an eos, that
  // eos is its last token and ours must match it too.
  std::vector<float> logits(std::size_t(model_->vocab_size()));
  engine::SequenceState state = model_->new_state();
  std::vector<int32_t> got, input = ids;
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(model_->forward(state, input, logits.data(), engine::LogitsMode::kLast).is_ok());
    got.push_back(engine::argmax(logits));
    input = {got.back()};
  }
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden, ::testing::ValuesIn(fixture_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ft::test
