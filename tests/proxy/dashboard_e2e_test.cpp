// The live dashboard as a user sees it: `freetoken serve` on loopback, a few real requests, then
// Debian's Chromium, headless, on http://127.0.0.1:PORT/. The page must load with no console
// errors and no request to any other host, show the requests' numbers (read back from the DOM,
// and again after one more request without a reload), and ask for the key when the server has one.
// What only a GPU server reports (the expert cache of a model whose routed experts live in host RAM)
// is drawn from /v1/stats recorded on one, served next to the page by an in-test server.
// Screenshots go to <build>/test-output/dashboard/.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "../../proxy/src/dashboard.h"
#include "headless_chromium.h"
#include "serve_process.h"
#include "test_support.h"

namespace ft::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

fs::path output_dir() { return fs::path(FT_BINARY_DIR) / "test-output" / "dashboard"; }

// The text of the element with this id, and the same read as a number ("1,234" -> 1234).
std::string text(HeadlessChromium& b, const std::string& id) {
  const json v = b.evaluate("document.getElementById('" + id + "').textContent");
  return v.is_string() ? v.get<std::string>() : v.dump();
}
double number(HeadlessChromium& b, const std::string& id) {
  const json v = b.evaluate("Number(document.getElementById('" + id + "').textContent.replace(/,/g, ''))");
  return v.is_number() ? v.get<double>() : -1;
}
bool hidden(HeadlessChromium& b, const std::string& id) {
  return b.evaluate("document.getElementById('" + id + "').hidden") == json(true);
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += "  " + l + "\n";
  return out;
}

std::unique_ptr<HeadlessChromium> start_browser(const fs::path& work_dir) {
  std::string error;
  auto b = HeadlessChromium::start(work_dir / "chromium", &error);
  EXPECT_TRUE(b) << error;
  return b;
}

// No console errors, and every request went to `origin`.
void expect_clean_and_offline(HeadlessChromium& b, const std::string& origin) {
  EXPECT_TRUE(b.errors().empty()) << "the page logged errors:\n" << joined(b.errors());
  ASSERT_FALSE(b.requested_urls().empty());
  for (const std::string& url : b.requested_urls())
    EXPECT_EQ(url.rfind(origin + "/", 0), 0u) << "a request left this server: " << url;
}

class DashboardE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!have_qwen3_tokenizer()) return;
    model_ = std::make_unique<TempDir>();
    write_tiny_chat_model(model_->path());
  }
  static void TearDownTestSuite() { model_.reset(); }
  void SetUp() override {
    if (!model_) GTEST_SKIP() << "Qwen3 tokenizer not installed (run scripts/setup.sh)";
    if (chromium_binary().empty())
      GTEST_SKIP() << "Chromium not installed (/usr/bin/chromium, or $FT_CHROMIUM): scripts/setup.sh installs it";
    fs::create_directories(output_dir());
  }

  std::unique_ptr<ServeProcess> serve(std::vector<std::string> extra) {
    std::vector<std::string> args = {"serve", "--model", model_->path().string(), "--model-name", "tiny",
                                     "--port", "0", "--ctx", "4096"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::string log;
    auto p = ServeProcess::start(args, work_.path() / "serve.log", 120, &log);
    EXPECT_TRUE(p) << log;
    return p;
  }

  std::unique_ptr<HeadlessChromium> browser() { return start_browser(work_.path()); }

  // One turn of a conversation with a long shared system prompt (so it is checkpointed), sent
  // as an agent would; returns the assistant's text.
  static std::string ask(int port, std::vector<std::string>& replies, const std::string& key = "") {
    json messages = json::array();
    for (std::size_t i = 0; i <= replies.size(); ++i) {
      messages.push_back({{"role", "user"}, {"content", "Question " + std::to_string(i) + ": say hi"}});
      if (i < replies.size()) messages.push_back({{"role", "assistant"}, {"content", replies[i]}});
    }
    const json body = {{"model", "tiny"}, {"max_tokens", 8}, {"temperature", 0},
                       {"system", "You are a terse assistant. " + std::string(300, '.')}, {"messages", messages}};
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    httplib::Headers headers = {{"User-Agent", "dashboard-e2e/1.0 (test)"}};
    if (!key.empty()) headers.emplace("x-api-key", key);
    auto r = c.Post("/v1/messages", headers, body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    const std::string text = r && r->status == 200 ? json::parse(r->body)["content"][0].value("text", "") : "";
    replies.push_back(text);
    return text;
  }

  static inline std::unique_ptr<TempDir> model_;
  TempDir work_;
};

TEST_F(DashboardE2E, ShowsLiveNumbersWithNoConsoleErrorsOrExternalRequests) {
  auto s = serve({"--store", (work_.path() / "store").string()});
  ASSERT_TRUE(s);
  std::vector<std::string> replies;
  ask(s->port(), replies);
  ask(s->port(), replies);  // restores the first turn's checkpoint

  auto b = browser();
  ASSERT_TRUE(b);
  const std::string origin = "http://127.0.0.1:" + std::to_string(s->port());
  ASSERT_TRUE(b->open(origin + "/"));
  ASSERT_TRUE(b->wait_until("document.getElementById('state').textContent === 'live'", 10s)) << text(*b, "state");

  EXPECT_EQ(text(*b, "model"), "tiny");
  EXPECT_EQ(text(*b, "family"), "qwen3_5_moe");
  EXPECT_NE(text(*b, "device"), "—");
  EXPECT_EQ(number(*b, "requests-total"), 2);
  EXPECT_GT(number(*b, "prompt-tokens"), 0);
  EXPECT_GT(number(*b, "restored-tokens"), 0) << "the second turn restored the first";
  EXPECT_GT(number(*b, "computed-tokens"), 0);
  EXPECT_GT(number(*b, "generated-tokens"), 0);
  EXPECT_GE(number(*b, "checkpoint-hits"), 1);
  EXPECT_GT(number(*b, "checkpoints-saved"), 0);
  EXPECT_NE(text(*b, "store-bytes"), "—");
  EXPECT_NE(text(*b, "engine-resident"), "—");
  EXPECT_NE(text(*b, "device-total"), "—");
  EXPECT_EQ(b->evaluate("document.querySelector('#clients tr td').textContent"), "dashboard-e2e");
  EXPECT_EQ(b->evaluate("document.querySelector('#clients tr td:nth-child(3)').textContent"), "2");
  for (const char* card : {"experts", "elastic", "expert-layers"})
    EXPECT_TRUE(hidden(*b, card)) << card << ": a CPU engine reports no expert cache";

  // Live: one more request shows up without a reload.
  ask(s->port(), replies);
  EXPECT_TRUE(b->wait_until("document.getElementById('requests-total').textContent === '3'", 5s))
      << text(*b, "requests-total");

  const fs::path png = output_dir() / "dashboard.png";
  ASSERT_TRUE(b->screenshot(png));
  std::printf("dashboard screenshot: %s\n", png.c_str());

  expect_clean_and_offline(*b, origin);
}

TEST_F(DashboardE2E, AsksForTheApiKeyAndKeepsItOutOfUrlsAndLogs) {
  const std::string key = "dashboard-e2e-key-5b1f0c";
  auto s = serve({"--no-store", "--api-key", key});
  ASSERT_TRUE(s);
  std::vector<std::string> replies;
  ask(s->port(), replies, key);

  auto b = browser();
  ASSERT_TRUE(b);
  const std::string origin = "http://127.0.0.1:" + std::to_string(s->port());
  ASSERT_TRUE(b->open(origin + "/"));
  ASSERT_TRUE(b->wait_until("!document.getElementById('key-prompt').hidden", 10s));
  EXPECT_EQ(text(*b, "requests-total"), "—");
  ASSERT_TRUE(b->screenshot(output_dir() / "dashboard-key-prompt.png"));

  // Typed as a user would: a wrong key is refused and asked for again, the right one shows numbers.
  auto type_key = [&](const std::string& typed) {
    b->evaluate("document.getElementById('key-input').focus()");
    ASSERT_TRUE(b->insert_text(typed));
    b->evaluate("document.querySelector('#key-form button').click()");
  };
  type_key("not-the-key");
  EXPECT_TRUE(b->wait_until("!document.getElementById('key-refused').hidden", 5s));
  type_key(key);
  ASSERT_TRUE(b->wait_until("document.getElementById('requests-total').textContent === '1'", 10s))
      << text(*b, "requests-total") << " / " << text(*b, "state");
  EXPECT_TRUE(b->evaluate("document.getElementById('key-prompt').hidden") == true);
  EXPECT_GT(number(*b, "prompt-tokens"), 0);

  EXPECT_EQ(b->evaluate("location.href"), origin + "/");
  for (const std::string& url : b->requested_urls()) {
    EXPECT_EQ(url.rfind(origin + "/", 0), 0u) << url;
    EXPECT_EQ(url.find(key), std::string::npos) << "the key is in a URL: " << url;
  }
  EXPECT_EQ(s->log().find(key), std::string::npos) << "the key is in the server's log";
  // The only errors: the refused /v1/stats loads that made the page ask for the key.
  for (const std::string& e : b->errors())
    EXPECT_TRUE(e.find("status of 401") != std::string::npos && e.find("/v1/stats") != std::string::npos) << e;
}

// The page as the proxy serves it (the dashboard's own routes) against /v1/stats recorded from a
// GPU server that keeps the routed experts in host RAM (tests/fixtures/stats/: a 16-layer
// Qwen3-30B-A3B-shaped model at a 16 GiB budget, just started and after ~100 requests, an elastic
// shrink and grow), answered by an in-test server: what such a server shows, without a GPU.
class DashboardRecordedStatsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (chromium_binary().empty())
      GTEST_SKIP() << "Chromium not installed (/usr/bin/chromium, or $FT_CHROMIUM): scripts/setup.sh installs it";
    fs::create_directories(output_dir());
    proxy::add_dashboard_routes(http_);
    http_.Get("/v1/stats", [this](const httplib::Request&, httplib::Response& r) {
      std::lock_guard lock(mutex_);
      r.set_content(stats_, "application/json");
    });
    const int port = http_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port, 0);
    origin_ = "http://127.0.0.1:" + std::to_string(port);
    listener_ = std::thread([this] { http_.listen_after_bind(); });
    for (int i = 0; i < 500 && !http_.is_running(); ++i) std::this_thread::sleep_for(10ms);  // stop() needs it
    ASSERT_TRUE(http_.is_running());
  }
  void TearDown() override {
    if (!listener_.joinable()) return;
    http_.stop();
    listener_.join();
  }

  static json recorded(const std::string& name) {
    return json::parse(read_file(fs::path(FT_FIXTURES_DIR) / "stats" / name));
  }
  // What /v1/stats answers from now on (the page sees it at its next poll).
  void answer(const json& stats) {
    std::lock_guard lock(mutex_);
    stats_ = stats.dump();
  }

  // The texts of one column of the per-layer rows (0: layer, 2: hit rate, 4: fetched / CPU).
  static json layer_column(HeadlessChromium& b, int child) {
    return b.evaluate("Array.from(document.querySelectorAll('#layers li'), li => li.children[" + std::to_string(child) +
                      "].textContent)");
  }
  static std::string percent(double fraction) {
    char out[32];
    std::snprintf(out, sizeof out, "%.1f%%", 100 * fraction);
    return out;
  }
  static std::string with_commas(std::int64_t n) {  // as the page writes counts: 5,270
    std::string digits = std::to_string(n), out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
      out += digits[i];
    }
    return out;
  }

  httplib::Server http_;
  std::thread listener_;
  std::mutex mutex_;
  std::string stats_ = "{}";
  std::string origin_;
  TempDir work_;
};

TEST_F(DashboardRecordedStatsE2E, DrawsTheExpertCacheAndVramByUseOfAGpuServer) {
  const json idle = recorded("expert_offload_idle.json");
  const json busy = recorded("expert_offload_busy.json");
  const json& experts = busy["engine"]["placement"]["experts"];
  const json& s = experts["stats"];
  answer(idle);
  auto b = start_browser(work_.path());
  ASSERT_TRUE(b);
  ASSERT_TRUE(b->open(origin_ + "/"));
  ASSERT_TRUE(b->wait_until("document.getElementById('state').textContent === 'live'", 10s)) << text(*b, "state");

  // Just started: the cards are there, with no rate before the first expert was looked up.
  for (const char* card : {"experts", "elastic", "expert-layers"}) EXPECT_FALSE(hidden(*b, card)) << card;
  EXPECT_EQ(text(*b, "expert-hit-rate"), "—");
  EXPECT_EQ(layer_column(*b, 2), json(std::vector<std::string>(16, "—")));

  // After ~100 requests, without a reload.
  answer(busy);
  const std::string hit_rate = percent(s["hit_rate"].get<double>());
  EXPECT_EQ(hit_rate, "90.1%");
  ASSERT_TRUE(b->wait_until("document.getElementById('expert-hit-rate').textContent === '" + hit_rate + "'", 5s))
      << text(*b, "expert-hit-rate");

  // One row per layer: its hit rate, and its misses fetched over PCIe / computed on the CPU.
  ASSERT_EQ(s["layer_hit_rate"].size(), 16u);
  json layers = json::array(), rates = json::array(), misses = json::array();
  for (std::size_t i = 0; i < 16; ++i) {
    layers.push_back(std::to_string(i));
    rates.push_back(percent(s["layer_hit_rate"][i].get<double>()));
    misses.push_back(with_commas(s["layer_fetched"][i].get<std::int64_t>()) + " / " +
                     with_commas(s["layer_cpu_computed"][i].get<std::int64_t>()));
  }
  EXPECT_EQ(layer_column(*b, 0), layers);
  EXPECT_EQ(layer_column(*b, 2), rates);
  EXPECT_EQ(layer_column(*b, 4), misses);
  EXPECT_EQ(rates[0], "87.8%");
  EXPECT_EQ(misses[0], "5,270 / 0");
  EXPECT_EQ(b->evaluate("document.querySelectorAll('#layers li .meter .segment.hits').length"), 16);
  EXPECT_EQ(b->evaluate("document.querySelectorAll('#layers li .meter .segment.fetched').length"), 16);
  // The layer with the most misses fills its bar; the others are drawn to its scale.
  EXPECT_EQ(b->evaluate("document.querySelector('#layers li:nth-child(2) .segment.fetched').style.width"), "100%");

  // The cache: its size, the share of all experts it holds, how misses were served and how fast.
  EXPECT_EQ(number(*b, "expert-hits"), s["hits"].get<double>());
  EXPECT_EQ(number(*b, "expert-fetched"), s["fetched"].get<double>());
  EXPECT_EQ(number(*b, "expert-cpu-computed"), 0);
  EXPECT_EQ(number(*b, "expert-slots"), experts["slots"].get<double>());
  EXPECT_EQ(text(*b, "expert-slot-size"), "9.0 MiB");
  EXPECT_EQ(text(*b, "expert-count"), "2,048") << "16 layers of 128 experts";
  EXPECT_EQ(text(*b, "expert-share"), "51.1%");
  EXPECT_EQ(number(*b, "expert-resident"), s["resident"].get<double>());
  EXPECT_EQ(text(*b, "expert-policy"), "fetch");
  EXPECT_EQ(text(*b, "expert-pcie"), "54.9");
  EXPECT_EQ(text(*b, "expert-cpu"), "—") << "no miss was computed on the CPU: nothing measured";
  EXPECT_EQ(text(*b, "expert-split-pcie"), "51.5");
  EXPECT_EQ(text(*b, "expert-split-cpu"), "78.5");
  EXPECT_EQ(text(*b, "expert-calibrated-pcie"), "52.1");

  // Elastic VRAM: the budget against its ceiling, and the resizes made.
  EXPECT_EQ(text(*b, "elastic-budget"), "16.0 GiB");
  EXPECT_EQ(text(*b, "elastic-ceiling"), "budget, of 16.0 GiB ceiling");
  EXPECT_EQ(text(*b, "elastic-cache"), "9.2 GiB");
  EXPECT_EQ(text(*b, "elastic-free"), "123 GiB");
  EXPECT_EQ(number(*b, "elastic-shrinks"), 4);
  EXPECT_EQ(number(*b, "elastic-grows"), 1);
  EXPECT_EQ(text(*b, "elastic-error"), "none");

  // VRAM by use: a segment per use, the expert cache (not the 18 GiB of experts in host RAM)
  // among them, filling the budget the plan takes all of.
  EXPECT_EQ(text(*b, "device-memory-title"), "Memory · VRAM");
  EXPECT_EQ(b->evaluate("Array.from(document.querySelectorAll('#device-bar .segment'), s => s.title)"),
            json({"embedding + head: 1.2 GiB", "attention + dense: 584 MiB", "expert cache: 9.2 GiB",
                  "KV cache pool: 3.1 GiB", "workspace: 2.0 GiB"}));
  const json filled = b->evaluate(
      "Array.from(document.querySelectorAll('#device-bar .segment'), s => parseFloat(s.style.width))"
      ".reduce((a, w) => a + w, 0)");
  ASSERT_TRUE(filled.is_number()) << filled;
  EXPECT_NEAR(filled.get<double>(), 100, 0.01);
  EXPECT_FALSE(hidden(*b, "host-experts-row"));
  EXPECT_EQ(text(*b, "host-experts"), "18.0 GiB");

  const fs::path png = output_dir() / "dashboard-experts.png";
  ASSERT_TRUE(b->screenshot(png));
  std::printf("dashboard screenshot: %s\n", png.c_str());
  expect_clean_and_offline(*b, origin_);
}

TEST_F(DashboardRecordedStatsE2E, HidesTheExpertCardsWhenTheEngineReportsNoExperts) {
  json resident = recorded("expert_offload_busy.json");  // as if every expert were on the device
  resident["engine"]["placement"].erase("experts");
  // As a linear-attention model's plan: room for its sequences' recurrent state beside the pool.
  json& plan = resident["engine"]["placement"];
  plan["linear_state_sequences"] = 16;
  plan["linear_state_bytes"] = 1ull << 30;
  plan["total_bytes"] = plan["total_bytes"].get<std::uint64_t>() + (1ull << 30);
  answer(resident);
  auto b = start_browser(work_.path());
  ASSERT_TRUE(b);
  ASSERT_TRUE(b->open(origin_ + "/"));
  ASSERT_TRUE(b->wait_until("document.getElementById('state').textContent === 'live'", 10s)) << text(*b, "state");
  auto expect_hidden = [&] {
    for (const char* id : {"experts", "elastic", "expert-layers", "host-experts-row"})
      EXPECT_TRUE(hidden(*b, id)) << id;
  };
  expect_hidden();
  EXPECT_EQ(b->evaluate("document.querySelectorAll('#layers li').length"), 0);
  EXPECT_EQ(b->evaluate("document.querySelectorAll('#device-bar .segment.experts')[0].title"),
            "routed experts: 18.0 GiB");
  EXPECT_EQ(b->evaluate("Array.from(document.querySelectorAll('#device-bar .segment'), s => s.title).slice(-2)"),
            json({"linear state: 1.0 GiB", "workspace: 2.0 GiB"}));
  ASSERT_TRUE(b->screenshot(output_dir() / "dashboard-no-experts.png"));

  // Shown when an engine reports them, hidden again when the next one does not, without a reload.
  answer(recorded("expert_offload_busy.json"));
  EXPECT_TRUE(b->wait_until("!document.getElementById('expert-layers').hidden", 5s));
  EXPECT_EQ(b->evaluate("document.querySelectorAll('#layers li').length"), 16);
  answer(resident);
  EXPECT_TRUE(b->wait_until("document.getElementById('expert-layers').hidden", 5s));
  expect_hidden();
  expect_clean_and_offline(*b, origin_);
}

}  // namespace
}  // namespace ft::test
