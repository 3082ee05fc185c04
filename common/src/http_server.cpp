#include "ft/common/http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "bounded_task_queue.h"
#include "deadline_socket_stream.h"
#include "ft/common/log.h"

namespace ft {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// True while the accept thread runs a connection the queue had no room for. httplib hands the
// queue a closure over the socket, not the socket; the queue runs that closure on the spot, and
// process_and_close_socket, seeing this, refuses the connection instead of serving it.
thread_local bool t_refusing = false;

// How often a worker waiting on an idle connection looks whether the server is stopping.
constexpr milliseconds kStopCheck{100};

// Never blocks (the refusal runs on the accept thread): a fresh socket's buffer takes a short
// answer whole, and a client that lets it fill is not waited for.
void send_now(socket_t sock, const std::string& bytes) {
  (void)::send(sock, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

milliseconds timeout_of(time_t sec, time_t usec) {
  return std::chrono::duration_cast<milliseconds>(std::chrono::seconds(sec) + std::chrono::microseconds(usec));
}

}  // namespace

HttpServer::HttpServer(HttpLimits limits) : limits_(std::move(limits)) {
  const size_t threads = size_t(std::max(1, limits_.threads));
  const size_t queued = size_t(std::max(0, limits_.max_queued_requests));
  // httplib's API takes ownership of a raw pointer here.
  new_task_queue = [threads, queued] {
    return new BoundedTaskQueue(threads, queued, [](std::function<void()> job) {
      t_refusing = true;
      job();
      t_refusing = false;
    });
  };
}

Result<int> HttpServer::listen_in_background(const std::string& host, int port, std::thread& thread) {
  if (port == 0) {
    port = bind_to_any_port(host);
    if (port <= 0) return unavailable("cannot bind " + host);
  } else if (!bind_to_port(host, port)) {
    return unavailable("cannot bind " + host + ":" + std::to_string(port) + " (in use?)");
  }
  // Listening again on a listening socket only changes its backlog (Linux).
  ::listen(svr_sock_, SOMAXCONN);
  thread = std::thread([this] { listen_after_bind(); });
  while (!is_running()) std::this_thread::sleep_for(milliseconds(1));
  return port;
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  if (t_refusing) {
    refuse(sock);
    return false;
  }
  DeadlineSocketStream stream(sock, timeout_of(read_timeout_sec_, read_timeout_usec_),
                              timeout_of(write_timeout_sec_, write_timeout_usec_));
  bool ok = false;
  for (size_t left = keep_alive_max_count_; left > 0 && next_request_arrives(stream); --left) {
    stream.start_request(limits_.request_read_timeout_s > 0
                             ? Clock::now() + std::chrono::seconds(limits_.request_read_timeout_s)
                             : Clock::time_point::max());
    bool client_closes = false;
    ok = process_request(stream, /*close_connection=*/left == 1, client_closes, nullptr);
    if (stream.timed_out()) {
      ++read_timeouts_;
      send_now(sock, "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      ok = false;
    }
    if (!ok || client_closes) break;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

bool HttpServer::next_request_arrives(const DeadlineSocketStream& stream) const {
  const Clock::time_point until = Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
  while (svr_sock_ != INVALID_SOCKET) {
    const milliseconds left = std::chrono::ceil<milliseconds>(until - Clock::now());
    if (left.count() <= 0) return false;
    if (stream.wait_for_request(std::min(left, kStopCheck))) return true;
  }
  return false;
}

void HttpServer::refuse(socket_t sock) {
  ++refused_;
  const std::string& body = limits_.refusal_body;
  send_now(sock, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body);
  // Closing a socket with unread bytes resets the connection, and a reset can discard the answer
  // before the client reads it: end our side first and drop what the client has sent so far.
  ::shutdown(sock, SHUT_WR);
  char scratch[4096];
  for (int i = 0; i < 16 && ::recv(sock, scratch, sizeof scratch, MSG_DONTWAIT) > 0; ++i) {
  }
  ::close(sock);
  const Clock::time_point now = Clock::now();
  if (now - last_refusal_warning_ >= std::chrono::seconds(10)) {
    last_refusal_warning_ = now;
    FT_WARN("all " << limits_.threads << " HTTP workers are busy and " << limits_.max_queued_requests
                   << " connections wait: new ones get 503 (" << refused_total() << " refused so far)");
  }
}

}  // namespace ft
