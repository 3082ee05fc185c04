// Slow and numerous clients against the HTTP server on loopback: requests that trickle in are cut
// off at the read deadline instead of holding workers, and a full connection queue answers 503
// with Retry-After at once instead of leaving clients waiting unanswered.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ft/protocol/chat_render.h"
#include "ft/protocol/tokenizer.h"
#include "ft/proxy/server.h"
#include "test_support.h"

namespace ft::proxy {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A loopback connection the test writes byte by byte.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  bool send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size());
  }
  // Whether the server has sent something or closed.
  bool readable() const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }
  // What the server sends until it closes; nothing when it has not closed by `deadline`.
  std::optional<std::string> read_until_closed(Clock::time_point deadline) {
    std::string out;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) <= 0) return std::nullopt;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return out;  // closed (or reset)
      out.append(buf, size_t(n));
    }
  }
  // One response with a Content-Length body; nothing when it is not whole by `deadline`.
  std::optional<std::string> read_response(Clock::time_point deadline) {
    std::string out;
    for (;;) {
      if (const size_t end = out.find("\r\n\r\n"); end != std::string::npos) {
        const size_t at = out.find("Content-Length: ");
        const size_t length = at < end ? std::stoul(out.substr(at + 16)) : 0;
        if (out.size() >= end + 4 + length) return out;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, int(left.count())) <= 0) return std::nullopt;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return std::nullopt;
      out.append(buf, size_t(n));
    }
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
  bool connected_ = false;
};

// The start of a request whose headers never end.
constexpr const char* kPartialRequest = "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";

// A counter's value in /metrics text (-1 when absent).
double metric(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

class SlowClientsE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!test::have_qwen3_tokenizer()) return;
    dir_ = std::make_unique<test::TempDir>();
    test::write_tiny_chat_model(dir_->path());
  }
  static void TearDownTestSuite() { dir_.reset(); }

  void SetUp() override {
    if (!dir_)
      GTEST_SKIP() << "Qwen3 tokenizer not installed at " << test::qwen3_tokenizer_dir() << " (run scripts/setup.sh)";
  }

  void start_server(ServerOptions opts) {
    opts.port = 0;
    opts.model_id = "tiny";
    LocalBackendOptions bopts;
    bopts.context_length = 4096;
    auto backend = make_local_backend(dir_->path(), bopts);
    ASSERT_TRUE(backend) << backend.status().to_string();
    auto tok = protocol::Tokenizer::load(dir_->path());
    ASSERT_TRUE(tok) << tok.status().to_string();
    auto tmpl = protocol::ChatTemplate::from_tokenizer(*tok);
    ASSERT_TRUE(tmpl) << tmpl.status().to_string();
    auto s = Server::create(opts, std::move(backend).value(), std::move(tok).value(), std::move(tmpl).value());
    ASSERT_TRUE(s);
    server_ = std::move(s).value();
    ASSERT_TRUE(server_->start());
  }

  httplib::Client client(int read_timeout_s = 10) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(read_timeout_s, 0);
    return c;
  }

  static inline std::unique_ptr<test::TempDir> dir_;
  std::unique_ptr<Server> server_;
};

// More trickling clients than workers: each sends a byte a second, well within httplib's wait for
// the next byte, so only a deadline on the whole request frees their workers.
TEST_F(SlowClientsE2E, TricklingClientsAreCutOffAndOthersAreServed) {
  ServerOptions opts;
  opts.http_threads = 2;
  opts.request_read_timeout_s = 2;
  start_server(opts);
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < opts.http_threads + 1; ++i) {
    slow.push_back(std::make_unique<RawClient>(server_->port()));
    ASSERT_TRUE(slow.back()->connected());
    ASSERT_TRUE(slow.back()->send(kPartialRequest));
  }
  // Declared after the clients, so it stops before they close.
  std::jthread trickle([&slow](std::stop_token stop) {
    while (!stop.stop_requested()) {
      for (auto& c : slow)
        if (!c->readable()) c->send("a");  // until the server answers or closes
      for (int i = 0; i < 10 && !stop.stop_requested(); ++i) std::this_thread::sleep_for(100ms);
    }
  });

  auto r = client().Get("/v1/models");
  ASSERT_TRUE(r) << "a normal request waited behind the trickling ones: " << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);

  for (auto& c : slow) {
    const auto answer = c->read_until_closed(Clock::now() + 10s);
    ASSERT_TRUE(answer) << "a trickling client still holds its connection";
    if (!answer->empty()) {
      EXPECT_EQ(answer->rfind("HTTP/1.1 408", 0), 0u) << *answer;
    }
  }
  trickle.request_stop();
  auto m = client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(metric(m->body, "freetoken_request_read_timeouts_total"), 3.0) << m->body;
}

// The deadline bounds each request, not the connection: a keep-alive connection serves a request
// after outliving it, and a request that stops halfway gets 408.
TEST_F(SlowClientsE2E, TheDeadlineIsPerRequest) {
  ServerOptions opts;
  opts.request_read_timeout_s = 1;
  start_server(opts);
  RawClient c(server_->port());
  ASSERT_TRUE(c.connected());
  const std::string get = "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_TRUE(c.send(get));
  auto first = c.read_response(Clock::now() + 10s);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->rfind("HTTP/1.1 200", 0), 0u) << *first;
  std::this_thread::sleep_for(1500ms);
  ASSERT_TRUE(c.send(get));
  auto second = c.read_response(Clock::now() + 10s);
  ASSERT_TRUE(second) << "the connection was cut while idle between requests";
  EXPECT_EQ(second->rfind("HTTP/1.1 200", 0), 0u) << *second;

  ASSERT_TRUE(c.send("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"));  // no blank line: never ends
  auto cut = c.read_until_closed(Clock::now() + 10s);
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->rfind("HTTP/1.1 408", 0), 0u) << *cut;
}

// One worker, one waiting place: with both taken, the next connection is refused at once with a
// retryable 503, and served again once the load is gone.
TEST_F(SlowClientsE2E, AFullQueueAnswers503WithRetryAfterAndRecovers) {
  ServerOptions opts;
  opts.http_threads = 1;
  opts.max_queued_requests = 1;
  opts.request_read_timeout_s = 20;  // the held connections stay held for the whole test
  start_server(opts);
  auto held = std::make_unique<RawClient>(server_->port());     // takes the worker
  auto waiting = std::make_unique<RawClient>(server_->port());  // takes the waiting place
  ASSERT_TRUE(held->connected() && waiting->connected());
  ASSERT_TRUE(held->send(kPartialRequest) && waiting->send(kPartialRequest));

  auto r = client(5).Get("/v1/models");
  ASSERT_TRUE(r) << "a connection past the queue's bound waited unanswered: " << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  const auto body = nlohmann::json::parse(r->body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << r->body;
  EXPECT_EQ(body["error"]["type"], "overloaded_error");
  EXPECT_FALSE(body["error"]["message"].get<std::string>().empty());

  held.reset();
  waiting.reset();
  // The worker notices each closed connection in turn; until then a newcomer may still be refused.
  std::optional<int> status;
  for (const auto until = Clock::now() + 10s; Clock::now() < until && status != 200; std::this_thread::sleep_for(50ms))
    if (auto again = client(5).Get("/v1/models")) status = again->status;
  EXPECT_EQ(status, 200);
  auto m = client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_GE(metric(m->body, "freetoken_connections_refused_total"), 1.0) << m->body;
}

}  // namespace
}  // namespace ft::proxy
