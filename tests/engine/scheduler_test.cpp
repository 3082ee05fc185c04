// The engine's scheduler and its checkpoints: greedy output equals a plain forward/argmax loop;
// snapshots land exactly at the requested positions and restore + suffix reproduces the full
// run token for token; cancel, overload, context and restore-miss behave as the protocol says.
#include "ft/engine/scheduler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>

#include "ft/engine/model.h"
#include "ft/engine/sampling.h"
#include "ft/engine/state_checkpoint.h"
#include "ft/store/host_ram_tier.h"
#include "test_support.h"
#include "tiny_models.h"

namespace ft::test {
namespace {

using engine::LogitsMode;
using engine::Model;
using engine::ModelFamily;
using engine::Scheduler;
using engine::SequenceState;
namespace wire = protocol::engine;

std::unique_ptr<Model> tiny(ModelFamily family, const TempDir& dir) {
  EXPECT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(family, false)).is_ok());
  auto m = engine::load_model(dir.path());
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

PrefixKey key(uint64_t n) { return {0x1234, n}; }

// Greedy continuation by hand: the reference the scheduler must match.
std::vector<int32_t> greedy_by_hand(const Model& m, const std::vector<int32_t>& prompt, int n) {
  SequenceState s = m.new_state();
  std::vector<float> logits(std::size_t(m.vocab_size()));
  EXPECT_TRUE(m.forward(s, prompt, logits.data(), LogitsMode::kLast).is_ok());
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(engine::argmax(logits));
    const int32_t t[1] = {out.back()};
    EXPECT_TRUE(m.forward(s, t, logits.data(), LogitsMode::kLast).is_ok());
  }
  return out;
}

struct Outcome {
  int64_t restored = -1;
  std::vector<int32_t> tokens;
  std::vector<int64_t> checkpoints;
  std::optional<wire::Event> last;
};

Outcome drain(engine::RequestHandle& h) {
  Outcome o;
  while (auto e = h.next()) {
    if (e->type == wire::Event::Type::kStarted) o.restored = e->restored;
    if (e->type == wire::Event::Type::kTokens) o.tokens.insert(o.tokens.end(), e->tokens.begin(), e->tokens.end());
    if (e->type == wire::Event::Type::kCheckpoint) o.checkpoints.push_back(e->checkpoint.position);
    o.last = e;
  }
  return o;
}

wire::GenerateRequest greedy(const std::string& id, std::vector<int32_t> tokens, int max_new) {
  wire::GenerateRequest g;
  g.id = id;
  g.tenant = "t";
  g.tokens = std::move(tokens);
  g.sampling.temperature = 0;
  g.max_new_tokens = max_new;
  return g;
}

class SchedulerTest : public ::testing::TestWithParam<ModelFamily> {
 protected:
  void SetUp() override {
    model_ = tiny(GetParam(), dir_);
    ASSERT_TRUE(model_);
  }
  std::shared_ptr<engine::RequestHandle> submit(Scheduler& s, wire::GenerateRequest g) {
    wire::ErrorReply refused;
    auto h = s.submit(std::move(g), refused);
    EXPECT_TRUE(h.is_ok()) << refused.message;
    return h.is_ok() ? std::move(h).value() : nullptr;
  }
  TempDir dir_;
  std::unique_ptr<Model> model_;
  store::HostRamTier ram_{256u << 20};
};

TEST_P(SchedulerTest, GreedyMatchesAPlainLoopEvenWhenBatched) {
  engine::SchedulerOptions opts;
  opts.step_tokens = 16;  // several prefill chunks per prompt
  Scheduler sched(*model_, &ram_, opts);
  std::vector<std::shared_ptr<engine::RequestHandle>> handles;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back(test_tokens(20 + 9 * std::size_t(i), model_->vocab_size(), 11 + uint64_t(i)));
    handles.push_back(submit(sched, greedy("r" + std::to_string(i), prompts.back(), 12)));
  }
  for (int i = 0; i < 4; ++i) {
    Outcome o = drain(*handles[std::size_t(i)]);
    ASSERT_TRUE(o.last && o.last->type == wire::Event::Type::kDone);
    EXPECT_EQ(o.tokens, greedy_by_hand(*model_, prompts[std::size_t(i)], 12)) << "request " << i;
    EXPECT_EQ(o.last->usage.new_tokens, 12);
    EXPECT_EQ(o.last->finish, wire::Finish::kLength);
  }
  EXPECT_GT(sched.stats().batched_steps, 0u);
}

// A prompt longer than a pass goes in equal passes (14, 13, 13 of 40 at 16 a pass), not full ones
// and a short tail: each pass reads the weights (offloaded: streams the experts) once.
TEST_P(SchedulerTest, ALongPromptGoesInEqualPasses) {
  engine::SchedulerOptions opts;
  opts.step_tokens = 16;
  Scheduler sched(*model_, &ram_, opts);
  engine::RoutingTrace trace;
  model_->set_routing_trace(&trace);
  const auto prompt = test_tokens(40, model_->vocab_size(), 3);
  Outcome o = drain(*submit(sched, greedy("p", prompt, 1)));
  model_->set_routing_trace(nullptr);
  ASSERT_TRUE(o.last && o.last->type == wire::Event::Type::kDone);
  EXPECT_EQ(o.tokens, greedy_by_hand(*model_, prompt, 1));
  EXPECT_EQ(sched.stats().steps, 3u);
  ASSERT_GT(trace.top_k, 0u);
  std::map<std::size_t, int> rows;  // rows of a MoE call -> calls
  for (const auto& call : trace.calls) ++rows[call.size() / trace.top_k];
  EXPECT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[13], 2 * rows[14]);
}

TEST_P(SchedulerTest, SnapshotsAtBoundariesRestoreToTheSameOutput) {
  Scheduler sched(*model_, &ram_, {});
  const auto prompt = test_tokens(90, model_->vocab_size(), 21);
  auto first = greedy("a", prompt, 10);
  first.snapshots = {{17, key(17), false}, {64, key(64), false}, {89, key(89), true}};
  Outcome full = drain(*submit(sched, first));
  EXPECT_EQ(full.checkpoints, (std::vector<int64_t>{17, 64, 89}));
  EXPECT_EQ(full.restored, 0);
  // Attention KV alone: the prompt is one pass, the checkpoints taken after it; a linear-attention
  // state ends a chunk at each (17, 47, 25, 1). Then nine decode steps.
  EXPECT_EQ(sched.stats().steps, model_->new_state().holds_earlier_positions() ? 10u : 13u);

  // The deepest held of some keys (shallow to deep; an unknown one in the middle and at the end).
  const wire::LookupReply hit = sched.lookup({"t", {key(17), key(5), key(64), key(89), key(200)}});
  ASSERT_TRUE(hit.index);
  EXPECT_EQ(*hit.index, 3u);
  EXPECT_EQ(hit.tokens, 89);
  EXPECT_FALSE(sched.lookup({"other-tenant", {key(89)}}).index);

  for (int64_t at : {17, 64, 89}) {
    auto again = greedy("b" + std::to_string(at), std::vector<int32_t>(prompt.begin() + at, prompt.end()), 10);
    again.restore = wire::RestorePoint{key(uint64_t(at)), at};
    Outcome o = drain(*submit(sched, again));
    ASSERT_TRUE(o.last && o.last->type == wire::Event::Type::kDone) << (o.last ? o.last->message : "");
    EXPECT_EQ(o.restored, at);
    EXPECT_EQ(o.last->usage.cached_tokens, at);
    EXPECT_EQ(o.last->usage.prompt_tokens, 90);
    EXPECT_EQ(o.tokens, full.tokens) << "restored at " << at;
  }
  EXPECT_EQ(sched.stats().restores, 3u);
}

TEST_P(SchedulerTest, RestoreMissIsTheFirstEvent) {
  Scheduler sched(*model_, &ram_, {});
  auto g = greedy("m", {1, 2, 3}, 4);
  g.restore = wire::RestorePoint{key(999), 40};
  Outcome o = drain(*submit(sched, g));
  ASSERT_TRUE(o.last);
  EXPECT_EQ(o.last->type, wire::Event::Type::kError);
  EXPECT_EQ(o.last->code, wire::ErrorCode::kRestoreMiss);
  EXPECT_TRUE(o.tokens.empty());
}

TEST_P(SchedulerTest, CancelStopsAndAdmissionRefusesWhatItCannotRun) {
  engine::SchedulerOptions opts;
  opts.max_running = 1;
  opts.max_waiting = 1;
  opts.context_length = 1 << 20;  // room for a generation that outlasts the checks below
  Scheduler sched(*model_, &ram_, opts);
  wire::ErrorReply refused;
  EXPECT_FALSE(sched.submit(greedy("long", std::vector<int32_t>(1 << 20, 1), 1), refused).is_ok());
  EXPECT_EQ(refused.code, wire::ErrorCode::kContextTooLong);
  EXPECT_FALSE(sched.submit(greedy("bad", {1, int32_t(model_->vocab_size())}, 1), refused).is_ok());
  EXPECT_EQ(refused.code, wire::ErrorCode::kInvalidRequest);

  auto running = submit(sched, greedy("run", {1, 2, 3}, 1 << 20));  // runs until cancelled
  ASSERT_TRUE(running->next());                                // started
  auto queued = submit(sched, greedy("queued", {4, 5}, 2));
  // Both slots taken (one running, one waiting): a third is refused as overloaded.
  refused = {};
  EXPECT_FALSE(sched.submit(greedy("third", {6}, 1), refused).is_ok());
  EXPECT_EQ(refused.code, wire::ErrorCode::kOverloaded) << refused.message;
  sched.cancel("run");
  Outcome o = drain(*running);
  ASSERT_TRUE(o.last);
  EXPECT_EQ(o.last->type, wire::Event::Type::kDone);
  EXPECT_EQ(o.last->finish, wire::Finish::kCancelled);
  Outcome q = drain(*queued);
  EXPECT_EQ(q.tokens.size(), 2u);
}

TEST_P(SchedulerTest, GenerationStopsAtTheContextLength) {
  engine::SchedulerOptions opts;
  opts.context_length = 24;
  Scheduler sched(*model_, &ram_, opts);
  Outcome o = drain(*submit(sched, greedy("ctx", test_tokens(20, model_->vocab_size()), 100)));
  ASSERT_TRUE(o.last && o.last->type == wire::Event::Type::kDone);
  EXPECT_EQ(o.last->finish, wire::Finish::kLength);
  EXPECT_EQ(o.tokens.size(), 5u);  // positions 20..23 fed, the 5th token is emitted but not fed
}

INSTANTIATE_TEST_SUITE_P(Families, SchedulerTest, ::testing::ValuesIn(engine::model_families()),
                         [](const auto& info) { return std::string(engine::model_family_name(info.param)); });

// A prompt the KV pool cannot hold is refused at once, naming the flag that makes room, instead of
// failing in the middle of its prefill ("KV budget exhausted"); one that fits runs.
TEST(SchedulerKvBudget, APromptLongerThanTheKvPoolIsRefusedUpFront) {
  TempDir dir;
  ASSERT_TRUE(engine::write_random_checkpoint(dir.path(), tiny_spec(ModelFamily::kQwen3Moe, false)).is_ok());
  auto probe = engine::load_model(dir.path());
  ASSERT_TRUE(probe.is_ok());
  const engine::KvLayout kv = *(*probe)->kv_layout();
  engine::LoadOptions o;
  o.kv_budget_bytes = 4 * kv.page_bytes();  // 4 pages
  auto m = engine::load_model(dir.path(), o);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  store::HostRamTier ram(1 << 20);
  Scheduler sched(**m, &ram, {});
  const int64_t holds = 4 * kv.page_tokens;
  wire::ErrorReply refused;
  EXPECT_FALSE(sched.submit(greedy("long", test_tokens(holds, (*m)->vocab_size()), 1), refused).is_ok());
  EXPECT_EQ(refused.code, wire::ErrorCode::kContextTooLong);
  EXPECT_NE(refused.message.find("--kv-budget"), std::string::npos) << refused.message;
  auto fits = sched.submit(greedy("fits", test_tokens(holds - 8, (*m)->vocab_size()), 4), refused);
  ASSERT_TRUE(fits.is_ok()) << refused.message;
  Outcome ok = drain(**fits);
  ASSERT_TRUE(ok.last && ok.last->type == wire::Event::Type::kDone) << (ok.last ? ok.last->message : "no event");
  EXPECT_EQ(ok.tokens.size(), 4u);
}

// The store form of a state: every layer round-trips exactly, another layout is a miss.
TEST(StateCheckpoint, RoundTripThroughATierIsExactAndLayoutIsChecked) {
  TempDir dir, other_dir;
  auto m = tiny(ModelFamily::kQwen3_5Moe, dir);
  auto other = tiny(ModelFamily::kQwen3Moe, other_dir);
  ASSERT_TRUE(m && other);
  const auto tokens = test_tokens(33, m->vocab_size(), 4);
  SequenceState s = m->new_state();
  ASSERT_TRUE(m->forward(s, tokens, nullptr, LogitsMode::kNone).is_ok());
  store::HostRamTier ram(64u << 20);
  const ModelFingerprint fp = engine::store_fingerprint(*m);
  EXPECT_NE(fp, engine::store_fingerprint(*other));
  const store::StoreKey k{"t", fp, key(1)};
  ASSERT_TRUE(ram.save(k, engine::to_model_state(s, fp)).is_ok());

  SequenceState back = m->new_state();
  ASSERT_TRUE(engine::restore_model_state(ram, k, back).is_ok());
  EXPECT_EQ(back.position(), 33);
  std::vector<float> a(std::size_t(m->vocab_size())), b(a.size());
  const int32_t next[1] = {9};
  ASSERT_TRUE(m->forward(s, next, a.data(), LogitsMode::kLast).is_ok());
  ASSERT_TRUE(m->forward(back, next, b.data(), LogitsMode::kLast).is_ok());
  EXPECT_EQ(a, b);  // bit for bit: the state is stored in the dtype it lives in

  // Another model's state under a key claimed for this one: refused, state left empty.
  SequenceState o = other->new_state();
  ASSERT_TRUE(other->forward(o, std::span(tokens).first(5), nullptr, LogitsMode::kNone).is_ok());
  const store::StoreKey wrong{"t", fp, key(2)};
  ASSERT_TRUE(ram.save(wrong, engine::to_model_state(o, fp)).is_ok());
  SequenceState fresh = m->new_state();
  EXPECT_EQ(engine::restore_model_state(ram, wrong, fresh).code(), ErrorCode::kNotFound);
  EXPECT_EQ(fresh.position(), 0);
}

// A checkpoint of an earlier position: what a pass that ran past a snapshot saves. Restored and
// continued it gives the logits of the whole sequence; a linear-attention state refuses it.
TEST(StateCheckpoint, AnEarlierPositionOfAttentionKvRestoresToTheSameLogits) {
  TempDir dir, linear_dir;
  auto m = tiny(ModelFamily::kQwen3Moe, dir);
  auto linear = tiny(ModelFamily::kQwen3_5Moe, linear_dir);
  ASSERT_TRUE(m && linear);
  const auto tokens = test_tokens(70, m->vocab_size(), 5);
  const ModelFingerprint fp = engine::store_fingerprint(*m);
  SequenceState s = m->new_state();
  ASSERT_TRUE(s.holds_earlier_positions());
  std::vector<float> whole(std::size_t(m->vocab_size())), back(whole.size());
  ASSERT_TRUE(m->forward(s, tokens, whole.data(), LogitsMode::kLast).is_ok());
  for (int64_t at : {0, 17, 64, 69}) {  // page size 64: inside the first page, at its end, past it
    SCOPED_TRACE(at);
    auto cp = engine::to_model_state(s, fp, at);
    ASSERT_TRUE(cp.is_ok()) << cp.status().to_string();
    EXPECT_EQ(cp->tokens, uint64_t(at));
    SequenceState r = m->new_state();
    ASSERT_TRUE(engine::restore_from_model_state(*cp, r).is_ok());
    ASSERT_EQ(r.position(), at);
    ASSERT_TRUE(m->forward(r, std::span(tokens).subspan(std::size_t(at)), back.data(), LogitsMode::kLast).is_ok());
    EXPECT_LT(rel_l2(whole.data(), back.data(), whole.size()), 1e-5);
    EXPECT_EQ(engine::argmax(whole), engine::argmax(back));
  }
  EXPECT_EQ(engine::to_model_state(s, fp, 71).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(engine::to_model_state(s, fp, -1).status().code(), ErrorCode::kInvalidArgument);

  SequenceState l = linear->new_state();
  EXPECT_FALSE(l.holds_earlier_positions());
  ASSERT_TRUE(linear->forward(l, std::span(tokens).first(20), nullptr, LogitsMode::kNone).is_ok());
  const ModelFingerprint lfp = engine::store_fingerprint(*linear);
  EXPECT_EQ(engine::to_model_state(l, lfp, 10).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(engine::to_model_state(l, lfp, 20).is_ok());
}

}  // namespace
}  // namespace ft::test
