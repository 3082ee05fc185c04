// Model::forward_batch: several sequences in one pass give each of them exactly what a pass of its
// own gives (rows never mix), for every family; and a bad slice fails before any state moves.
#include <gtest/gtest.h>

#include "ft/engine/model.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

using engine::BatchSlice;
using engine::LogitsMode;
using engine::Model;
using engine::ModelFamily;
using engine::SequenceState;

struct Case {
  ModelFamily family;
  engine::BackendKind backend;
};

// Bit for bit on the CPU; on the GPU a GEMM's summation order may depend on its row count.
double tolerance(engine::BackendKind b) { return b == engine::BackendKind::kCuda ? 1e-3 : 1e-6; }

std::unique_ptr<Model> tiny(const Case& c, const TempDir& dir) {
  EXPECT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(c.family, false)).is_ok());
  engine::LoadOptions o;
  o.backend = c.backend;
  o.deterministic = true;  // batched == alone bit for bit on every CPU (AMX included)
  auto m = engine::load_model(dir.path(), o);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

class BatchedForward : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { FT_SKIP_UNLESS_FAMILY_RUNS(GetParam().backend, GetParam().family); }
  double tol() const { return tolerance(GetParam().backend); }
};

TEST_P(BatchedForward, EachSliceGetsTheLogitsOfItsOwnPass) {
  TempDir dir;
  auto m = tiny(GetParam(), dir);
  ASSERT_TRUE(m);
  const std::size_t V = std::size_t(m->vocab_size());
  const auto history = test_tokens(40, m->vocab_size(), 5);
  const auto fresh = test_tokens(30, m->vocab_size(), 6);
  const auto more = test_tokens(7, m->vocab_size(), 7);

  // Three sequences at different points: one decoding (20 tokens in), one starting a prefill,
  // one mid-prefill (10 tokens in, a 7-token chunk, all logits wanted).
  auto prepare = [&](SequenceState& decoding, SequenceState& midway) {
    ASSERT_TRUE(m->forward(decoding, std::span(history).first(20), nullptr, LogitsMode::kNone).is_ok());
    ASSERT_TRUE(m->forward(midway, std::span(history).first(10), nullptr, LogitsMode::kNone).is_ok());
  };
  SequenceState a = m->new_state(), b = m->new_state(), c = m->new_state();
  prepare(a, c);
  std::vector<float> la(V), lb(V), lc(more.size() * V);
  const BatchSlice batch[] = {{&a, std::span(history).subspan(20, 1), la.data(), LogitsMode::kLast},
                              {&b, fresh, lb.data(), LogitsMode::kLast},
                              {&c, more, lc.data(), LogitsMode::kAll}};
  ASSERT_TRUE(m->forward_batch(batch).is_ok());
  EXPECT_EQ(a.position(), 21);
  EXPECT_EQ(b.position(), 30);
  EXPECT_EQ(c.position(), 17);

  SequenceState a1 = m->new_state(), b1 = m->new_state(), c1 = m->new_state();
  prepare(a1, c1);
  std::vector<float> ea(V), eb(V), ec(more.size() * V);
  ASSERT_TRUE(m->forward(a1, std::span(history).subspan(20, 1), ea.data(), LogitsMode::kLast).is_ok());
  ASSERT_TRUE(m->forward(b1, fresh, eb.data(), LogitsMode::kLast).is_ok());
  ASSERT_TRUE(m->forward(c1, more, ec.data(), LogitsMode::kAll).is_ok());
  EXPECT_LT(rel_l2(la.data(), ea.data(), V), tol());
  EXPECT_LT(rel_l2(lb.data(), eb.data(), V), tol());
  EXPECT_LT(rel_l2(lc.data(), ec.data(), lc.size()), tol());

  // And the states carry on identically.
  std::vector<float> next_batched(V), next_alone(V);
  const int32_t t[1] = {3};
  ASSERT_TRUE(m->forward(c, t, next_batched.data(), LogitsMode::kLast).is_ok());
  ASSERT_TRUE(m->forward(c1, t, next_alone.data(), LogitsMode::kLast).is_ok());
  EXPECT_LT(rel_l2(next_batched.data(), next_alone.data(), V), tol());
}

TEST_P(BatchedForward, ABadSliceFailsTheBatchBeforeAnyStateMoves) {
  TempDir dir;
  auto m = tiny(GetParam(), dir);
  ASSERT_TRUE(m);
  SequenceState a = m->new_state(), b = m->new_state();
  const std::vector<int32_t> good = {1, 2, 3}, bad = {4, int32_t(m->vocab_size())};
  std::vector<float> la(std::size_t(m->vocab_size())), lb(la.size());
  const BatchSlice batch[] = {{&a, good, la.data(), LogitsMode::kLast}, {&b, bad, lb.data(), LogitsMode::kLast}};
  EXPECT_EQ(m->forward_batch(batch).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(a.position(), 0);
  EXPECT_EQ(b.position(), 0);
  const BatchSlice twice[] = {{&a, good, la.data(), LogitsMode::kLast}, {&a, good, lb.data(), LogitsMode::kLast}};
  EXPECT_EQ(m->forward_batch(twice).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(a.position(), 0);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (engine::BackendKind b : {engine::BackendKind::kCpu, engine::BackendKind::kCuda})  // kCuda: skipped without a GPU
    for (ModelFamily f : engine::model_families()) out.push_back({f, b});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Families, BatchedForward, ::testing::ValuesIn(cases()), [](const auto& info) {
  return std::string(engine::backend_name(info.param.backend)) + "_" + engine::model_family_name(info.param.family);
});

}  // namespace
}  // namespace ft::test
