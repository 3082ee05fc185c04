// `freetoken serve` as users run it: a proxy process supervising an engine process, checkpoints
// in a RocksDB store. Restart after SIGKILL resumes from disk; an engine that dies mid-stream
// gives its client a clean error and comes back; 100 kills during checkpoint writes leave a store
// that opens, verifies and serves outputs identical to computing everything.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "ft/engine/device.h"
#include "ft/engine/random_checkpoint.h"
#include "serve_process.h"
#include "test_support.h"

namespace ft::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;


class ServeProcessE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!have_qwen3_tokenizer()) return;
    model_ = std::make_unique<TempDir>();
    write_tiny_chat_model(model_->path());
  }
  static void TearDownTestSuite() { model_.reset(); }
  void SetUp() override {
    if (!model_) GTEST_SKIP() << "Qwen3 tokenizer not installed (run scripts/setup.sh)";
  }

  std::unique_ptr<ServeProcess> serve(std::vector<std::string> extra) {
    std::vector<std::string> args = {"serve", "--model", model_->path().string(), "--model-name", "tiny",
                                     "--port", "0", "--ctx", "4096"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::string log;
    auto p = ServeProcess::start(args, work_.path() / ("serve-" + std::to_string(++started_) + ".log"), 120, &log);
    EXPECT_TRUE(p) << log;
    return p;
  }

  static json conversation(const std::vector<std::string>& replies, const std::string& topic = "") {
    json messages = json::array();
    for (std::size_t i = 0; i <= replies.size(); ++i) {
      messages.push_back({{"role", "user"}, {"content", "Question " + std::to_string(i) + topic + ": say hi"}});
      if (i < replies.size()) messages.push_back({{"role", "assistant"}, {"content", replies[i]}});
    }
    return {{"model", "tiny"}, {"max_tokens", 10}, {"temperature", 0},
            {"system", "You are a terse assistant. " + std::string(300, '.')}, {"messages", messages}};
  }

  // POST /v1/messages: {text, cache_read_input_tokens}, or status -1 when the request failed.
  static std::pair<std::string, int> ask(int port, const json& body, int* status = nullptr) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    auto r = c.Post("/v1/messages", body.dump(), "application/json");
    if (status) *status = r ? r->status : -1;
    if (!r || r->status != 200) return {"", -1};
    const json j = json::parse(r->body);
    return {j["content"].empty() ? "" : j["content"][0].value("text", ""),
            j["usage"]["cache_read_input_tokens"].get<int>()};
  }

  static json stats(int port) {
    httplib::Client c("127.0.0.1", port);
    auto r = c.Get("/v1/stats");
    return r && r->status == 200 ? json::parse(r->body) : json();
  }

  // Waits until the store's write-behind queue has written every saved checkpoint.
  static void wait_persisted(int port) {
    for (int i = 0; i < 500; ++i) {
      const json s = stats(port)["engine"];
      if (s.contains("store") && s["store"].is_object() &&
          s["store"]["stats"]["entries"].get<uint64_t>() >= s["scheduler"]["checkpoints_saved"].get<uint64_t>())
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "checkpoints were not persisted";
  }

  static bool process_alive(pid_t pid) { return pid > 0 && kill(pid, 0) == 0; }

  static inline std::unique_ptr<TempDir> model_;
  TempDir work_;
  int started_ = 0;
};

// SIGSTOPs `pid` and waits until it is seen stopped (state T): the signal is asynchronous.
bool stop_process(pid_t pid) {
  kill(pid, SIGSTOP);
  const auto stopped = [&] {
    const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    const auto paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T';
  };
  for (int i = 0; i < 200 && !stopped(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return stopped();
}

TEST_F(ServeProcessE2E, RestartAfterSigkillResumesFromTheStore) {
  const std::string store = (work_.path() / "store").string();
  std::vector<std::string> replies;
  {
    auto s = serve({"--store", store});
    ASSERT_TRUE(s);
    for (int turn = 0; turn < 2; ++turn) {
      auto [text, cached] = ask(s->port(), conversation(replies));
      ASSERT_GE(cached, 0);
      if (turn == 1) {
        EXPECT_GT(cached, 0);
      }
      replies.push_back(text);
    }
    wait_persisted(s->port());
    // Each tier's own stats, fastest first: the RAM tier holds what the disk holds (write-through).
    const json tiers = stats(s->port())["engine"]["store"]["tiers"];
    ASSERT_EQ(tiers.size(), 2u) << tiers.dump();
    EXPECT_EQ(tiers[0]["tier"], "host-ram");
    EXPECT_EQ(tiers[1]["tier"], "rocksdb");
    EXPECT_GT(tiers[0]["stats"]["entries"].get<int>(), 0) << tiers.dump();
    EXPECT_EQ(tiers[0]["stats"]["entries"], tiers[1]["stats"]["entries"]) << tiers.dump();
    const pid_t engine = s->child_pid();
    ASSERT_TRUE(process_alive(engine));
    s->signal(SIGKILL);
    EXPECT_EQ(s->wait(), 128 + SIGKILL);
    for (int i = 0; i < 200 && process_alive(engine); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_FALSE(process_alive(engine)) << "the engine outlived its killed supervisor";
  }
  const json next_turn = conversation(replies);
  std::string restored_text;
  {
    auto s = serve({"--store", store});
    ASSERT_TRUE(s);
    auto [text, cached] = ask(s->port(), next_turn);
    EXPECT_GT(cached, 0) << "nothing restored after the restart";
    restored_text = text;
  }
  auto plain = serve({"--no-store", "--no-prefix-cache"});
  ASSERT_TRUE(plain);
  auto [text, cached] = ask(plain->port(), next_turn);
  EXPECT_EQ(cached, 0);
  EXPECT_EQ(text, restored_text);
}

// Bytes flipped in the stored blobs on disk: every restore that touches them is a miss (the
// checkpoint is dropped and recomputed), never wrong output.
TEST_F(ServeProcessE2E, FlippedBytesOnDiskAreMissesNotWrongOutput) {
  const fs::path store = work_.path() / "store";
  std::vector<std::string> replies;
  {
    auto s = serve({"--store", store.string(), "--checkpoint-ram-gb", "0"});
    ASSERT_TRUE(s);
    for (int turn = 0; turn < 2; ++turn) replies.push_back(ask(s->port(), conversation(replies)).first);
    wait_persisted(s->port());
  }  // SIGTERM: a clean stop flushes everything to the blob files
  std::size_t flipped = 0;
  for (const auto& e : fs::recursive_directory_iterator(store)) {
    if (e.path().extension() != ".blob") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    const auto size = std::int64_t(fs::file_size(e.path()));
    for (std::int64_t at = 4096; at < size - 64; at += 8192) {  // payload bytes, past the file header
      f.seekg(at);
      char c = 0;
      f.read(&c, 1);
      f.seekp(at);
      c = char(c ^ 0x5a);
      f.write(&c, 1);
      ++flipped;
    }
  }
  std::string listing;
  for (const auto& e : fs::recursive_directory_iterator(store)) listing += e.path().filename().string() + " ";
  ASSERT_GT(flipped, 0u) << "no blob files found under " << store << ": " << listing;

  const json next_turn = conversation(replies);
  std::string text;
  {
    auto s = serve({"--store", store.string(), "--checkpoint-ram-gb", "0"});
    ASSERT_TRUE(s);
    auto [t, cached] = ask(s->port(), next_turn);
    EXPECT_GE(cached, 0);
    text = t;
    const json st = stats(s->port())["engine"];
    EXPECT_GT(st["scheduler"]["restore_misses"].get<int>() + st["store"]["stats"]["corruptions"].get<int>(), 0)
        << st.dump();
  }
  auto plain = serve({"--no-store", "--no-prefix-cache"});
  ASSERT_TRUE(plain);
  EXPECT_EQ(ask(plain->port(), next_turn).first, text);
  // Entries no request read are still there, flipped: verify finds and drops them, then all is clean.
  CommandResult verify = run_freetoken({"ctl", "checkpoints", "verify", "--store", store.string(), "--json"});
  EXPECT_EQ(verify.exit_code, json::parse(verify.out)["corrupt"].get<int>() > 0 ? 1 : 0) << verify.out;
  CommandResult again = run_freetoken({"ctl", "checkpoints", "verify", "--store", store.string(), "--json"});
  EXPECT_EQ(again.exit_code, 0) << again.out;
  EXPECT_EQ(json::parse(again.out)["corrupt"].get<int>(), 0) << again.out;
}

TEST_F(ServeProcessE2E, EngineDeathMidStreamIsACleanErrorAndTheEngineComesBack) {
  auto s = serve({"--no-store"});
  ASSERT_TRUE(s);
  const pid_t engine = s->child_pid();
  ASSERT_TRUE(process_alive(engine));
  json body = conversation({});
  body["max_tokens"] = 100000;
  body["stream"] = true;
  std::string received;
  bool killed = false;
  httplib::Client c("127.0.0.1", s->port());
  c.set_read_timeout(60, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/messages";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    received.append(data, n);
    if (!killed && received.find("content_block_delta") != std::string::npos) {
      kill(engine, SIGKILL);
      killed = true;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err;
  c.send(req, res, err);
  ASSERT_TRUE(killed) << received;
  EXPECT_NE(received.find("event: error"), std::string::npos) << received.substr(received.size() > 600 ? received.size() - 600 : 0);
  EXPECT_NE(received.find("\"type\":\"overloaded_error\""), std::string::npos);  // retry: the engine comes back
  EXPECT_EQ(received.find("event: message_stop"), std::string::npos);

  // The supervisor starts a new engine; requests succeed again (503 + Retry-After meanwhile).
  int status = 0;
  for (int i = 0; i < 300; ++i) {
    ask(s->port(), conversation({}), &status);
    if (status == 200) break;
    EXPECT_TRUE(status == 503 || status == 529) << status;  // retryable, never a 500
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(status, 200);
  EXPECT_GT(s->child_pid(), 0);
  EXPECT_NE(s->child_pid(), engine);
  EXPECT_NE(s->log().find("restarting"), std::string::npos);

  // /health speaks for the pair: a hung engine (stopped, so not restarted) makes it 503 with
  // Retry-After, and it is 200 again once the engine answers.
  httplib::Client h("127.0.0.1", s->port());
  h.set_read_timeout(30, 0);
  EXPECT_EQ(h.Get("/health")->status, 200);
  const pid_t again = s->child_pid();
  ASSERT_GT(again, 0);  // kill(-1, ...) would signal every process
  ASSERT_NE(read_file("/proc/" + std::to_string(again) + "/cmdline").find("engine"), std::string::npos);
  ASSERT_TRUE(stop_process(again));
  auto hung = h.Get("/health");
  kill(again, SIGCONT);
  ASSERT_TRUE(hung);
  EXPECT_EQ(hung->status, 503) << hung->body;
  EXPECT_EQ(hung->get_header_value("Retry-After"), "1");
  EXPECT_EQ(h.Get("/health")->status, 200);
}

// A hung engine (stopped, so alive and not restarted) fails a request within the stall timeout
// as a 503 with Retry-After, not after hours; once it answers again, so does the server.
TEST_F(ServeProcessE2E, AHungEngineIsA503WithinTheStallTimeout) {
  auto s = serve({"--no-store", "--engine-stall-timeout", "2"});
  ASSERT_TRUE(s);
  int status = 0;
  ask(s->port(), conversation({}), &status);
  ASSERT_EQ(status, 200);
  const pid_t engine = s->child_pid();
  ASSERT_GT(engine, 0);  // kill(-1, ...) would signal every process
  ASSERT_TRUE(stop_process(engine));
  httplib::Client c("127.0.0.1", s->port());
  c.set_read_timeout(60, 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto hung = c.Post("/v1/messages", conversation({}).dump(), "application/json");
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  kill(engine, SIGCONT);
  ASSERT_TRUE(hung);
  EXPECT_EQ(hung->status, 503) << hung->body;
  EXPECT_EQ(hung->get_header_value("Retry-After"), "1");
  EXPECT_LT(waited, 20.0);
  ask(s->port(), conversation({}), &status);
  EXPECT_EQ(status, 200);
}

// An engine that stops answering (SIGSTOP: alive, so no exit to notice) is found by the
// supervisor's liveness probe, killed and restarted on a fresh port, which the proxy follows.
TEST_F(ServeProcessE2E, AHungEngineIsKilledAndRestartedOnAFreshPort) {
  auto s = serve({"--no-store", "--engine-liveness-timeout", "3"});
  ASSERT_TRUE(s);
  int status = 0;
  const auto [first, cached] = ask(s->port(), conversation({}), &status);
  ASSERT_EQ(status, 200);
  const pid_t engine = s->child_pid();
  ASSERT_GT(engine, 0);  // kill(-1, ...) would signal every process
  ASSERT_TRUE(stop_process(engine));
  std::string again;
  for (int i = 0; i < 600; ++i) {
    std::tie(again, std::ignore) = ask(s->port(), conversation({}), &status);
    if (status == 200 && s->child_pid() != engine) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(engine, SIGCONT);  // in case it was not killed
  EXPECT_EQ(status, 200);
  EXPECT_NE(s->child_pid(), engine);
  EXPECT_EQ(again, first);  // greedy: the new engine answers as the old one did
  const std::string log = s->log();
  EXPECT_NE(log.find("has not answered"), std::string::npos) << log;
  EXPECT_NE(log.find("the engine is back on port"), std::string::npos) << log;
}

// An engine that cannot start again (its model is gone) is not restarted forever: after five
// failures in a row serve says why and exits non-zero.
TEST_F(ServeProcessE2E, AnEngineThatKeepsFailingEndsServe) {
  TempDir copy;
  std::filesystem::copy(model_->path(), copy.path() / "model", std::filesystem::copy_options::recursive);
  std::vector<std::string> args = {"serve", "--model", (copy.path() / "model").string(), "--model-name", "tiny",
                                   "--port", "0", "--ctx", "4096", "--no-store"};
  std::string log;
  auto s = ServeProcess::start(args, work_.path() / "failing.log", 120, &log);
  ASSERT_TRUE(s) << log;
  std::filesystem::remove(copy.path() / "model" / "config.json");
  const pid_t engine = s->child_pid();
  ASSERT_GT(engine, 0);
  kill(engine, SIGKILL);
  // Back-off 0.25 + 0.5 + 1 + 2 s between the failed starts: it ends (a zombie until reaped) well
  // within a minute; a serve that restarts forever fails here instead of hanging the suite.
  const auto ended = [&] {
    const std::string stat = read_file("/proc/" + std::to_string(s->pid()) + "/stat");
    const auto paren = stat.rfind(')');
    return stat.empty() || (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z');
  };
  for (int i = 0; i < 600 && !ended(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(ended()) << s->log();
  EXPECT_NE(s->wait(), 0);
  const std::string out = s->log();
  EXPECT_NE(out.find("giving up"), std::string::npos) << out;
  EXPECT_NE(out.find("the engine keeps failing"), std::string::npos) << out;
}

// An engine killed again and again after it has served a while (out of memory, an operator, a
// chaos test) is restarted every time: only engines that end within the crash window of coming up
// count toward giving up (it used to count any within a minute of starting: a kill every minute
// ended serve at the fifth).
TEST_F(ServeProcessE2E, AnEngineKilledAfterServingAWhileIsAlwaysRestarted) {
  auto s = serve({"--no-store", "--engine-crash-window", "1"});
  ASSERT_TRUE(s);
  constexpr int kKills = 6;
  for (int k = 0; k <= kKills; ++k) {
    int status = 0;
    for (int i = 0; i < 600 && status != 200; ++i) {
      ask(s->port(), conversation({}), &status);
      if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(status, 200) << "after " << k << " kills: " << s->log();
    if (k == kKills) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // served longer than the window
    const pid_t engine = s->child_pid();
    ASSERT_GT(engine, 0);  // kill(-1, ...) would signal every process
    kill(engine, SIGKILL);
    for (int i = 0; i < 600 && s->child_pid() == engine; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::string log = s->log();
  EXPECT_EQ(log.find("giving up"), std::string::npos) << log;
  std::size_t restarts = 0;
  for (auto at = log.find("restarting it"); at != std::string::npos; at = log.find("restarting it", at + 1)) ++restarts;
  EXPECT_EQ(restarts, std::size_t(kKills)) << log;
}

// Through the real process pair: a 10 MB body is a 413 in the API's schema, a full engine queue
// is a 529 with Retry-After, and the server keeps serving.
TEST_F(ServeProcessE2E, OversizeBodyAndOverloadKeepTheirStatusesAcrossTheProcessPair) {
  auto s = serve({"--no-store", "--max-running", "1", "--max-waiting", "0"});
  ASSERT_TRUE(s);
  httplib::Client c("127.0.0.1", s->port());
  c.set_read_timeout(120, 0);
  json huge = conversation({});
  huge["messages"][0]["content"] = std::string(10 << 20, 'a');
  auto big = c.Post("/v1/messages", huge.dump(), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413) << big->body.substr(0, 300);
  EXPECT_EQ(json::parse(big->body)["error"]["type"], "request_too_large");

  json slow = conversation({});
  slow["max_tokens"] = 400;
  std::thread busy([&] { ask(s->port(), slow); });
  for (int i = 0; i < 500 && stats(s->port())["engine"]["scheduler"]["running"] != 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto refused = c.Post("/v1/messages", conversation({}).dump(), "application/json");
  busy.join();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 529) << refused->body;
  EXPECT_EQ(refused->get_header_value("Retry-After"), "1");
  int status = 0;
  ask(s->port(), conversation({}), &status);
  EXPECT_EQ(status, 200);
}

// Across the process pair: eight concurrent streams complete in shared forward passes, and a
// client that hangs up mid-stream has its engine work cancelled.
// On the GPU host: the engine with its routed experts in host RAM (a 5-slot expert cache) answers
// a conversation as the all-in-VRAM engine does, restores the earlier turns, and shows its cache
// and split in /v1/stats and /metrics.
TEST_F(ServeProcessE2E, ExpertsInHostRamServeTheSameRepliesAndShowTheirStats) {
  if (!engine::query_cuda_device()) GTEST_SKIP() << "no GPU";
  auto plain = serve({"--device", "cuda", "--no-store", "--no-prefix-cache"});
  auto off = serve({"--device", "cuda", "--no-store", "--expert-slots", "5", "--moe-policy", "ratio:0.5"});
  ASSERT_TRUE(plain && off);
  std::vector<std::string> replies;
  for (int turn = 0; turn < 3; ++turn) {
    const json body = conversation(replies);
    const auto [want, want_cached] = ask(plain->port(), body);
    const auto [got, cached] = ask(off->port(), body);
    ASSERT_EQ(want_cached, 0);
    EXPECT_EQ(got, want) << "turn " << turn;
    if (turn > 0) {
      EXPECT_GT(cached, 0) << "turn " << turn;
    }
    replies.push_back(got);
  }
  const json x = stats(off->port())["engine"]["placement"]["experts"];
  ASSERT_TRUE(x.is_object()) << stats(off->port()).dump();
  EXPECT_EQ(x["slots"], 5);
  EXPECT_GT(x["stats"]["fetched"].get<uint64_t>(), 0u);
  EXPECT_GT(x["stats"]["cpu_computed"].get<uint64_t>(), 0u);
  EXPECT_FALSE(stats(plain->port())["engine"]["placement"].contains("experts"));
  httplib::Client c("127.0.0.1", off->port());
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m && m->status == 200);
  EXPECT_NE(m->body.find("freetoken_expert_hits_total"), std::string::npos);
  EXPECT_NE(m->body.find("freetoken_expert_layer_hit_rate{layer=\"0\"}"), std::string::npos);
}

// Through the process pair (proxy -> engine route): a CPU engine has no expert cache to resize,
// and says so in ctl's one line; the server goes on serving.
TEST_F(ServeProcessE2E, CtlMemoryOnACpuEngineIsAClearRefusal) {
  auto s = serve({"--no-store"});
  ASSERT_TRUE(s);
  const test::CommandResult r =
      test::run_freetoken({"ctl", "memory", "--gpu-mem", "2", "--port", std::to_string(s->port())});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("expert cache"), std::string::npos) << r.err;
  int status = 0;
  ask(s->port(), conversation({}), &status);
  EXPECT_EQ(status, 200);
}

// `ctl memory --gpu-mem` shrinks and grows a running server's expert cache between turns; the
// replies stay those of the model with every expert on the GPU.
TEST_F(ServeProcessE2E, CtlMemoryResizesTheExpertCacheOfARunningServer) {
  if (!engine::query_cuda_device()) GTEST_SKIP() << "no GPU";
  auto plain = serve({"--device", "cuda", "--no-store", "--no-prefix-cache"});
  auto off = serve({"--device", "cuda", "--no-store", "--expert-slots", "16", "--moe-policy", "ratio:0.5"});
  ASSERT_TRUE(plain && off);
  const json x = stats(off->port())["engine"]["placement"];
  ASSERT_TRUE(x.contains("experts")) << x.dump();
  const double total = x["total_bytes"].get<double>(), slot = x["experts"]["slot_bytes"].get<double>();
  const auto ctl = [&](double bytes) {
    char gib[64];
    std::snprintf(gib, sizeof gib, "%.12f", bytes / double(1ull << 30));
    const test::CommandResult r =
        test::run_freetoken({"ctl", "memory", "--json", "--gpu-mem", gib, "--port", std::to_string(off->port())});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    const json j = json::parse(r.out, nullptr, false);
    return j.is_object() ? j["placement"]["experts"]["slots"].get<int>() : -1;
  };
  std::vector<std::string> replies;
  for (const double bytes : {total - 8 * slot, total}) {
    const int slots = ctl(bytes + slot / 2);
    EXPECT_EQ(slots, bytes < total ? 8 : 16);
    EXPECT_EQ(stats(off->port())["engine"]["placement"]["experts"]["slots"], slots);
    const json body = conversation(replies);
    const auto [want, want_cached] = ask(plain->port(), body);
    const auto [got, cached] = ask(off->port(), body);
    EXPECT_EQ(got, want) << "with " << slots << " slots";
    replies.push_back(got);
  }
}

TEST_F(ServeProcessE2E, ConcurrentStreamsBatchAndAHangUpCancelsTheEngineWork) {
  auto s = serve({"--no-store"});
  ASSERT_TRUE(s);
  std::vector<std::thread> threads;
  std::atomic<int> completed{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      json body = conversation({}, " stream " + std::to_string(i));
      body["stream"] = true;
      body["max_tokens"] = 48;
      httplib::Client c("127.0.0.1", s->port());
      c.set_read_timeout(120, 0);
      auto r = c.Post("/v1/messages", body.dump(), "application/json");
      if (r && r->status == 200 && r->body.find("event: message_stop") != std::string::npos) ++completed;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(completed.load(), 8);
  json sched = stats(s->port())["engine"]["scheduler"];
  EXPECT_GT(sched["batched_steps"].get<int>(), 0) << sched.dump();
  EXPECT_GE(sched["max_batch_sequences"].get<int>(), 4) << sched.dump();

  json body = conversation({});
  body["stream"] = true;
  body["max_tokens"] = 100000;
  httplib::Client c("127.0.0.1", s->port());
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/messages";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  int chunks = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 4; };  // hang up
  httplib::Response res;
  httplib::Error err;
  c.send(req, res, err);
  for (int i = 0; i < 300; ++i) {
    sched = stats(s->port())["engine"]["scheduler"];
    if (sched["cancelled"].get<int>() >= 1 && sched["running"].get<int>() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(sched["cancelled"].get<int>(), 1) << sched.dump();
  EXPECT_EQ(sched["running"].get<int>(), 0) << sched.dump();
  EXPECT_LT(sched["generated_tokens"].get<int>(), 8 * 48 + 2000);
}

TEST_F(ServeProcessE2E, HundredKillsDuringCheckpointWritesLeaveAConsistentStore) {
  const std::string store = (work_.path() / "store").string();
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int> delay_ms(0, 120);
  std::vector<std::string> history = {"One", "Two", "Three", "Four", "Five", "Six"};
  for (int round = 0; round < 100; ++round) {
    auto s = serve({"--store", store, "--checkpoint-stride", "16"});
    ASSERT_TRUE(s) << "round " << round;
    // A long conversation with many boundaries: many checkpoints in flight when the kill lands.
    std::thread client([port = s->port(), body = conversation(history, " round " + std::to_string(round % 7))] {
      ask(port, body);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    s->signal(SIGKILL);
    s->wait();
    client.join();
  }
  // The store opens and every checkpoint in it verifies.
  CommandResult verify = run_freetoken({"ctl", "checkpoints", "verify", "--store", store, "--json"});
  ASSERT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  const json report = json::parse(verify.out);
  EXPECT_EQ(report["corrupt"].get<int>(), 0) << verify.out;
  EXPECT_GT(report["checked"].get<int>(), 0) << verify.out;

  // And it serves the same outputs as computing everything.
  std::vector<std::string> restored, plain;
  {
    auto s = serve({"--store", store, "--checkpoint-stride", "16"});
    ASSERT_TRUE(s);
    for (int topic = 0; topic < 7; ++topic) {
      auto [text, cached] = ask(s->port(), conversation(history, " round " + std::to_string(topic)));
      EXPECT_GE(cached, 0);
      restored.push_back(text);
    }
    EXPECT_GT(stats(s->port())["engine"]["scheduler"]["cached_tokens"].get<int>(), 0);
  }
  auto s = serve({"--no-store", "--no-prefix-cache"});
  ASSERT_TRUE(s);
  for (int topic = 0; topic < 7; ++topic)
    plain.push_back(ask(s->port(), conversation(history, " round " + std::to_string(topic))).first);
  EXPECT_EQ(restored, plain);
}

}  // namespace
}  // namespace ft::test
