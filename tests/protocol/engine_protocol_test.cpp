// The proxy<->engine messages: every field survives JSON both ways, and malformed messages are
// refused with the field named rather than half-read.
#include <gtest/gtest.h>

#include "ft/protocol/engine_protocol.h"

namespace ft::protocol::engine {
namespace {

using nlohmann::json;

PrefixKey k(uint64_t lo) { return {0xabcdef, lo}; }

TEST(EngineProtocol, GenerateRequestRoundTrips) {
  GenerateRequest g;
  g.id = "r1";
  g.tenant = "key-00ff";
  g.restore = RestorePoint{k(1), 100};
  g.tokens = {5, 6, 7, 8};
  g.snapshots = {{102, k(2), false}, {104, k(3), true}};
  g.unpin = {k(9)};
  g.sampling = {0.5f, 0.9f, 40, 0.05f, 1234567890123ull};
  g.stop_ids = {151645};
  g.max_new_tokens = 77;
  auto back = generate_request_from_json(json::parse(to_json(g).dump()));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->id, "r1");
  EXPECT_EQ(back->tenant, "key-00ff");
  ASSERT_TRUE(back->restore);
  EXPECT_EQ(back->restore->key, k(1));
  EXPECT_EQ(back->restore->tokens, 100);
  EXPECT_EQ(back->tokens, g.tokens);
  ASSERT_EQ(back->snapshots.size(), 2u);
  EXPECT_EQ(back->snapshots[1].position, 104);
  EXPECT_EQ(back->snapshots[1].key, k(3));
  EXPECT_TRUE(back->snapshots[1].pin);
  EXPECT_FALSE(back->snapshots[0].pin);
  EXPECT_EQ(back->unpin, g.unpin);
  EXPECT_FLOAT_EQ(back->sampling.temperature, 0.5f);
  EXPECT_EQ(back->sampling.top_k, 40);
  EXPECT_EQ(back->sampling.seed, 1234567890123ull);
  EXPECT_EQ(back->stop_ids, g.stop_ids);
  EXPECT_EQ(back->max_new_tokens, 77);
  EXPECT_EQ(back->prompt_tokens(), 104);
}

TEST(EngineProtocol, MalformedGenerateRequestsNameTheProblem) {
  GenerateRequest g;
  g.id = "r";
  g.tenant = "t";
  g.tokens = {1, 2, 3};
  const json good = to_json(g);
  ASSERT_TRUE(generate_request_from_json(good).is_ok());
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* mentions;
  };
  const std::vector<Case> cases = {
      {"missing tokens", [](json& j) { j.erase("tokens"); }, "tokens"},
      {"tokens not ints", [](json& j) { j["tokens"] = "1,2"; }, "tokens"},
      {"empty suffix", [](json& j) { j["tokens"] = json::array(); }, "suffix"},
      {"bad key",
       [](json& j) {
         j["restore"] = {{"key", "xyz"}, {"tokens", 3}};
       },
       "hex"},
      {"snapshot before restore",
       [](json& j) {
         j["restore"] = {{"key", k(1).to_hex()}, {"tokens", 10}};
         j["snapshots"] = {{{"position", 5}, {"key", k(2).to_hex()}}};
       },
       "snapshot"},
      {"snapshot past the end",
       [](json& j) {
         j["snapshots"] = {{{"position", 4}, {"key", k(2).to_hex()}}};
       },
       "snapshot"},
      {"not an object", [](json& j) { j = json::array(); }, "object"},
      // Numbers a field's type cannot hold are refused, not converted (a float past an int's range
      // was undefined behaviour; 4294967297 wrapped to 1; found by fuzzing).
      {"token past int range as a float",
       [](json& j) {
         j["tokens"] = {1, 2.6e61, 3};
       },
       "tokens"},
      {"token as a fraction",
       [](json& j) {
         j["tokens"] = {1, 2.5};
       },
       "tokens"},
      {"token past int32",
       [](json& j) {
         j["tokens"] = {1, 4294967297ll};
       },
       "tokens"},
      {"negative into unsigned", [](json& j) { j["sampling"]["seed"] = -1; }, "seed"},
      {"temperature past a float", [](json& j) { j["sampling"]["temperature"] = 1e300; }, "temperature"},
  };
  for (const Case& c : cases) {
    json j = good;
    c.edit(j);
    auto r = generate_request_from_json(j);
    ASSERT_FALSE(r.is_ok()) << c.what;
    EXPECT_EQ(r.status().code(), ft::ErrorCode::kInvalidArgument) << c.what;
    EXPECT_NE(r.status().message().find(c.mentions), std::string::npos) << c.what << ": " << r.status().message();
  }
}

TEST(EngineProtocol, EventsAndRepliesRoundTrip) {
  Event started;
  started.type = Event::Type::kStarted;
  started.restored = 42;
  Event tokens;
  tokens.type = Event::Type::kTokens;
  tokens.tokens = {1, 2};
  Event ckpt;
  ckpt.type = Event::Type::kCheckpoint;
  ckpt.checkpoint = {64, k(5), true};
  Event done;
  done.type = Event::Type::kDone;
  done.finish = Finish::kLength;
  done.usage = {100, 42, 7, 1.5, 2.5};
  Event error;
  error.type = Event::Type::kError;
  error.code = ErrorCode::kRestoreMiss;
  error.message = "gone";
  Event refused = error;
  refused.code = ErrorCode::kUnauthorized;
  for (const Event& e : {started, tokens, ckpt, done, error, refused}) {
    auto back = event_from_json(json::parse(to_json(e).dump()));
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_EQ(back->type, e.type);
    EXPECT_EQ(back->restored, e.restored);
    EXPECT_EQ(back->tokens, e.tokens);
    EXPECT_EQ(back->checkpoint.position, e.checkpoint.position);
    EXPECT_EQ(back->checkpoint.key, e.checkpoint.key);
    EXPECT_EQ(back->finish, e.finish);
    EXPECT_EQ(back->usage.cached_tokens, e.usage.cached_tokens);
    EXPECT_EQ(back->code, e.code);
    EXPECT_EQ(back->message, e.message);
  }
  EXPECT_FALSE(event_from_json(json{{"event", "telepathy"}}).is_ok());

  LookupRequest l{"t", {k(1), k(2)}};
  auto lb = lookup_request_from_json(json::parse(to_json(l).dump()));
  ASSERT_TRUE(lb.is_ok());
  EXPECT_EQ(lb->keys, l.keys);
  LookupReply hit{1, 64}, miss{};
  EXPECT_EQ(lookup_reply_from_json(to_json(hit))->index, std::optional<std::size_t>(1));
  EXPECT_FALSE(lookup_reply_from_json(to_json(miss))->index);
  // An error code from a newer engine still reads as an error.
  EXPECT_EQ(error_reply_from_json(json{{"code", "quantum"}, {"message", "m"}})->code, ErrorCode::kInternal);
}

}  // namespace
}  // namespace ft::protocol::engine
