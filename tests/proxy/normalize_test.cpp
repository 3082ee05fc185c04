// The normalisation rules on captured traffic (tests/fixtures/traffic): every Claude Code request
// loses its per-conversation billing header and nothing else, and two conversations that differ
// only by it then render to one shared prefix (system prompt + tools); other traffic is untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "../../proxy/src/normalize.h"
#include "ft/protocol/chat_render.h"
#include "ft/protocol/client_requests.h"
#include "ft/protocol/tokenizer.h"
#include "test_support.h"

namespace ft::proxy {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using protocol::Dialect;

const fs::path kTraffic = fs::path(FT_FIXTURES_DIR) / "traffic";

std::vector<ordered_json> captured(const std::string& session) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kTraffic / session)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<ordered_json> out;
  for (const auto& f : files) out.push_back(ordered_json::parse(std::ifstream(f)));
  return out;
}

bool has_billing_block(const ordered_json& body) {
  for (const auto& b : body["system"])
    if (b.value("text", "").rfind("x-anthropic-billing-header:", 0) == 0) return true;
  return false;
}

TEST(Normalize, ClaudeCodeBillingHeaderIsDroppedAndNothingElse) {
  int requests = 0;
  for (const char* session : {"claude-multiturn", "claude-two-sessions"}) {
    for (const ordered_json& capture : captured(session)) {
      ordered_json body = capture["request"];
      ASSERT_TRUE(has_billing_block(body)) << "captured with the attribution header on";
      const ordered_json before = body;
      EXPECT_EQ(normalize_request(Dialect::kAnthropic, body), std::vector<std::string>{"claude-code-billing-header"});
      EXPECT_FALSE(has_billing_block(body));
      ASSERT_EQ(body["system"].size() + 1, before["system"].size());
      for (std::size_t i = 0; i < body["system"].size(); ++i) EXPECT_EQ(body["system"][i], before["system"][i + 1]);
      ordered_json rest = body, rest_before = before;
      rest.erase("system");
      rest_before.erase("system");
      EXPECT_EQ(rest, rest_before);
      ++requests;
    }
  }
  EXPECT_GE(requests, 10);
}

TEST(Normalize, TwoClaudeCodeConversationsShareTheirPrefixOnlyAfterNormalising) {
  if (!test::have_qwen3_tokenizer()) GTEST_SKIP() << "Qwen3 tokenizer not installed";
  auto tok = protocol::Tokenizer::load(test::qwen3_tokenizer_dir());
  ASSERT_TRUE(tok.is_ok());
  auto tmpl = protocol::ChatTemplate::from_tokenizer(*tok);
  ASSERT_TRUE(tmpl.is_ok());
  const auto traffic = captured("claude-two-sessions");
  // The first request of each conversation (the one with two messages).
  std::vector<ordered_json> firsts;
  for (const auto& c : traffic)
    if (c["request"]["messages"].size() <= 2) firsts.push_back(c["request"]);
  ASSERT_EQ(firsts.size(), 2u);
  ASSERT_NE(firsts[0]["system"][0], firsts[1]["system"][0]) << "the billing headers differ per conversation";

  auto ids = [&](ordered_json body, bool normalise) {
    if (normalise) normalize_request(Dialect::kAnthropic, body);
    auto req = protocol::parse_anthropic_messages(body.dump());
    EXPECT_TRUE(req.is_ok());
    return tok->encode(*tmpl->render(protocol::to_template_json(*req)));
  };
  auto shared = [](const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    std::size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
  };
  const auto raw0 = ids(firsts[0], false), raw1 = ids(firsts[1], false);
  const auto norm0 = ids(firsts[0], true), norm1 = ids(firsts[1], true);
  EXPECT_LT(shared(raw0, raw1), 40u) << "raw: the nonce sits in the first bytes";
  EXPECT_GT(shared(norm0, norm1), 5000u) << "normalised: system prompt, tools and reminders are shared";
  // Precisely: with the user's own words made equal, the normalised prompts are identical and
  // the raw ones are not: the header was the only other difference.
  for (auto& body : firsts) body["messages"][0]["content"].back()["text"] = "the same question";
  EXPECT_EQ(ids(firsts[0], true), ids(firsts[1], true));
  EXPECT_NE(ids(firsts[0], false), ids(firsts[1], false));
}

TEST(Normalize, OtherTrafficIsUntouched) {
  for (const char* session : {"opencode-multiturn", "openclaw-session", "codex-multiturn"}) {
    for (const ordered_json& capture : captured(session)) {
      ordered_json body = capture["request"];
      const ordered_json before = body;
      const std::string path = capture["path"];
      const Dialect d = path.rfind("/v1/messages", 0) == 0    ? Dialect::kAnthropic
                        : path.rfind("/v1/responses", 0) == 0 ? Dialect::kOpenAIResponses
                                                              : Dialect::kOpenAIChat;
      EXPECT_TRUE(normalize_request(d, body).empty()) << session;
      EXPECT_EQ(body, before);
    }
  }
  // A string system prompt that starts with the header loses that line only.
  ordered_json s = {{"system", "x-anthropic-billing-header: cc_version=1.2.3.abc;\nYou are helpful."}};
  EXPECT_EQ(normalize_request(Dialect::kAnthropic, s).size(), 1u);
  EXPECT_EQ(s["system"], "You are helpful.");
}

// System blocks of any shape are left to the parser to refuse: a "type" or "text" that is not a
// string must not throw out of the normaliser (found by fuzzing: an uncaught type_error).
TEST(Normalize, MalformedSystemBlocksAreLeftAlone) {
  for (const char* text : {R"({"system": [{"type": ["text"], "text": "x-anthropic-billing-header: a"}]})",
                           R"({"system": [{"type": "text", "text": 7}, 3, null, {"type": {}}]})"}) {
    ordered_json body = ordered_json::parse(text);
    const ordered_json before = body;
    EXPECT_NO_THROW(EXPECT_TRUE(normalize_request(Dialect::kAnthropic, body).empty())) << text;
    EXPECT_EQ(body, before);
  }
}

}  // namespace
}  // namespace ft::proxy
