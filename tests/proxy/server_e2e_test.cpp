// The HTTP server end to end on loopback: a tiny random qwen3_5_moe checkpoint with the real
// Qwen3 tokenizer, requests in all three client dialects, and the bad inputs a server must survive.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "ft/engine/random_checkpoint.h"
#include "ft/protocol/chat_render.h"
#include "ft/protocol/client_requests.h"
#include "ft/protocol/tokenizer.h"
#include "ft/proxy/backend.h"
#include "ft/proxy/server.h"
#include "test_support.h"

namespace ft::proxy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;


class ServerE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!test::have_qwen3_tokenizer()) return;
    dir_ = std::make_unique<test::TempDir>();
    test::write_tiny_chat_model(dir_->path());
  }
  static void TearDownTestSuite() { dir_.reset(); }

  void SetUp() override {
    if (!dir_) GTEST_SKIP() << "Qwen3 tokenizer not installed at " << test::qwen3_tokenizer_dir() << " (run scripts/setup.sh)";
    start_server({});
  }

  void start_server(ServerOptions opts, int max_waiting = 16, int max_running = 8,
                    uint64_t checkpoint_ram_bytes = 1ull << 30) {
    if (server_) server_->stop();
    server_.reset();
    opts.port = 0;
    opts.model_id = "tiny";
    opts.max_body_bytes = 1 << 20;
    LocalBackendOptions bopts;
    bopts.context_length = 4096;
    bopts.max_waiting = max_waiting;
    bopts.max_running = max_running;
    bopts.checkpoint_ram_bytes = checkpoint_ram_bytes;
    auto backend = make_local_backend(dir_->path(), bopts);
    ASSERT_TRUE(backend) << backend.status().to_string();
    auto tok = protocol::Tokenizer::load(dir_->path());
    ASSERT_TRUE(tok) << tok.status().to_string();
    auto tmpl = protocol::ChatTemplate::from_tokenizer(*tok);
    ASSERT_TRUE(tmpl) << tmpl.status().to_string();
    std::unique_ptr<GenerationBackend> engine = std::move(backend).value();
    if (wrap_backend_) engine = wrap_backend_(std::move(engine));
    auto s = Server::create(opts, std::move(engine), std::move(tok).value(), std::move(tmpl).value());
    ASSERT_TRUE(s);
    server_ = std::move(s).value();
    ASSERT_TRUE(server_->start());
  }

  httplib::Client client() {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(60, 0);
    return c;
  }

  static std::string anthropic_body(bool stream, int max_tokens = 8, const std::string& model = "tiny") {
    return json{{"model", model}, {"max_tokens", max_tokens}, {"stream", stream}, {"temperature", 0},
                {"system", "You are terse."}, {"messages", {{{"role", "user"}, {"content", "Say hi"}}}}}
        .dump();
  }

  // A conversation with `turns` user messages, the assistant replies given, for the prefix tests.
  static json conversation(const std::vector<std::string>& replies, const std::string& system = "You are terse.") {
    json messages = json::array();
    for (std::size_t i = 0; i <= replies.size(); ++i) {
      messages.push_back({{"role", "user"}, {"content", "Question number " + std::to_string(i) + ": say hi"}});
      if (i < replies.size()) messages.push_back({{"role", "assistant"}, {"content", replies[i]}});
    }
    return {{"model", "tiny"}, {"max_tokens", 12}, {"temperature", 0}, {"system", system}, {"messages", messages}};
  }

  // The prompt token ids the server computes for an Anthropic body.
  static std::vector<int32_t> prompt_ids(const json& body) {
    auto tok = protocol::Tokenizer::load(dir_->path());
    auto tmpl = protocol::ChatTemplate::from_tokenizer(*tok);
    auto req = protocol::parse_anthropic_messages(body.dump());
    auto text = tmpl->render(protocol::to_template_json(*req));
    return tok->encode(*text);
  }

  static std::size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    std::size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    return n;
  }

  static inline std::unique_ptr<test::TempDir> dir_;
  std::unique_ptr<Server> server_;
  // Set before start_server: what the server gets instead of the engine itself.
  std::function<std::unique_ptr<GenerationBackend>(std::unique_ptr<GenerationBackend>)> wrap_backend_;
};

// The engine lost in the middle of a generation, as the remote backend reports an engine process
// that died or went silent: after `token_events` token events (-1: before it started) the
// generation ends with an unavailable error.
class LostGeneration final : public Generation {
 public:
  LostGeneration(std::unique_ptr<Generation> inner, int token_events)
      : inner_(std::move(inner)), token_events_(token_events) {}
  std::optional<wire::Event> next() override {
    if (ended_) return std::nullopt;
    if ((!started_ && token_events_ < 0) || (started_ && seen_ >= token_events_)) {
      ended_ = true;
      inner_->cancel();
      wire::Event e;
      e.type = wire::Event::Type::kError;
      e.code = wire::ErrorCode::kUnavailable;
      e.message = "engine connection lost or silent mid-generation";
      return e;
    }
    auto e = inner_->next();
    if (e && e->type == wire::Event::Type::kStarted) started_ = true;
    if (e && e->type == wire::Event::Type::kTokens) ++seen_;
    return e;
  }
  void cancel() override { inner_->cancel(); }

 private:
  std::unique_ptr<Generation> inner_;
  const int token_events_;
  bool started_ = false, ended_ = false;
  int seen_ = 0;
};

class LosingBackend final : public GenerationBackend {
 public:
  LosingBackend(std::unique_ptr<GenerationBackend> inner, int token_events)
      : inner_(std::move(inner)), token_events_(token_events) {}
  Result<wire::LookupReply> lookup(const wire::LookupRequest& r) override { return inner_->lookup(r); }
  Result<std::unique_ptr<Generation>> start(const wire::GenerateRequest& r) override {
    FT_ASSIGN_OR_RETURN(auto g, inner_->start(r));
    return std::unique_ptr<Generation>(std::make_unique<LostGeneration>(std::move(g), token_events_));
  }
  const ModelInfo& info() const override { return inner_->info(); }
  json status() override { return inner_->status(); }
  json memory() override { return inner_->memory(); }
  Result<json> resize_gpu_memory(std::uint64_t bytes) override { return inner_->resize_gpu_memory(bytes); }

 private:
  std::unique_ptr<GenerationBackend> inner_;
  const int token_events_;
};

TEST_F(ServerE2E, AnthropicNonStreaming) {
  auto c = client();
  auto r = c.Post("/v1/messages?beta=true", anthropic_body(false), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_GT(j["usage"]["input_tokens"].get<int>(), 5);
  EXPECT_GE(j["usage"]["output_tokens"].get<int>(), 1);
  EXPECT_LE(j["usage"]["output_tokens"].get<int>(), 8);
  EXPECT_TRUE(j["stop_reason"] == "max_tokens" || j["stop_reason"] == "end_turn" || j["stop_reason"] == "tool_use");
}

TEST_F(ServerE2E, GreedyIsDeterministicAcrossDialects) {
  auto c = client();
  auto a = c.Post("/v1/messages", anthropic_body(false, 6), "application/json");
  auto b = c.Post("/v1/messages", anthropic_body(false, 6), "application/json");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(json::parse(a->body)["content"], json::parse(b->body)["content"]);
}

TEST_F(ServerE2E, AnthropicStreamEndsWithMessageStop) {
  auto c = client();
  auto r = c.Post("/v1/messages", anthropic_body(true), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_EQ(r->body.rfind("event: message_start", 0), 0u);
  EXPECT_NE(r->body.find("event: message_delta"), std::string::npos);
  EXPECT_NE(r->body.find("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), std::string::npos);
}

TEST_F(ServerE2E, OpenAIChatStreamWithUsage) {
  auto c = client();
  json body = {{"model", "tiny"}, {"max_tokens", 5}, {"stream", true}, {"stream_options", {{"include_usage", true}}},
               {"messages", {{{"role", "user"}, {"content", "hello"}}}}};
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("\"finish_reason\":\""), std::string::npos);
  EXPECT_NE(r->body.find("\"prompt_tokens_details\":{\"cached_tokens\":0}"), std::string::npos);
  EXPECT_GE(r->body.size(), 14u);
  EXPECT_EQ(r->body.substr(r->body.size() - 14), "data: [DONE]\n\n");
}

TEST_F(ServerE2E, OpenAIResponsesNonStreaming) {
  auto c = client();
  json body = {{"model", "tiny"}, {"max_output_tokens", 4}, {"input", "hello"}, {"instructions", "be brief"}};
  auto r = c.Post("/v1/responses", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  EXPECT_EQ(j["object"], "response");
  EXPECT_TRUE(j["status"] == "completed" || j["status"] == "incomplete");
}

TEST_F(ServerE2E, CountTokensModelsHealthStatsMetrics) {
  auto c = client();
  auto ct = c.Post("/v1/messages/count_tokens",
                   json{{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}}.dump(), "application/json");
  ASSERT_TRUE(ct);
  ASSERT_EQ(ct->status, 200) << ct->body;
  EXPECT_GT(json::parse(ct->body)["input_tokens"].get<int>(), 0);
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(json::parse(m->body)["data"][0]["id"], "tiny");
  EXPECT_EQ(c.Get("/health")->status, 200);
  c.Post("/v1/messages", anthropic_body(false, 2), "application/json");
  auto s = json::parse(c.Get("/v1/stats")->body);
  EXPECT_GE(s["engine"]["scheduler"]["requests"].get<int>(), 1);
  auto metrics = c.Get("/metrics")->body;
  EXPECT_NE(metrics.find("# TYPE freetoken_generated_tokens_total counter"), std::string::npos);
}

TEST_F(ServerE2E, BadInputGetsTheApiErrorAndServerKeepsServing) {
  auto c = client();
  struct Case { const char* path; std::string body; int status; const char* type; };
  std::string huge(2 << 20, 'x');
  const Case cases[] = {
      {"/v1/messages", "{not json", 400, "invalid_request_error"},
      {"/v1/messages", R"({"model":"tiny","max_tokens":"many","messages":[]})", 400, "invalid_request_error"},
      {"/v1/messages", R"({"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":")" + std::string(20000, 'a') + " " + std::string(20000, 'b') + R"("}]})", 400, "invalid_request_error"},
      {"/v1/messages", huge, 413, "request_too_large"},
      {"/v1/chat/completions", R"({"model":"tiny","messages":"hi"})", 400, "invalid_request_error"},
  };
  for (const auto& k : cases) {
    auto r = c.Post(k.path, k.body, "application/json");
    ASSERT_TRUE(r) << k.path;
    EXPECT_EQ(r->status, k.status) << r->body;
    auto j = json::parse(r->body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r->body;
    if (std::string(k.path) == "/v1/messages") {
      EXPECT_EQ(j["type"], "error");
      EXPECT_EQ(j["error"]["type"], k.type) << r->body;
    } else {
      EXPECT_EQ(j["error"]["type"], k.type) << r->body;
    }
  }
  // Context too long names the limit.
  auto r = c.Post("/v1/messages", cases[2].body, "application/json");
  EXPECT_NE(r->body.find("prompt is too long"), std::string::npos) << r->body;
  // Still serving.
  auto ok = c.Post("/v1/messages", anthropic_body(false, 2), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

// Thousands of tiny messages over the context are refused (in the caller's dialect) after one
// render and one tokenization: the boundary search would render the body once per message.
TEST_F(ServerE2E, ManyTinyMessagesOverTheContextAreRefusedBeforeTheBoundarySearch) {
  json messages = json::array();
  for (int i = 0; i < 24000; ++i) messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", "a"}});
  const json anthropic = {{"model", "tiny"}, {"max_tokens", 4}, {"messages", messages}};
  for (const char* path : {"/v1/messages", "/v1/messages/count_tokens", "/v1/chat/completions"}) {
    auto r = client().Post(path, anthropic.dump(), "application/json");
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 400) << path << ": " << r->body.substr(0, 300);
    const json j = json::parse(r->body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r->body.substr(0, 300);
    EXPECT_EQ(j["error"]["type"], "invalid_request_error") << path;
    EXPECT_NE(j["error"]["message"].get<std::string>().find("prompt is too long"), std::string::npos) << path;
  }
}

// Past its preparation budget a request keeps its newest boundaries: the next turn still restores
// the previous one's deepest checkpoint, and the boundaries left out are counted.
TEST_F(ServerE2E, ABoundaryBudgetKeepsTheNewestCheckpoints) {
  ServerOptions opts;
  opts.boundary_work_limit = 24u << 20;  // a few dozen renders of this conversation, not 300
  start_server(opts);
  const std::vector<std::string> replies(150, "ok");
  const json turn = conversation(replies);
  auto r = client().Post("/v1/messages", turn.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json stats = json::parse(client().Get("/v1/stats")->body);
  const uint64_t skipped = stats["boundaries_skipped_total"].get<uint64_t>();
  EXPECT_GT(skipped, 100u) << "most of the 300 older messages are left out";
  EXPECT_NE(client().Get("/metrics")->body.find("freetoken_boundaries_skipped_total " + std::to_string(skipped)),
            std::string::npos);

  std::vector<std::string> next_replies = replies;
  const json reply = json::parse(r->body)["content"];
  next_replies.push_back(reply.empty() ? std::string() : reply[0].value("text", ""));
  const json next = conversation(next_replies);
  auto r2 = client().Post("/v1/messages", next.dump(), "application/json");
  ASSERT_TRUE(r2);
  ASSERT_EQ(r2->status, 200) << r2->body;
  const int cached = json::parse(r2->body)["usage"]["cache_read_input_tokens"].get<int>();
  const std::size_t shared = common_prefix(prompt_ids(turn), prompt_ids(next));
  EXPECT_GE(cached, int(0.9 * double(shared))) << "shared " << shared;
  EXPECT_LE(cached, int(shared));
}

// An agent pointed at the server with only its base URL asks for its own default models (Claude
// Code: an opus/sonnet name and a haiku name for side calls): each is served, and each response
// carries the name that was asked for.
TEST_F(ServerE2E, EveryRequestedModelNameIsServedAndReportedBack) {
  auto c = client();
  for (const std::string name : {"claude-opus-4-5-20251101", "claude-haiku-4-5", "gpt-9", "tiny"}) {
    auto a = c.Post("/v1/messages", anthropic_body(false, 2, name), "application/json");
    ASSERT_TRUE(a);
    ASSERT_EQ(a->status, 200) << a->body;
    EXPECT_EQ(json::parse(a->body)["model"], name);
    json chat = {{"model", name}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", "x"}}}}};
    auto o = c.Post("/v1/chat/completions", chat.dump(), "application/json");
    ASSERT_TRUE(o);
    ASSERT_EQ(o->status, 200) << o->body;
    EXPECT_EQ(json::parse(o->body)["model"], name);
    json resp = {{"model", name}, {"max_output_tokens", 2}, {"input", "x"}};
    auto r = c.Post("/v1/responses", resp.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["model"], name);
  }
}

TEST_F(ServerE2E, StrictModelNamesRefuseOtherNamesInEachDialect) {
  ServerOptions opts;
  opts.strict_model_names = true;
  opts.model_aliases = {"claude-*-4-5", "exact-alias"};
  start_server(opts);
  auto c = client();
  EXPECT_EQ(c.Post("/v1/messages", anthropic_body(false, 2, "claude-haiku-4-5"), "application/json")->status, 200);
  EXPECT_EQ(c.Post("/v1/messages", anthropic_body(false, 2, "exact-alias"), "application/json")->status, 200);
  auto a = c.Post("/v1/messages", anthropic_body(false, 2, "claude-haiku-4-6"), "application/json");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 404);
  EXPECT_EQ(json::parse(a->body)["type"], "error");
  EXPECT_EQ(json::parse(a->body)["error"]["type"], "not_found_error");
  json chat = {{"model", "gpt-9"}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", "x"}}}}};
  auto o = c.Post("/v1/chat/completions", chat.dump(), "application/json");
  ASSERT_TRUE(o);
  EXPECT_EQ(o->status, 404);
  EXPECT_EQ(json::parse(o->body)["error"]["param"], "model") << o->body;
  json resp = {{"model", "gpt-9"}, {"max_output_tokens", 2}, {"input", "x"}};
  auto r = c.Post("/v1/responses", resp.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(r->body.find("model 'gpt-9' not found"), std::string::npos) << r->body;
  // /v1/models lists the model and its exact aliases, not the patterns.
  const json models = json::parse(c.Get("/v1/models")->body);
  ASSERT_EQ(models["data"].size(), 2u) << models.dump();
  EXPECT_EQ(models["data"][1]["id"], "exact-alias");
}

// JSON nested hundreds of thousands of levels deep would overflow the stack of the recursive code
// after the parse (serialising, template values) and kill the server: it is refused up front, in
// each dialect's error format, and the server keeps serving.
TEST_F(ServerE2E, DeeplyNestedJsonIsRefusedAndTheServerKeepsServing) {
  auto c = client();
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  for (const char* path : {"/v1/messages", "/v1/messages/count_tokens", "/v1/chat/completions", "/v1/responses"}) {
    const std::string body = R"({"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"x"}],"extra":)" +
                             deep + "}";
    auto r = c.Post(path, body, "application/json");
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 400) << path;
    EXPECT_NE(r->body.find("deeper than 256 levels"), std::string::npos) << path << ": " << r->body.substr(0, 200);
    const json j = json::parse(r->body, nullptr, false);
    ASSERT_FALSE(j.is_discarded());
    EXPECT_EQ(j["error"]["type"], "invalid_request_error") << r->body;
  }
  auto ok = c.Post("/v1/messages", anthropic_body(false, 2), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

// The body limit holds only for declared lengths: chunked or compressed bodies would be buffered
// without bound before any check, so they are refused before the body is read.
TEST_F(ServerE2E, ChunkedAndCompressedBodiesAreRefusedBeforeBeingRead) {
  {
    auto c = client();
    std::size_t sent = 0;
    // A chunked body far past the 1 MiB limit: the refusal comes before it is read.
    auto r = c.Post(
        "/v1/messages",
        [&](size_t, httplib::DataSink& sink) {
          const std::string piece(64 << 10, 'x');
          if (sent >= (std::size_t(64) << 20)) {
            sink.done();
            return true;
          }
          sent += piece.size();
          return sink.write(piece.data(), piece.size());
        },
        "application/json");
    if (r) {  // the server may close the connection before the client finishes sending
      EXPECT_EQ(r->status, 411);
      EXPECT_EQ(json::parse(r->body)["error"]["type"], "invalid_request_error") << r->body;
    }
    EXPECT_LT(sent, std::size_t(64) << 20);
  }
  {
    auto c = client();
    httplib::Headers h = {{"Content-Encoding", "gzip"}};
    auto r = c.Post("/v1/chat/completions", h, std::string(100, 'x'), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 415);
    EXPECT_NE(r->body.find("Content-Encoding 'gzip'"), std::string::npos) << r->body;
  }
  auto c = client();
  auto ok = c.Post("/v1/messages", anthropic_body(false, 2), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

// Without an API key a page in the user's browser could drive a server on loopback: a cross-site
// POST (text/plain needs no preflight) or a DNS name rebound to 127.0.0.1. Each is refused in the
// caller's API format; the agents' own requests (JSON, loopback Host, no foreign Origin) pass.
TEST_F(ServerE2E, BrowserForgedRequestsAreRefused) {
  auto c = client();
  const std::string body = anthropic_body(false, 2);
  struct Case {
    httplib::Headers headers;
    std::string content_type;
    int status;
    std::string type, says;
  };
  const std::vector<Case> cases = {
      {{{"Origin", "https://evil.example"}}, "application/json", 403, "permission_error", "Origin"},
      {{{"Host", "rebound.example:1919"}}, "application/json", 403, "permission_error", "does not name this server"},
      {{}, "text/plain", 415, "invalid_request_error", "Content-Type must be application/json"},
      {{}, "application/x-www-form-urlencoded", 415, "invalid_request_error", "Content-Type"},
  };
  for (const Case& k : cases) {
    auto r = c.Post("/v1/messages", k.headers, body, k.content_type.c_str());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, k.status) << k.says;
    const json j = json::parse(r->body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r->body;
    EXPECT_EQ(j["error"]["type"], k.type) << r->body;
    EXPECT_NE(r->body.find(k.says), std::string::npos) << r->body;
  }
  // A rebound name cannot read the stats either; this server's own origin may post.
  EXPECT_EQ(c.Get("/v1/stats", httplib::Headers{{"Host", "rebound.example"}})->status, 403);
  httplib::Headers own = {{"Origin", "http://127.0.0.1:" + std::to_string(server_->port())}};
  auto ok = c.Post("/v1/messages", own, body, "application/json; charset=utf-8");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(ServerE2E, ApiKeyIsEnforcedInTheCallersDialect) {
  ServerOptions opts;
  opts.api_key = "secret";
  start_server(opts);
  auto c = client();
  auto denied = c.Post("/v1/messages", anthropic_body(false, 2), "application/json");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(json::parse(denied->body)["error"]["type"], "authentication_error");
  httplib::Headers h = {{"x-api-key", "secret"}};
  EXPECT_EQ(c.Post("/v1/messages", h, anthropic_body(false, 2), "application/json")->status, 200);
  httplib::Headers b = {{"Authorization", "Bearer secret"}};
  json chat = {{"model", "tiny"}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", "x"}}}}};
  EXPECT_EQ(c.Post("/v1/chat/completions", b, chat.dump(), "application/json")->status, 200);
  // A key that only starts like the right one, or the right one without "Bearer ", is refused.
  EXPECT_EQ(c.Post("/v1/messages", {{"x-api-key", "secre"}}, anthropic_body(false, 2), "application/json")->status, 401);
  EXPECT_EQ(c.Post("/v1/chat/completions", {{"Authorization", "secret"}}, chat.dump(), "application/json")->status,
            401);
  // What the server holds (stats, metrics) is behind the key too; liveness is not.
  for (const char* path : {"/v1/stats", "/metrics"}) {
    auto shut = c.Get(path);
    ASSERT_TRUE(shut);
    EXPECT_EQ(shut->status, 401) << path;
    EXPECT_EQ(json::parse(shut->body)["error"]["type"], "authentication_error") << shut->body;
    EXPECT_EQ(c.Get(path, h)->status, 200) << path;
  }
  EXPECT_EQ(c.Get("/health")->status, 200);
}

// Captures hold whole prompts: their directory is made owner-only, whatever the umask.
TEST_F(ServerE2E, CapturesGoToAnOwnerOnlyDirectory) {
  test::TempDir tmp;
  ServerOptions opts;
  opts.capture_dir = tmp.path() / "captures";
  start_server(opts);
  ASSERT_EQ(client().Post("/v1/messages", anthropic_body(false, 2), "application/json")->status, 200);
  struct stat st {};
  ASSERT_EQ(::stat(opts.capture_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_FALSE(std::filesystem::is_empty(opts.capture_dir));
}

TEST_F(ServerE2E, ClientDisconnectMidStreamStopsTheWorkAndServerKeepsServing) {
  auto c = client();
  std::atomic<int> received{0};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/messages";
  req.body = anthropic_body(true, 3000);
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++received < 3; };  // hang up
  httplib::Response res;
  httplib::Error err;
  c.send(req, res, err);
  EXPECT_GE(received.load(), 3);
  // The long generation was cut short: the next request is answered promptly.
  auto ok = client().Post("/v1/messages", anthropic_body(false, 2), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  auto stats = json::parse(client().Get("/v1/stats")->body);
  EXPECT_LT(stats["engine"]["scheduler"]["generated_tokens"].get<int>(), 3000);
}

TEST_F(ServerE2E, EightConcurrentStreamsAllComplete) {
  std::vector<std::thread> threads;
  std::atomic<int> completed{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto c = client();
      auto r = c.Post("/v1/messages", anthropic_body(true, 48), "application/json");
      if (r && r->status == 200 && r->body.find("event: message_stop") != std::string::npos) ++completed;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(completed.load(), 8);
  // They ran as one batch, not one after another.
  auto sched = json::parse(client().Get("/v1/stats")->body)["engine"]["scheduler"];
  EXPECT_GT(sched["batched_steps"].get<int>(), 0) << sched.dump();
  EXPECT_GE(sched["max_batch_sequences"].get<int>(), 4) << sched.dump();
}

// Multi-turn: every turn after the first restores (nearly) all it shares with the one before,
// and greedy output equals a server that computes every prompt in full.
TEST_F(ServerE2E, LaterTurnsRestoreTheSharedPrefixAndMatchNoCache) {
  ServerOptions no_cache_opts;
  no_cache_opts.prefix_cache = false;
  std::vector<std::string> replies, plain_replies;
  std::vector<int32_t> previous;
  for (int turn = 0; turn < 4; ++turn) {
    const json body = conversation(replies);
    auto r = client().Post("/v1/messages", body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    const std::vector<int32_t> ids = prompt_ids(body);
    const int cached = j["usage"]["cache_read_input_tokens"].get<int>();
    EXPECT_EQ(j["usage"]["input_tokens"].get<int>() + cached, int(ids.size()));
    if (turn > 0) {
      const std::size_t shared = common_prefix(previous, ids);
      EXPECT_GE(cached, int(0.9 * double(shared))) << "turn " << turn << ": shared " << shared;
      EXPECT_LE(cached, int(shared));
    } else {
      EXPECT_EQ(cached, 0);
    }
    previous = ids;
    replies.push_back(j["content"].empty() ? std::string() : j["content"][0].value("text", ""));
  }
  // The same conversation, computed in full every time.
  start_server(no_cache_opts);
  for (std::size_t turn = 0; turn < replies.size(); ++turn) {
    std::vector<std::string> history(replies.begin(), replies.begin() + std::ptrdiff_t(turn));
    auto r = client().Post("/v1/messages", conversation(history).dump(), "application/json");
    ASSERT_TRUE(r);
    const json j = json::parse(r->body);
    EXPECT_EQ(j["usage"]["cache_read_input_tokens"].get<int>(), 0);
    EXPECT_EQ(j["content"].empty() ? std::string() : j["content"][0].value("text", ""), replies[turn])
        << "turn " << turn;
  }
}

// Named keys (--api-keys): only the listed keys get in, each tenant's checkpoints serve all of its
// keys (a team's members share a system prompt's state) and no other tenant's.
TEST_F(ServerE2E, NamedKeysMapCallersToTenants) {
  ServerOptions opts;
  opts.api_keys = {{"team-a", "ka-1"}, {"team-a", "ka-2"}, {"team-b", "kb-1"}};
  start_server(opts);
  auto post = [&](const std::string& key, const json& body) {
    httplib::Headers h = {{"x-api-key", key}};
    auto r = client().Post("/v1/messages", h, body.dump(), "application/json");
    EXPECT_TRUE(r);
    return r;
  };
  const json body = conversation({}, std::string(600, 'x'));
  EXPECT_EQ(post("", body)->status, 401);
  EXPECT_EQ(post("ka-3", body)->status, 401);
  auto cached = [&](const std::string& key) {
    auto r = post(key, body);
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body)["usage"]["cache_read_input_tokens"].get<int>();
  };
  EXPECT_EQ(cached("ka-1"), 0);
  EXPECT_GT(cached("ka-2"), 0) << "another key of the same tenant restores its checkpoints";
  EXPECT_EQ(cached("kb-1"), 0) << "another tenant computes the same prompt again";
  httplib::Headers bearer = {{"Authorization", "Bearer kb-1"}};
  EXPECT_EQ(client().Get("/v1/stats", bearer)->status, 200);
}

// POST /v1/gpu-memory (`ctl memory --gpu-mem`) resizes the engine's expert cache: on the CPU there
// is none, which the server and `ctl memory` say plainly; bad bodies are 400s naming the field;
// with named tenants no caller may change a setting of the whole server; the server goes on.
TEST_F(ServerE2E, GpuMemoryRequestsAreRefusedClearlyWithoutAnExpertCache) {
  auto post = [&](const std::string& body, httplib::Headers h = {}) {
    auto r = client().Post("/v1/gpu-memory", h, body, "application/json");
    EXPECT_TRUE(r);
    return r;
  };
  auto r = post(R"({"budget_bytes": 4294967296})");
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("expert cache"), std::string::npos)
      << r->body;
  for (const char* bad : {R"({})", R"({"budget_bytes": "4G"})", R"({"budget_bytes": -1})", R"([1])"}) {
    auto b = post(bad);
    EXPECT_EQ(b->status, 400) << bad;
    EXPECT_EQ(json::parse(b->body)["error"]["param"], "budget_bytes") << bad << ": " << b->body;
  }
  const test::CommandResult ctl =
      test::run_freetoken({"ctl", "memory", "--gpu-mem", "4", "--port", std::to_string(server_->port())});
  EXPECT_EQ(ctl.exit_code, 2) << ctl.out << ctl.err;
  EXPECT_NE(ctl.err.find("expert cache"), std::string::npos) << ctl.err;
  EXPECT_EQ(client().Post("/v1/messages", anthropic_body(false), "application/json")->status, 200);

  ServerOptions opts;
  opts.api_keys = {{"team-a", "ka-1"}};
  start_server(opts);
  EXPECT_EQ(post(R"({"budget_bytes": 4294967296})")->status, 401);
  auto named = post(R"({"budget_bytes": 4294967296})", {{"Authorization", "Bearer ka-1"}});
  EXPECT_EQ(named->status, 403) << named->body;
  EXPECT_NE(named->body.find("--gpu-mem"), std::string::npos) << named->body;
}

// Tenants are API keys: one key's checkpoints never serve another's, while sessions of the same
// key with the same system prompt share one checkpoint of it: one write, then a hit per session.
TEST_F(ServerE2E, TenantsDoNotShareButSessionsOfOneTenantDo) {
  auto post = [&](const std::string& key, const json& body) {
    httplib::Headers h = {{"x-api-key", key}};
    auto r = client().Post("/v1/messages", h, body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200);
    return r ? json::parse(r->body)["usage"]["cache_read_input_tokens"].get<int>() : -1;
  };
  auto engine_stats = [&] { return json::parse(client().Get("/v1/stats")->body)["engine"]; };
  const std::string system(600, 'x');  // a long shared system prompt
  json first = conversation({}, system);
  EXPECT_EQ(post("tenant-a", first), 0);
  EXPECT_EQ(post("tenant-b", first), 0);  // same bytes, other tenant: computed again
  EXPECT_EQ(engine_stats()["scheduler"]["restores"], 0);
  const int first_saves = engine_stats()["scheduler"]["checkpoints_saved"].get<int>() / 2;  // per tenant
  int shared = -1, saves = -1;
  for (const char* question : {"A different first question", "Yet another one"}) {
    json session = first;
    session["messages"][0]["content"] = question;
    const int before = engine_stats()["scheduler"]["checkpoints_saved"].get<int>();
    const int cached = post("tenant-a", session);
    const int saved = engine_stats()["scheduler"]["checkpoints_saved"].get<int>() - before;
    EXPECT_GT(cached, 50) << question;  // the system prompt at least
    if (shared >= 0) {
      EXPECT_EQ(cached, shared) << "both sessions restore the same checkpoint";
      EXPECT_EQ(saved, saves);
    }
    // The shared prefix is not written again: a session saves only what lies beyond it.
    EXPECT_LT(saved, first_saves);
    shared = cached;
    saves = saved;
  }
  EXPECT_EQ(engine_stats()["scheduler"]["restores"], 2);
}

// A sharing scope narrows what a tenant shares: requests naming the same scope share
// checkpoints, other scopes and the tenant-wide default do not; a malformed scope is a 400 in the
// caller's dialect.
TEST_F(ServerE2E, SharingScopesNarrowWhatOneTenantShares) {
  auto post = [&](const std::string& path, const std::optional<std::string>& scope, const json& body) {
    httplib::Headers h = {{"x-api-key", "one-key"}};
    if (scope) h.emplace("X-FreeToken-Scope", *scope);
    return client().Post(path, h, body.dump(), "application/json");
  };
  auto cached = [&](const std::optional<std::string>& scope) {
    auto r = post("/v1/messages", scope, conversation({}, std::string(600, 'x')));
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no reply");
    return r && r->status == 200 ? json::parse(r->body)["usage"]["cache_read_input_tokens"].get<int>() : -1;
  };
  EXPECT_EQ(cached("session-1"), 0);
  EXPECT_GT(cached("session-1"), 50) << "the same scope restores the system prompt";
  EXPECT_EQ(cached("session-2"), 0) << "another scope of the same tenant computes it again";
  EXPECT_EQ(cached(std::nullopt), 0) << "the tenant-wide default is a scope of its own";
  EXPECT_GT(cached(std::nullopt), 50);

  for (const std::string& bad : std::vector<std::string>{"a/b", std::string(65, 'a'), "sp ace", "ü"}) {
    auto a = post("/v1/messages", bad, conversation({}, "hi"));
    ASSERT_TRUE(a);
    EXPECT_EQ(a->status, 400) << "'" << bad << "'";
    EXPECT_EQ(json::parse(a->body)["type"], "error");
    EXPECT_NE(a->body.find("X-FreeToken-Scope"), std::string::npos) << a->body;
    auto o = post("/v1/chat/completions", bad,
                  json{{"model", "m"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
    ASSERT_TRUE(o);
    EXPECT_EQ(o->status, 400);
    EXPECT_TRUE(json::parse(o->body)["error"].contains("message")) << o->body;
  }
}

// A live session's newest checkpoint is pinned: a stream of short side calls (titles, probes)
// that overflows the checkpoint memory does not push it out.
TEST_F(ServerE2E, SideCallsDoNotEvictALiveSessionsCheckpoint) {
  std::string system;  // a long agent prompt (> min_pin_tokens)
  for (int i = 0; i < 400; ++i) system += "rule " + std::to_string(i) + " applies; ";
  // Size the checkpoint memory to a few of this conversation's checkpoints.
  ASSERT_EQ(client().Post("/v1/messages", conversation({}, system).dump(), "application/json")->status, 200);
  const json store = json::parse(client().Get("/v1/stats")->body)["engine"]["store"]["stats"];
  const uint64_t per_checkpoint = store["bytes"].get<uint64_t>() / std::max<uint64_t>(1, store["entries"].get<uint64_t>());
  start_server({}, 16, 8, /*checkpoint_ram_bytes=*/per_checkpoint * 3);
  std::vector<std::string> replies;
  json turn = conversation(replies, system);
  auto r = client().Post("/v1/messages", turn.dump(), "application/json");
  ASSERT_TRUE(r && r->status == 200);
  replies.push_back(json::parse(r->body)["content"][0].value("text", ""));
  for (int i = 0; i < 16; ++i) {
    json side = conversation({}, "Generate a title for conversation " + std::to_string(i) + std::string(400, 'z'));
    ASSERT_EQ(client().Post("/v1/messages", side.dump(), "application/json")->status, 200);
  }
  EXPECT_GT(json::parse(client().Get("/v1/stats")->body)["engine"]["store"]["stats"]["evictions"].get<int>(), 0)
      << "the side calls must overflow the checkpoint memory for this test to mean anything: "
      << client().Get("/v1/stats")->body << " per checkpoint " << per_checkpoint;
  const json next = conversation(replies, system);
  auto r2 = client().Post("/v1/messages", next.dump(), "application/json");
  ASSERT_TRUE(r2 && r2->status == 200);
  const int cached = json::parse(r2->body)["usage"]["cache_read_input_tokens"].get<int>();
  const std::size_t shared = common_prefix(prompt_ids(turn), prompt_ids(next));
  EXPECT_GE(cached, int(0.9 * double(shared))) << client().Get("/v1/stats")->body;
}

TEST_F(ServerE2E, OverloadIsA529WithRetryAfter) {
  start_server({}, /*max_waiting=*/0, /*max_running=*/1);
  std::thread slow([&] { client().Post("/v1/messages", anthropic_body(false, 400), "application/json"); });
  // Wait until the slow request is running, then a second one finds no room in the queue.
  for (int i = 0; i < 200; ++i) {
    auto s = json::parse(client().Get("/v1/stats")->body);
    if (s["engine"]["scheduler"]["running"] == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto r = client().Post("/v1/messages", anthropic_body(false, 2), "application/json");
  slow.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 529) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "overloaded_error");
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
}

// An engine lost mid-request (killed, restarting) is an error the client retries, in every
// dialect: a 503 with Retry-After while no byte was sent, else the API's overloaded error event.
TEST_F(ServerE2E, AnEngineLostMidRequestIsARetryableError) {
  const json chat = {{"model", "tiny"},
                     {"max_tokens", 8},
                     {"temperature", 0},
                     {"stream", true},
                     {"messages", {{{"role", "user"}, {"content", "hello"}}}}};
  wrap_backend_ = [](std::unique_ptr<GenerationBackend> b) {
    return std::make_unique<LosingBackend>(std::move(b), -1);
  };
  start_server({});
  for (const bool stream : {false, true}) {
    auto r = client().Post("/v1/messages", anthropic_body(stream), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503) << r->body;
    EXPECT_EQ(r->get_header_value("Retry-After"), "1");
    json body = chat;
    body["stream"] = stream;
    r = client().Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 503) << r->body;
    EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  }

  wrap_backend_ = [](std::unique_ptr<GenerationBackend> b) { return std::make_unique<LosingBackend>(std::move(b), 3); };
  start_server({});
  auto r = client().Post("/v1/messages", anthropic_body(false), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  r = client().Post("/v1/messages", anthropic_body(true), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("event: content_block_delta"), std::string::npos) << r->body;
  const auto event = r->body.find("event: error\ndata: ");
  ASSERT_NE(event, std::string::npos) << r->body;
  const json error = json::parse(r->body.substr(event + 19, r->body.find('\n', event + 19) - event - 19));
  EXPECT_EQ(error["error"]["type"], "overloaded_error") << r->body;
  EXPECT_EQ(r->body.find("message_stop"), std::string::npos) << r->body;
  r = client().Post("/v1/chat/completions", chat.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("\"type\":\"rate_limit_exceeded\""), std::string::npos) << r->body;
  EXPECT_EQ(r->body.find("[DONE]"), std::string::npos) << r->body;
}

// /v1/stats shows each client (tenant and agent) and what the engine holds in memory; with named
// keys each tenant sees only its own rows.
TEST_F(ServerE2E, StatsShowEachClientAndNamedTenantsOnlyTheirOwn) {
  ServerOptions opts;
  opts.api_keys = {{"team-a", "ka-1"}, {"team-b", "kb-1"}};
  start_server(opts);
  auto post = [&](const std::string& key, const std::string& agent) {
    httplib::Headers h = {{"x-api-key", key}, {"User-Agent", agent}};
    auto r = client().Post("/v1/messages", h, conversation({}, std::string(600, 'x')).dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  };
  post("ka-1", "claude-cli/2.1.332 (external, sdk-cli)");
  post("ka-1", "claude-cli/2.1.332 (external, sdk-cli)");
  post("ka-1", "opencode/1.18.33 ai-sdk/provider-utils/4.0.23");
  post("kb-1", "codex_exec/0.171.0 (Debian 12.0.0; x86_64)");

  const json a = json::parse(client().Get("/v1/stats", {{"x-api-key", "ka-1"}})->body);
  ASSERT_EQ(a["clients"].size(), 2u) << a["clients"].dump();
  for (const json& row : a["clients"]) {
    EXPECT_EQ(row["tenant"], "tenant:team-a");
    EXPECT_EQ(row["in_flight"], 0);
    EXPECT_GT(row["prompt_tokens"].get<int>(), 0);
    if (row["agent"] == "claude-cli") {
      EXPECT_EQ(row["requests"], 2);
      EXPECT_GT(row["restored_tokens"].get<int>(), 0) << "the second request restored the first's prefix";
    } else {
      EXPECT_EQ(row["agent"], "opencode");
      EXPECT_EQ(row["requests"], 1);
    }
  }
  EXPECT_GT(a["memory"]["resident_bytes"].get<uint64_t>(), 0u);
  for (const json& t : a["memory"]["checkpoints"]["tenants"]) EXPECT_EQ(t["tenant"], "tenant:team-a");

  const json b = json::parse(client().Get("/v1/stats", {{"x-api-key", "kb-1"}})->body);
  ASSERT_EQ(b["clients"].size(), 1u) << b["clients"].dump();
  EXPECT_EQ(b["clients"][0]["agent"], "codex_exec");
  EXPECT_EQ(b["clients"][0]["tenant"], "tenant:team-b");
}

// GET / is the dashboard: the page loads without a key (its data comes from /v1/stats, which
// needs one) under a policy that admits only this origin's script, style and fetches, and is as
// closed to rebound DNS names as every other route.
TEST_F(ServerE2E, DashboardIsServedUnderAStrictContentSecurityPolicy) {
  ServerOptions opts;
  opts.api_key = "secret";
  start_server(opts);
  auto c = client();
  const std::vector<std::pair<std::string, std::string>> assets = {{"/", "text/html"},
                                                                   {"/dashboard.js", "text/javascript"},
                                                                   {"/dashboard.css", "text/css"},
                                                                   {"/favicon.svg", "image/svg+xml"}};
  for (const auto& [path, type] : assets) {
    auto r = c.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    const std::string content_type = r->get_header_value("Content-Type");
    EXPECT_EQ(content_type.rfind(type, 0), 0u) << path << ": " << content_type;
    const std::string csp = r->get_header_value("Content-Security-Policy");
    EXPECT_EQ(csp.rfind("default-src 'self';", 0), 0u) << csp;
    EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
    EXPECT_EQ(csp.find("unsafe"), std::string::npos) << csp;
    EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff");
    EXPECT_FALSE(r->body.empty());
  }
  const std::string page = c.Get("/")->body;
  EXPECT_NE(page.find("<script src=\"/dashboard.js\""), std::string::npos);
  EXPECT_EQ(page.find("http://"), std::string::npos) << "the page loads nothing from elsewhere";
  EXPECT_EQ(page.find("https://"), std::string::npos) << "the page loads nothing from elsewhere";
  EXPECT_EQ(c.Get("/", httplib::Headers{{"Host", "rebound.example:1919"}})->status, 403);
  EXPECT_EQ(c.Get("/v1/stats")->status, 401);
  EXPECT_EQ(c.Get("/dashboard.jsx")->status, 404);
}

}  // namespace
}  // namespace ft::proxy
