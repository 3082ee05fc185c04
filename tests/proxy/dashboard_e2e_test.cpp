// The live dashboard as a user sees it: `freetoken serve` on loopback, a few real requests, then
// Debian's Chromium, headless, on http://127.0.0.1:PORT/. The page must load with no console
// errors and no request to any other host, show the requests' numbers (read back from the DOM,
// and again after one more request without a reload), and ask for the key when the server has one.
// Screenshots go to <build>/test-output/dashboard/.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "headless_chromium.h"
#include "serve_process.h"
#include "test_support.h"

namespace ft::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

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

  static fs::path output_dir() { return fs::path(FT_BINARY_DIR) / "test-output" / "dashboard"; }

  std::unique_ptr<ServeProcess> serve(std::vector<std::string> extra) {
    std::vector<std::string> args = {"serve", "--model", model_->path().string(), "--model-name", "tiny",
                                     "--port", "0", "--ctx", "4096"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::string log;
    auto p = ServeProcess::start(args, work_.path() / "serve.log", 120, &log);
    EXPECT_TRUE(p) << log;
    return p;
  }

  std::unique_ptr<HeadlessChromium> browser() {
    std::string error;
    auto b = HeadlessChromium::start(work_.path() / "chromium", &error);
    EXPECT_TRUE(b) << error;
    return b;
  }

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

  // The text of the element with this id, and the same read as a number ("1,234" -> 1234).
  static std::string text(HeadlessChromium& b, const std::string& id) {
    const json v = b.evaluate("document.getElementById('" + id + "').textContent");
    return v.is_string() ? v.get<std::string>() : v.dump();
  }
  static double number(HeadlessChromium& b, const std::string& id) {
    const json v = b.evaluate("Number(document.getElementById('" + id + "').textContent.replace(/,/g, ''))");
    return v.is_number() ? v.get<double>() : -1;
  }

  static std::string joined(const std::vector<std::string>& lines) {
    std::string out;
    for (const std::string& l : lines) out += "  " + l + "\n";
    return out;
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
  EXPECT_EQ(text(*b, "expert-hit-rate"), "—") << "not reported by the engine: shown as unknown, not invented";

  // Live: one more request shows up without a reload.
  ask(s->port(), replies);
  EXPECT_TRUE(b->wait_until("document.getElementById('requests-total').textContent === '3'", 5s))
      << text(*b, "requests-total");

  const fs::path png = output_dir() / "dashboard.png";
  ASSERT_TRUE(b->screenshot(png));
  std::printf("dashboard screenshot: %s\n", png.c_str());

  EXPECT_TRUE(b->errors().empty()) << "the page logged errors:\n" << joined(b->errors());
  ASSERT_FALSE(b->requested_urls().empty());
  for (const std::string& url : b->requested_urls())
    EXPECT_EQ(url.rfind(origin + "/", 0), 0u) << "a request left this server: " << url;
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

}  // namespace
}  // namespace ft::test
