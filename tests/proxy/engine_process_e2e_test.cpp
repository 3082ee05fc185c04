// `freetoken engine` spoken to directly over its protocol: the version header is enforced, bad
// messages get the protocol's error body, a generation streams NDJSON to its end, the
// checkpoints it saves are found by lookup, and a request that stops halfway is cut off.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ft/engine/random_checkpoint.h"
#include "ft/protocol/engine_protocol.h"
#include "ft/proxy/backend.h"
#include "serve_process.h"
#include "test_support.h"

namespace ft::test {
namespace {

using nlohmann::json;
namespace wire = protocol::engine;

// The small model every engine here runs (context 256 at the command line).
Status write_model(const std::filesystem::path& dir) {
  engine::RandomCheckpointSpec spec;
  spec.family = engine::ModelFamily::kQwen3_5Moe;
  spec.vocab_size = 512;
  spec.hidden_size = 32;
  spec.num_layers = 4;
  spec.head_dim = 32;  // the GPU takes multiples of 32 (the engine runs there on the GPU host)
  return engine::write_random_checkpoint(dir, spec);
}

class EngineProcessE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(write_model(dir_.path() / "model"));
    std::string log;
    engine_ = ServeProcess::start({"engine", "--model", (dir_.path() / "model").string(), "--port", "0", "--no-store",
                                   "--ctx", "256"},
                                  dir_.path() / "engine.log", 60, &log, "freetoken engine: ");
    ASSERT_TRUE(engine_) << log;
  }

  httplib::Result post(const std::string& path, const std::string& body, bool with_version = true) {
    httplib::Client c("127.0.0.1", engine_->port());
    c.set_read_timeout(60, 0);
    httplib::Headers h;
    if (with_version) h.emplace(wire::kVersionHeader, "1");
    return c.Post(path.c_str(), h, body, "application/json");
  }

  TempDir dir_;
  std::unique_ptr<ServeProcess> engine_;
};

TEST_F(EngineProcessE2E, StatusNamesTheProtocolAndTheModel) {
  httplib::Client c("127.0.0.1", engine_->port());
  auto r = c.Get("/engine/v1/status");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const json s = json::parse(r->body);
  EXPECT_EQ(s["protocol"], "freetoken-engine/1");
  EXPECT_EQ(s["version"], 1);
  EXPECT_EQ(s["model"]["family"], "qwen3_5_moe");
  EXPECT_EQ(s["model"]["context_length"], 256);
  EXPECT_EQ(s["model"]["store_fingerprint"].get<std::string>().size(), 32u);
  auto m = c.Get("/engine/v1/memory");
  ASSERT_TRUE(m);
  EXPECT_GT(json::parse(m->body)["resident_bytes"].get<uint64_t>(), 0u);
}

TEST_F(EngineProcessE2E, GenerateStreamsEventsAndCheckpointsAreFound) {
  wire::GenerateRequest g;
  g.id = "g1";
  g.tenant = "t";
  for (int i = 0; i < 40; ++i) g.tokens.push_back(i * 7 % 512);
  g.snapshots = {{20, PrefixKey{1, 20}, false}, {40, PrefixKey{1, 40}, true}};
  g.sampling.temperature = 0;
  g.max_new_tokens = 5;
  auto r = post("/engine/v1/generate", to_json(g).dump());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/x-ndjson");
  std::vector<wire::Event> events;
  std::size_t at = 0;
  for (std::size_t nl; (nl = r->body.find('\n', at)) != std::string::npos; at = nl + 1) {
    auto e = wire::event_from_json(json::parse(r->body.substr(at, nl - at)));
    ASSERT_TRUE(e.is_ok());
    events.push_back(*e);
  }
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.front().type, wire::Event::Type::kStarted);
  EXPECT_EQ(events.back().type, wire::Event::Type::kDone);
  EXPECT_EQ(events.back().usage.new_tokens + 0, 5);
  int checkpoints = 0;
  for (const auto& e : events) checkpoints += e.type == wire::Event::Type::kCheckpoint;
  EXPECT_EQ(checkpoints, 2);

  auto l = post("/engine/v1/lookup", to_json(wire::LookupRequest{"t", {PrefixKey{1, 20}, PrefixKey{1, 40}}}).dump());
  ASSERT_TRUE(l);
  auto reply = wire::lookup_reply_from_json(json::parse(l->body));
  ASSERT_TRUE(reply.is_ok() && reply->index);
  EXPECT_EQ(*reply->index, 1u);
  EXPECT_EQ(reply->tokens, 40);
}

TEST_F(EngineProcessE2E, BadMessagesGetTheProtocolsErrorBody) {
  wire::GenerateRequest g;
  g.id = "x";
  g.tenant = "t";
  g.tokens = {1, 2};
  struct Case {
    std::string path, body;
    bool version;
    int status;
    std::string code;
  };
  std::vector<Case> cases = {
      {"/engine/v1/generate", to_json(g).dump(), false, 400, "invalid_request"},  // no version header
      {"/engine/v1/generate", "{not json", true, 400, "invalid_request"},
      {"/engine/v1/generate", R"({"id":"x","tenant":"t","tokens":"12","max_new_tokens":1})", true, 400, "invalid_request"},
      {"/engine/v1/lookup", R"({"tenant":"t","keys":["nothex"]})", true, 400, "invalid_request"},
      {"/engine/v1/cancel", R"({"nope":1})", true, 400, "invalid_request"},
      {"/engine/v1/teleport", "{}", true, 404, "invalid_request"},
      // Nesting that would overflow the stack of code after the parse: refused before parsing.
      {"/engine/v1/lookup", R"({"tenant":"t","keys":)" + std::string(200000, '[') + std::string(200000, ']') + "}",
       true, 400, "invalid_request"},
  };
  g.tokens.assign(300, 1);  // past the 256-token context
  cases.push_back({"/engine/v1/generate", to_json(g).dump(), true, 400, "context_too_long"});
  for (const Case& c : cases) {
    auto r = post(c.path, c.body, c.version);
    ASSERT_TRUE(r) << c.path;
    EXPECT_EQ(r->status, c.status) << c.path << " " << c.body.substr(0, 60);
    const json j = json::parse(r->body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r->body;
    EXPECT_EQ(j["code"], c.code) << r->body;
    EXPECT_FALSE(j["message"].get<std::string>().empty());
  }
  // Still serving.
  httplib::Client c("127.0.0.1", engine_->port());
  EXPECT_EQ(c.Get("/engine/v1/status")->status, 200);
}

// An engine started with --key-file answers nothing without the key: not its status, not the
// tenants' memory, not a lookup or a generation (serve starts its engine this way, with a fresh
// key each time). The proxy's client sends the key; without it, it says the engine needs one.
TEST(EngineKey, EveryRouteNeedsTheKeyAndTheProxyClientSendsIt) {
  TempDir dir;
  ASSERT_TRUE(write_model(dir.path() / "model"));
  const auto key_file = dir.path() / "key";
  { std::ofstream(key_file) << "s3cret-engine-key\n"; }
  std::filesystem::permissions(key_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::string log;
  auto e = ServeProcess::start({"engine", "--model", (dir.path() / "model").string(), "--port", "0", "--no-store",
                                "--ctx", "256", "--key-file", key_file.string()},
                               dir.path() / "engine.log", 60, &log, "freetoken engine: ");
  ASSERT_TRUE(e) << log;
  httplib::Client c("127.0.0.1", e->port());
  const httplib::Headers version = {{wire::kVersionHeader, "1"}};
  httplib::Headers keyed = version;
  keyed.emplace("Authorization", "Bearer s3cret-engine-key");
  httplib::Headers wrong = version;
  wrong.emplace("Authorization", "Bearer s3cret-engine-kez");
  for (const char* path : {"/engine/v1/status", "/engine/v1/memory"}) {
    auto r = c.Get(path, version);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
    EXPECT_EQ(json::parse(r->body)["code"], "unauthorized") << r->body;
    EXPECT_EQ(c.Get(path, wrong)->status, 401) << path;
    EXPECT_EQ(c.Get(path, keyed)->status, 200) << path;
  }
  wire::LookupRequest l;
  l.tenant = "t";
  const std::string lookup = to_json(l).dump();
  EXPECT_EQ(c.Post("/engine/v1/lookup", version, lookup, "application/json")->status, 401);
  EXPECT_EQ(c.Post("/engine/v1/lookup", keyed, lookup, "application/json")->status, 200);
  EXPECT_EQ(c.Post("/engine/v1/generate", version, "{}", "application/json")->status, 401);

  auto anonymous = proxy::make_remote_backend("127.0.0.1", e->port(), 5000);
  ASSERT_FALSE(anonymous);
  EXPECT_NE(anonymous.status().message().find("needs a key"), std::string::npos) << anonymous.status().message();
  auto client = proxy::make_remote_backend("127.0.0.1", e->port(), 5000, "s3cret-engine-key");
  ASSERT_TRUE(client) << client.status().to_string();
  EXPECT_FALSE((*client)->status().contains("error")) << (*client)->status().dump();
}

// Anyone on the machine can open the engine's port (the key is checked once the headers are in):
// a request that stops halfway gets 408 and is closed after --request-read-timeout, so trickling
// clients cannot hold the engine's workers.
TEST(EngineSlowClients, ARequestThatStopsHalfwayGets408) {
  TempDir dir;
  ASSERT_TRUE(write_model(dir.path() / "model"));
  std::string log;
  auto e = ServeProcess::start({"engine", "--model", (dir.path() / "model").string(), "--port", "0", "--no-store",
                                "--ctx", "256", "--request-read-timeout", "1"},
                               dir.path() / "engine.log", 60, &log, "freetoken engine: ");
  ASSERT_TRUE(e) << log;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(e->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string partial = "GET /engine/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n";  // no blank line
  ASSERT_EQ(::send(fd, partial.data(), partial.size(), MSG_NOSIGNAL), ssize_t(partial.size()));
  std::string answer;
  pollfd p{fd, POLLIN, 0};
  char buf[256];
  for (ssize_t n; ::poll(&p, 1, 10000) > 0 && (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) answer.append(buf, size_t(n));
  ::close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
}

TEST(EngineKey, AKeyFileOthersCanReadIsRefused) {
  TempDir dir;
  const auto key_file = dir.path() / "key";
  { std::ofstream(key_file) << "k\n"; }
  std::filesystem::permissions(key_file, std::filesystem::perms::owner_read | std::filesystem::perms::group_read |
                                             std::filesystem::perms::others_read);
  const CommandResult r = run_freetoken({"engine", "--no-store", "--port", "0", "--key-file", key_file.string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("chmod 600"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ft::test
