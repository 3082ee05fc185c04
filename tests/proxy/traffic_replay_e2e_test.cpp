// Replays the real agents' captured multi-turn traffic (tests/fixtures/traffic/<agent>-<scenario>,
// recorded by scripts/capture-traffic.sh) through the server twice: with prefix caching and with
// every prompt computed in full. For every request after the first, the tokens restored are at
// least 90% of the longest prefix it shares with any earlier request of the same agent
// configuration (system prompt + tools; at least 256 tokens shared), and greedy output is
// identical to the full computation.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../../proxy/src/normalize.h"
#include "ft/engine/random_checkpoint.h"
#include "ft/protocol/chat_render.h"
#include "ft/protocol/client_requests.h"
#include "ft/protocol/tokenizer.h"
#include "ft/proxy/server.h"
#include "test_support.h"

namespace ft::proxy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;
using protocol::Dialect;

const fs::path kTraffic = fs::path(FT_FIXTURES_DIR) / "traffic";
constexpr std::size_t kMinShared = 256;

std::optional<Dialect> dialect_of(const std::string& path) {
  const std::string p = path.substr(0, path.find('?'));
  if (p == "/v1/messages") return Dialect::kAnthropic;
  if (p == "/v1/chat/completions") return Dialect::kOpenAIChat;
  if (p == "/v1/responses") return Dialect::kOpenAIResponses;
  return std::nullopt;
}

// What the model said, without the ids the server mints per response.
std::string answer_of(Dialect d, const json& r) {
  std::string out;
  if (d == Dialect::kAnthropic) {
    for (const json& b : r["content"]) out += b.value("type", "") + ":" + b.value("text", "") + b.value("thinking", "") +
                                              b.value("name", "") + (b.contains("input") ? b["input"].dump() : "") + "|";
  } else if (d == Dialect::kOpenAIChat) {
    const json& m = r["choices"][0]["message"];
    out = m.value("content", json("")).is_string() ? m.value("content", "") : "";
    out += "|" + m.value("reasoning_content", "");
    if (m.contains("tool_calls"))
      for (const json& t : m["tool_calls"]) out += "|" + t["function"].dump();
  } else {
    for (const json& item : r["output"]) {
      json copy = item;
      copy.erase("id");
      copy.erase("call_id");
      out += copy.dump() + "|";
    }
  }
  return out;
}

int cached_of(Dialect d, const json& r) {
  const json& u = r["usage"];
  if (d == Dialect::kAnthropic) return u.value("cache_read_input_tokens", 0);
  if (d == Dialect::kOpenAIChat) return u["prompt_tokens_details"].value("cached_tokens", 0);
  return u["input_tokens_details"].value("cached_tokens", 0);
}

class TrafficReplay : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    if (!test::have_qwen3_tokenizer()) return;
    dir_ = std::make_unique<test::TempDir>();
    test::write_tiny_chat_model(dir_->path());
  }
  static void TearDownTestSuite() { dir_.reset(); }

  std::unique_ptr<Server> start(bool prefix_cache) {
    ServerOptions opts;
    opts.port = 0;
    opts.model_id = "freetoken-demo";
    opts.model_aliases = {"claude-opus-5-5", "dummy"};
    opts.prefix_cache = prefix_cache;
    opts.max_output_tokens = 8;
    LocalBackendOptions b;
    b.context_length = 65536;
    auto backend = make_local_backend(dir_->path(), b);
    EXPECT_TRUE(backend);
    auto tok = protocol::Tokenizer::load(dir_->path());
    auto tmpl = protocol::ChatTemplate::from_tokenizer(*tok);
    auto s = Server::create(opts, std::move(backend).value(), std::move(tok).value(), std::move(tmpl).value());
    EXPECT_TRUE(s && (*s)->start());
    return std::move(s).value();
  }

  struct Prompt {
    std::vector<int32_t> ids;  // what the server computes (normalisation rules included)
    std::size_t head = 0;      // tokens up to the first boundary: system prompt + tools
  };
  Prompt prompt_of(Dialect d, ordered_json body) {
    static const auto tok = protocol::Tokenizer::load(dir_->path()).value();
    static const auto tmpl = protocol::ChatTemplate::from_tokenizer(tok).value();
    normalize_request(d, body);
    auto req = d == Dialect::kAnthropic    ? protocol::parse_anthropic_messages(body.dump())
               : d == Dialect::kOpenAIChat ? protocol::parse_openai_chat(body.dump())
                                           : protocol::parse_openai_responses(body.dump());
    EXPECT_TRUE(req.is_ok()) << req.status().to_string();
    if (!req) return {};
    auto chat = tmpl.render_with_boundaries(protocol::to_template_json(*req));
    EXPECT_TRUE(chat.is_ok());
    if (!chat) return {};
    auto ids = protocol::tokenize_chat(*chat, tmpl, tok);
    EXPECT_TRUE(ids.is_ok());
    if (!ids) return {};
    Prompt p{std::move(ids).value(), 0};
    for (const auto& b : chat->boundaries)
      if (b.token_index && *b.token_index > 0) {
        p.head = *b.token_index;
        break;
      }
    return p;
  }

  static inline std::unique_ptr<test::TempDir> dir_;
};

TEST_P(TrafficReplay, LaterRequestsRestoreWhatTheyShareAndMatchNoCache) {
  if (!dir_) GTEST_SKIP() << "Qwen3 tokenizer not installed (run scripts/setup.sh)";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kTraffic / GetParam()))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());

  auto cached_server = start(true), plain_server = start(false);
  httplib::Client cached_client("127.0.0.1", cached_server->port()), plain_client("127.0.0.1", plain_server->port());
  cached_client.set_read_timeout(300, 0);
  plain_client.set_read_timeout(300, 0);

  std::vector<Prompt> earlier;
  std::size_t replayed = 0, restored_total = 0, shared_total = 0;
  for (const fs::path& f : files) {
    const ordered_json capture = ordered_json::parse(std::ifstream(f));
    const auto d = dialect_of(capture["path"].get<std::string>());
    if (!d || capture["status"] != 200 || !capture["request"].is_object()) continue;
    ordered_json body = capture["request"];
    body["stream"] = false;  // same prompt path; one body to compare
    body["temperature"] = 0;
    body.erase("top_p");
    body.erase("top_k");
    const Prompt prompt = prompt_of(*d, body);
    const auto& ids = prompt.ids;
    // Conversations of one agent configuration (same system prompt and tools) are what the cache
    // can share: a sub-agent with another tool list diverges inside the tools block, where no
    // special token offers a boundary.
    std::size_t shared = 0;
    for (const auto& e : earlier) {
      std::size_t n = 0;
      while (n < e.ids.size() && n < ids.size() && e.ids[n] == ids[n]) ++n;
      if (n >= prompt.head && e.head == prompt.head) shared = std::max(shared, n);
    }
    httplib::Headers headers = {{"x-api-key", "replay"}, {"Authorization", "Bearer replay"}};
    auto a = cached_client.Post(capture["path"].get<std::string>(), headers, body.dump(), "application/json");
    auto b = plain_client.Post(capture["path"].get<std::string>(), headers, body.dump(), "application/json");
    ASSERT_TRUE(a && b) << f;
    ASSERT_EQ(a->status, 200) << f << ": " << a->body.substr(0, 300);
    ASSERT_EQ(b->status, 200) << f << ": " << b->body.substr(0, 300);
    const json ja = json::parse(a->body), jb = json::parse(b->body);
    const int cached = cached_of(*d, ja);
    EXPECT_EQ(cached_of(*d, jb), 0);
    // A share under kMinShared tokens is a template header common to unrelated conversations (a
    // title request vs the main one): nothing a boundary could hold.
    if (!earlier.empty() && shared >= kMinShared) {
      EXPECT_GE(double(cached), 0.9 * double(shared))
          << f.filename() << ": restored " << cached << " of " << shared << " shared (prompt " << ids.size() << ")";
    }
    EXPECT_LE(std::size_t(cached), std::max(shared, std::size_t(0))) << f.filename();
    EXPECT_EQ(answer_of(*d, ja), answer_of(*d, jb)) << f.filename();
    restored_total += std::size_t(cached);
    shared_total += shared;
    earlier.push_back(prompt);
    ++replayed;
  }
  EXPECT_GE(replayed, 2u);
  std::printf("[ replay   ] %s: %zu requests, restored %zu of %zu shared prompt tokens\n", GetParam().c_str(),
              replayed, restored_total, shared_total);
}

std::vector<std::string> sessions() {
  std::vector<std::string> out;
  if (fs::exists(kTraffic))
    for (const auto& e : fs::directory_iterator(kTraffic))
      if (e.is_directory()) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

INSTANTIATE_TEST_SUITE_P(Captured, TrafficReplay, ::testing::ValuesIn(sessions()),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace ft::proxy
